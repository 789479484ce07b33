"""Reranking on hand-computed cases: a query's candidates in 2-d, one tie between a relevant and a
judged non-relevant candidate, a relevant document outside the candidates, and a query whose
judgements are all grade 0 — under the project's tie-aware conventions and under MTEB's."""

import numpy as np
import polars as pl
import pytest

from embedpyramid.config import RerankingSettings
from embedpyramid.tasks.reranking import compare_reranking, evaluate_reranking, mteb_key
from embedpyramid.vectors import TextVectors

VECTORS = {"q:qa": [1.0, 0.0], "d:d1": [1.0, 0.0], "d:d2": [0.0, 1.0], "d:d3": [0.0, 1.0], "d:d9": [1.0, 1.0],
           "q:qb": [0.0, 1.0], "d:e1": [0.0, 1.0], "d:e2": [1.0, 0.0]}
PAIRS = pl.DataFrame(
    [("qa/d1", "q:qa", "d:d1", 0.0, "yes", "no"), ("qa/d2", "q:qa", "d:d2", 1.0, "yes", "yes"),
     ("qa/d3", "q:qa", "d:d3", 0.0, "yes", "yes"), ("qa/d9", "q:qa", "d:d9", 1.0, "no", "yes"),
     ("qb/e1", "q:qb", "d:e1", 0.0, "yes", "yes"), ("qb/e2", "q:qb", "d:e2", 0.0, "yes", "yes")],
    schema=["pair_id", "text_id_1", "text_id_2", "gold", "candidate", "judged"], orient="row",
).with_columns(pl.lit("test").alias("split"))


def run(settings: RerankingSettings):
    vectors = TextVectors(list(VECTORS), np.array(list(VECTORS.values()), dtype=np.float32))
    return evaluate_reranking(PAIRS, vectors, settings, dataset="d", model="m")


def values(result) -> dict[tuple[str, str], float]:
    return {(row["query_id"], row["metric"]): row["value"] for row in result.per_item.iter_rows(named=True)}


def test_the_project_protocol_takes_the_expected_value_over_tied_candidates():
    # qa: d1 (not relevant) first; d2 (relevant) and d3 (judged 0) tie for ranks 2 and 3; d9 is relevant
    # but no candidate, so R = 2 and the ideal ranking holds two gains of 1.
    result = run(RerankingSettings())
    got = values(result)
    assert got[("qa", "MAP@1000")] == pytest.approx((0.5 * 1 / 2 + 0.5 * 1 / 3) / 2)  # 5/24
    assert got[("qa", "MRR@10")] == pytest.approx(0.5 * 1 / 2 + 0.5 * 1 / 3)  # 5/12
    dcg = 0.5 / np.log2(3) + 0.5 / np.log2(4)
    assert got[("qa", "nDCG@10")] == pytest.approx(dcg / (1 + 1 / np.log2(3)))
    # qb has no relevant judgement: excluded and counted under the project's conventions.
    assert {query for query, _ in got} == {"qa"} and result.settings["excluded_queries"] == 1
    assert result.summary.filter(pl.col("metric") == "MAP@1000")["n_items"][0] == 1
    assert result.settings["conventions"]["ties"] == "expected" and result.settings["primary_metric"] == "MAP@1000"


def test_mtebs_protocol_orders_ties_by_doc_id_descending_and_averages_every_judged_query():
    result = run(RerankingSettings(protocol="mteb"))
    got = values(result)
    # trec_eval's order puts d3 before d2: the relevant candidate ranks third.
    assert got[("qa", "MAP@1000")] == pytest.approx((1 / 3) / 2)
    assert got[("qa", "MRR@10")] == pytest.approx(1 / 3) and got[("qa", "MRR@1")] == 0.0
    assert got[("qa", "nDCG@10")] == pytest.approx((1 / np.log2(4)) / (1 + 1 / np.log2(3)))
    assert got[("qb", "MAP@1000")] == 0.0  # every judgement grade 0: scored 0, and averaged
    summary = dict(result.summary.select("metric", "value").iter_rows())
    assert summary["MAP@1000"] == pytest.approx((1 / 6 + 0) / 2)
    assert result.settings["main_score"] == {"system": "cosine", "metric": "MAP@1000", "mteb_key": "map_at_1000"}
    assert [mteb_key(m) for m in ("nDCG@10", "MRR@10", "Hit@5", "P@1")] == [
        "ndcg_at_10", "mrr_at_10", "hit_rate_at_5", "precision_at_1"]
    assert compare_reranking(result.predictions, result.predictions).is_empty()  # per-query rows are compared


def test_settings_name_a_computed_primary_measure_and_refuse_a_text_kind():
    with pytest.raises(ValueError, match=r"primary_metric nDCG@5 is not computed under protocol 'project'; computed: "
                                         "MAP@1000, MRR@10, nDCG@10"):
        RerankingSettings(primary_metric="ndcg@5")
    assert RerankingSettings(protocol="mteb", primary_metric="ndcg@5").primary_metric == "nDCG@5"
    with pytest.raises(ValueError, match="text_kind does not apply"):
        RerankingSettings(text_kind="document")
