import numpy as np
import polars as pl
import pytest

from embedpyramid.retrieval.metrics import evaluate_run, parse_measure
from embedpyramid.retrieval.search import exact_topk, run_table
from embedpyramid.serving import build_index, evaluate_spec, search_sweep
from embedpyramid.serving.evaluate import PER_QUERY_SCHEMA, SUMMARY_SCHEMA

MEASURES = [parse_measure(m) for m in ("nDCG@10", "Recall@10", "MRR@10", "P@5")]
COST_COLUMNS = ["build_seconds", "peak_rss_bytes", "qps", "p50_ms", "p95_ms"]


def corpus(clustered, dim: int):
    documents, queries = clustered(n_docs=2000, n_queries=60, dim=dim, seed=5)
    exact_scores, exact_indices = exact_topk(queries, documents, 10)
    query_ids = [f"q{i:03d}" for i in range(len(queries))]
    doc_ids = [f"d{i:04d}" for i in range(len(documents))]
    # Graded qrels from the exact ranking (ranks 1, 3 and 6), none for the last query.
    qrels = pl.DataFrame(
        [(q, doc_ids[exact_indices[i, rank]], grade) for i, q in enumerate(query_ids[:-1])
         for rank, grade in ((0, 2), (2, 1), (5, 1))],
        schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64}, orient="row",
    )
    return documents, queries, exact_scores, exact_indices, query_ids, doc_ids, qrels


def evaluate(spec, data, seeds=(None,), **options):
    documents, queries, exact_scores, exact_indices, query_ids, doc_ids, qrels = data
    spec = spec.model_copy(update={"metric": spec.metric or "inner_product"})
    builds = []
    for seed in seeds:
        built = build_index(spec, documents, seed=spec.seed if seed is None else seed)
        builds.append((built, search_sweep(built, queries, 10, batch_size=16, latency_queries=5, seed=0,
                                           documents=documents)))
    return evaluate_spec(
        builds, exact_scores=exact_scores, exact_indices=exact_indices, queries=queries, documents=documents,
        query_ids=query_ids, doc_ids=doc_ids, qrels=qrels, measures=MEASURES, n_resamples=999, **options,
    )


def test_flat_has_recall_one_and_the_exact_metrics(clustered, make_spec):
    data = corpus(clustered, dim=48)
    documents, queries, exact_scores, exact_indices, query_ids, doc_ids, qrels = data
    evaluation = evaluate(make_spec("flat", factory="Flat"), data)
    exact = evaluate_run(pl.from_arrow(run_table(query_ids, doc_ids, exact_scores, exact_indices)), qrels, MEASURES,
                         query_ids=query_ids)
    assert evaluation.per_query.schema == pl.Schema(PER_QUERY_SCHEMA)
    recall = evaluation.per_query.filter(pl.col("metric") == "ANNRecall@10")
    assert recall.height == 60 and (recall["value"] == 1.0).all()
    relevance = evaluation.per_query.filter(pl.col("metric") != "ANNRecall@10").select("query_id", "metric", "value")
    assert relevance.equals(exact.per_query)
    assert evaluation.excluded_query_ids == ["q059"]
    (row,) = evaluation.summary.iter_rows(named=True)
    assert evaluation.summary.schema == pl.Schema(SUMMARY_SCHEMA)
    assert row["ann_recall"] == 1.0 and row["ann_value"] == row["exact_value"]
    assert row["delta"] == row["delta_ci_low"] == row["delta_ci_high"] == 0.0
    assert row["n_evaluated"] == 59 and row["n_queries"] == 60 and row["sweep_param"] is None
    assert row["factory"] == "Flat" and row["seed"] == 42 and row["build_threads"] == 1 and row["qps"] > 0
    assert (row["n_seeds"], row["seeds"], row["ann_recall_sd"], row["delta_sd"]) == (1, "42", None, None)


