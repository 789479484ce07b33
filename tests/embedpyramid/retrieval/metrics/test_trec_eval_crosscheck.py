"""Every measure, per query, against trec_eval (pytrec_eval) on randomised runs and qrels."""

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from embedpyramid.retrieval.metrics import Measure, MetricConventions, default_measures, evaluate_run

CUTOFFS = (1, 2, 3, 5, 10, 20)
N_QUERIES = 40
N_DOCS = 60
# our name -> pytrec_eval measure family; recip_rank is handled per cutoff below
TREC_FAMILY = {"nDCG": "ndcg_cut", "P": "P", "Recall": "recall", "MAP": "map_cut", "Hit": "success"}


def random_collection(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Graded qrels (-1..3) and a run with score ties, unjudged documents, a shuffled rank
    column, queries without positives and queries without any retrieved document."""
    rng = np.random.default_rng(seed)
    qrel_rows: list[tuple[str, str, int]] = []
    run_rows: list[tuple[str, int, str, float]] = []
    for q in range(N_QUERIES):
        query_id = f"q{q:02d}"
        judged = rng.choice(N_DOCS, size=rng.integers(1, 25), replace=False)
        no_positive = q % 7 == 0
        grades = rng.integers(-1, 1 if no_positive else 4, size=judged.size)
        qrel_rows += [(query_id, f"d{d:02d}", int(g)) for d, g in zip(judged, grades, strict=True)]
        depth = 0 if q % 9 == 1 else int(rng.integers(1, 30))
        retrieved = rng.choice(N_DOCS, size=depth, replace=False)
        scores = rng.integers(0, 8, size=depth) / 8  # few distinct values: many ties
        ranks = rng.permutation(depth) + 1
        run_rows += [
            (query_id, int(r), f"d{d:02d}", float(s))
            for d, s, r in zip(retrieved, scores, ranks, strict=True)
        ]
    qrels = pl.DataFrame(
        qrel_rows, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64},
        orient="row",
    )
    run = pl.DataFrame(
        run_rows,
        schema={"query_id": pl.String, "rank": pl.Int64, "doc_id": pl.String, "score": pl.Float64},
        orient="row",
    )
    return run, qrels


def project_ranking(run: pl.DataFrame) -> dict[str, list[str]]:
    """The project's order, computed independently: score descending, then doc_id ascending."""
    ranking: dict[str, list[str]] = {}
    for query_id, doc_id, score in sorted(
        run.select("query_id", "doc_id", "score").rows(), key=lambda row: (row[0], -row[2], row[1])
    ):
        ranking.setdefault(query_id, []).append(doc_id)
    return ranking


def trec_run(
    ranking: dict[str, list[str]], depth: int | None = None
) -> dict[str, dict[str, float]]:
    """Scores strictly decreasing with rank, so trec_eval's own tie-breaking never applies."""
    return {
        query_id: {doc_id: 1000.0 - rank for rank, doc_id in enumerate(docs[:depth])}
        for query_id, docs in ranking.items()
    }


def trec_eval_values(
    run: pl.DataFrame, qrels: pl.DataFrame, relevance_level: int
) -> dict[str, dict[str, float]]:
    """trec_eval per query, keyed by our canonical measure names."""
    trec_qrels: dict[str, dict[str, int]] = {}
    for query_id, doc_id, relevance in qrels.rows():
        trec_qrels.setdefault(query_id, {})[doc_id] = relevance
    ranking = project_ranking(run)
    cutoff_list = ",".join(map(str, CUTOFFS))
    evaluator = pytrec_eval.RelevanceEvaluator(
        trec_qrels,
        {f"{family}.{cutoff_list}" for family in TREC_FAMILY.values()} | {"Rprec"},
        relevance_level=relevance_level,
    )
    expected: dict[str, dict[str, float]] = {}
    for query_id, trec in evaluator.evaluate(trec_run(ranking)).items():
        row = expected.setdefault(query_id, {"RPrec": trec["Rprec"]})
        for name, family in TREC_FAMILY.items():
            row |= {f"{name}@{k}": trec[f"{family}_{k}"] for k in CUTOFFS}
    reciprocal = pytrec_eval.RelevanceEvaluator(
        trec_qrels, {"recip_rank"}, relevance_level=relevance_level
    )
    for k in CUTOFFS:
        for query_id, trec in reciprocal.evaluate(trec_run(ranking, depth=k)).items():
            expected[query_id][f"MRR@{k}"] = trec["recip_rank"]
    return expected


def test_pytrec_eval_accepts_non_default_cutoffs() -> None:
    evaluator = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"ndcg_cut.1,2,3", "map_cut.2"})
    assert set(evaluator.evaluate({"q": {"a": 1.0}})["q"]) == {
        "ndcg_cut_1", "ndcg_cut_2", "ndcg_cut_3", "map_cut_2",
    }  # fmt: skip


@pytest.mark.parametrize("relevance_threshold", [1, 2])
@pytest.mark.parametrize("seed", range(5))
def test_every_measure_matches_trec_eval_per_query(seed: int, relevance_threshold: int) -> None:
    run, qrels = random_collection(seed)
    measures = default_measures(CUTOFFS)
    assert {m.name for m in measures} == {*TREC_FAMILY, "MRR", "RPrec"}
    result = evaluate_run(
        run, qrels, measures, MetricConventions(relevance_threshold=relevance_threshold)
    )
    expected = trec_eval_values(run, qrels, relevance_level=relevance_threshold)

    with_positive = set(
        qrels.filter(pl.col("relevance") >= relevance_threshold)["query_id"].to_list()
    )
    assert result.evaluated_query_ids == sorted(with_positive)
    assert set(result.excluded_query_ids) == set(qrels["query_id"].to_list()) - with_positive
    not_retrieved = sorted(with_positive - set(run["query_id"].to_list()))
    unjudged = run.join(qrels, on=["query_id", "doc_id"], how="anti")
    # the random collection exercises every edge the conventions name
    assert result.excluded_query_ids and not_retrieved and unjudged.height
    assert run.select("query_id", "score").is_duplicated().any()  # score ties

    for query_id in result.evaluated_query_ids:
        ours = dict(
            result.per_query.filter(pl.col("query_id") == query_id).select("metric", "value").rows()
        )
        assert set(ours) == {str(m) for m in measures}
        # trec_eval skips queries absent from the run; the project scores them 0
        theirs = expected.get(query_id, dict.fromkeys(ours, 0.0))
        for metric, value in ours.items():
            assert value == pytest.approx(theirs[metric], abs=1e-9, rel=0), (query_id, metric)
    assert not_retrieved[0] not in expected


def test_exponential_gain_matches_trec_eval_with_remapped_grades() -> None:
    # trec_eval's nDCG gain is the grade itself: feeding it grades 2^g - 1 (g = 0..3 -> 0, 1, 3,
    # 7) gives the exponential-gain nDCG of the original grades.
    run, qrels = random_collection(11)
    ndcg = [Measure("nDCG", k) for k in CUTOFFS]
    result = evaluate_run(run, qrels, ndcg, MetricConventions(gain="exponential"))
    remapped = qrels.with_columns(
        pl.when(pl.col("relevance") > 0)
        .then(2 ** pl.col("relevance") - 1)
        .otherwise(0)
        .cast(pl.Int64)
        .alias("relevance")
    )
    expected = trec_eval_values(run, remapped, relevance_level=1)
    for query_id, metric, value in result.per_query.rows():
        theirs = expected[query_id][metric] if query_id in expected else 0.0
        assert value == pytest.approx(theirs, abs=1e-9, rel=0), (query_id, metric)