def test_seeds_give_mean_and_sd_over_builds_and_the_ci_of_the_seed_averaged_delta(clustered, make_spec):
    data = corpus(clustered, dim=32)
    spec = make_spec("hnsw", factory="HNSW4", sweep={"efSearch": [4, 64]})
    seeded = evaluate(spec, data, seeds=(1, 2, 3))
    singles = [evaluate(spec, data, seeds=(seed,)) for seed in (1, 2, 3)]
    assert seeded.per_query["seed"].unique().sort().to_list() == [1, 2, 3]
    for position, row in enumerate(seeded.summary.iter_rows(named=True)):
        recalls = [single.summary["ann_recall"][position] for single in singles]
        deltas = [single.summary["delta"][position] for single in singles]
        assert row["n_seeds"] == 3 and row["seeds"] == "1,2,3"
        assert row["ann_recall"] == pytest.approx(np.mean(recalls))
        assert row["ann_recall_sd"] == pytest.approx(np.std(recalls, ddof=1))
        assert row["delta"] == pytest.approx(np.mean(deltas)) and row["delta_sd"] == pytest.approx(np.std(deltas, ddof=1))
        assert row["delta_ci_low"] <= row["delta"] <= row["delta_ci_high"]
    low_ef = seeded.summary.row(0, named=True)
    assert low_ef["ann_recall_sd"] > 0  # the builds differ: one lucky build is not the number


def test_a_64d_cut_of_a_384d_model_changes_the_l4_results_only(clustered, make_spec):
    data = corpus(clustered, dim=384)
    documents, queries, exact_scores, exact_indices, query_ids, doc_ids, qrels = data
    inputs = [array.copy() for array in (documents, queries, exact_scores, exact_indices)]
    exact_before = evaluate_run(pl.from_arrow(run_table(query_ids, doc_ids, exact_scores, exact_indices)), qrels,
                                MEASURES, query_ids=query_ids).per_query
    flat = make_spec("flat", factory="Flat")
    flat_alone = evaluate(flat, data)
    cut = evaluate(make_spec("flat-d64", factory="Flat", dimension=64), data)
    flat_beside_cut = evaluate(flat, data)

    for before, after in zip(inputs, (documents, queries, exact_scores, exact_indices), strict=True):
        np.testing.assert_array_equal(before, after)
    exact_after = evaluate_run(pl.from_arrow(run_table(query_ids, doc_ids, exact_scores, exact_indices)), qrels,
                               MEASURES, query_ids=query_ids).per_query
    assert exact_after.equals(exact_before)
    assert flat_beside_cut.per_query.equals(flat_alone.per_query)
    assert flat_beside_cut.summary.drop(COST_COLUMNS).equals(flat_alone.summary.drop(COST_COLUMNS))

    (row,) = cut.summary.iter_rows(named=True)
    assert row["dimension"] == 64 and row["ann_recall"] < 1.0 and row["ann_value"] != row["exact_value"]
    assert row["exact_value"] == flat_alone.summary["exact_value"][0]
    assert row["index_bytes"] < flat_alone.summary["index_bytes"][0] / 5
    assert row["delta_ci_low"] <= row["delta"] <= row["delta_ci_high"]


def test_a_sweep_gives_one_summary_row_per_point_and_groups_resample_together(clustered, make_spec):
    data = corpus(clustered, dim=32)
    groups = {q: f"g{int(q[1:]) % 7}" for q in data[4]}
    evaluation = evaluate(make_spec("ivf", factory="IVF{n},Flat", sweep={"nprobe": [1, 4, 51]}), data,
                          query_groups=groups)
    assert evaluation.summary["sweep_value"].to_list() == [1, 4, 51]
    assert evaluation.summary["ann_recall"].to_list()[-1] == 1.0
    assert evaluation.per_query.group_by("sweep_value").len().sort("sweep_value")["len"].to_list() == [60 + 59 * 4] * 3


def test_measures_past_k_and_an_unmeasured_delta_metric_are_refused(clustered, make_spec):
    documents, queries, exact_scores, exact_indices, query_ids, doc_ids, qrels = corpus(clustered, dim=16)
    built = build_index(make_spec(factory="Flat", metric="inner_product"), documents, seed=0)
    points = search_sweep(built, queries, 10, batch_size=16, latency_queries=5, seed=0)
    common = {"exact_scores": exact_scores, "exact_indices": exact_indices, "queries": queries, "documents": documents,
              "query_ids": query_ids, "doc_ids": doc_ids, "qrels": qrels}
    with pytest.raises(ValueError, match=r"\['nDCG@20', 'RPrec'\] read past the ANN depth k=10"):
        evaluate_spec([(built, points)], measures=[parse_measure(m) for m in ("nDCG@20", "RPrec")], **common)
    with pytest.raises(ValueError, match="delta_metric 'MAP@10' is not among the measures"):
        evaluate_spec([(built, points)], measures=MEASURES, delta_metric="MAP@10", **common)
    with pytest.raises(ValueError, match="no sweep points"):
        evaluate_spec([(built, [])], measures=MEASURES, **common)
