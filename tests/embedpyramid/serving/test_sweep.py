import numpy as np
import pytest

from embedpyramid.retrieval.search import exact_topk
from embedpyramid.serving import ann_recall_at_k, build_index, search_sweep

SEARCH = {"batch_size": 32, "latency_queries": 10, "seed": 0}


def test_flat_reproduces_the_exact_topk(clustered, make_spec):
    documents, queries = clustered(n_docs=3000, n_queries=80, dim=48)
    built = build_index(make_spec(factory="Flat", metric="inner_product"), documents, seed=0)
    (point,) = search_sweep(built, queries, 10, **SEARCH)
    exact_scores, exact_indices = exact_topk(queries, documents, 10)
    np.testing.assert_array_equal(point.indices, exact_indices)
    np.testing.assert_allclose(point.scores, exact_scores, rtol=1e-5, atol=1e-6)
    assert ann_recall_at_k(point.indices, exact_indices, queries, documents, 10).tolist() == [1.0] * 80
    assert point.param is None and point.value is None and point.qps > 0 and 0 < point.p50_ms <= point.p95_ms
    assert point.latency_queries == 10 and point.batch_size == 32


def test_hnsw_recall_rises_with_ef_search(clustered, make_spec):
    documents, queries = clustered(n_docs=5000, n_queries=200, dim=32)
    ef_values = [10, 20, 40, 80, 160]
    built = build_index(make_spec(factory="HNSW8", sweep={"efSearch": ef_values}), documents, seed=0)
    points = search_sweep(built, queries, 10, **SEARCH)
    _, exact_indices = exact_topk(queries, documents, 10)
    recalls = [ann_recall_at_k(p.indices, exact_indices, queries, documents, 10).mean() for p in points]
    assert [(p.param, p.value) for p in points] == [("efSearch", v) for v in ef_values]
    assert all(a <= b for a, b in zip(recalls, recalls[1:], strict=False)), recalls
    assert recalls[0] < 0.95 and recalls[-1] >= 0.9


def test_ivf_points_are_ordered_and_missing_results_leave_the_run(clustered, make_spec):
    documents, queries = clustered(n_docs=400, n_queries=30, dim=16)
    built = build_index(make_spec(factory="IVF{n},Flat", sweep={"nprobe": [1, 10]}), documents, seed=0)
    few, all_lists = search_sweep(built, queries, 50, **SEARCH)
    assert (few.indices == -1).any() and np.isneginf(few.scores[few.indices == -1]).all()
    found = few.indices >= 0
    assert (found[:, :-1] >= found[:, 1:]).all()  # missing entries trail
    assert all((np.diff(row[mask]) <= 0).all() for row, mask in zip(few.scores, found, strict=True))
    run = few.run_table([f"q{i}" for i in range(30)], [f"d{i}" for i in range(400)])
    assert run.num_rows == found.sum() and None not in run.column("doc_id").to_pylist()
    np.testing.assert_array_equal(all_lists.indices, exact_topk(queries, documents, 50)[1])


def test_binary_rescores_candidates_with_the_float_vectors(clustered, make_spec, stored):
    documents, queries = clustered(n_docs=2000, n_queries=50, dim=64)
    built = build_index(make_spec(kind="binary", sweep={"rescore": [10, 2000]}), documents, seed=0)
    with pytest.raises(ValueError, match="pass documents="):
        search_sweep(built, queries, 10, **SEARCH)
    with pytest.raises(ValueError, match="at least k=20"):
        search_sweep(built, queries, 20, documents=documents, **SEARCH)
    narrow, everything = search_sweep(built, queries, 10, documents=documents, **SEARCH)
    exact_scores, exact_indices = exact_topk(queries, documents, 10)
    np.testing.assert_array_equal(everything.indices, exact_indices)  # rescoring every document is exact
    np.testing.assert_allclose(narrow.scores, (queries[:, None, :] * documents[narrow.indices]).sum(-1), rtol=1e-5)
    # Rescored from the candidates' rows of a table read in blocks: the same scores, bit for bit.
    table = stored(documents, block_rows=256, row_group_rows=100)
    for from_table, from_matrix in zip(search_sweep(built, queries, 10, documents=table, **SEARCH), (narrow, everything),
                                       strict=True):
        np.testing.assert_array_equal(from_table.indices, from_matrix.indices)
        np.testing.assert_array_equal(from_table.scores, from_matrix.scores)


@pytest.mark.parametrize("metric", ["inner_product", "l2"])
def test_int8_is_searched_by_faiss_and_flat_reproduces_each_metric(clustered, make_spec, metric):
    documents, queries = clustered(n_docs=1000, n_queries=40, dim=32)
    scaled = documents * np.linspace(0.5, 2.0, len(documents), dtype=np.float32)[:, None]
    exact_scores, exact_indices = exact_topk(queries, scaled, 10, metric=metric)
    built = build_index(make_spec(kind="int8", metric=metric), scaled, seed=0)
    assert type(built.index).__name__ == "IndexScalarQuantizer"
    (int8,) = search_sweep(built, queries, 10, **SEARCH)
    assert ann_recall_at_k(int8.indices, exact_indices, queries, scaled, 10, metric).mean() > 0.9
    (flat,) = search_sweep(build_index(make_spec(factory="Flat", metric=metric), scaled, seed=0), queries, 10, **SEARCH)
    np.testing.assert_array_equal(flat.indices, exact_indices)
    np.testing.assert_allclose(flat.scores, exact_scores, rtol=1e-4, atol=1e-4)


def test_a_cosine_spec_over_vectors_that_are_not_unit_is_exact_cosine_search(clustered, make_spec):
    documents, queries = clustered(n_docs=800, n_queries=30, dim=24)
    scaled = documents * np.linspace(0.2, 3.0, len(documents), dtype=np.float32)[:, None]
    (point,) = search_sweep(build_index(make_spec(factory="Flat", metric="cosine"), scaled, seed=0), queries * 3, 10,
                            **SEARCH)
    np.testing.assert_array_equal(point.indices, exact_topk(queries * 3, scaled, 10, metric="cosine")[1])
    np.testing.assert_array_equal(point.indices, exact_topk(queries, documents, 10)[1])


def test_a_dimension_cut_searches_with_cut_queries(clustered, make_spec):
    documents, queries = clustered(n_docs=1000, n_queries=40, dim=64)
    (point,) = search_sweep(build_index(make_spec(factory="Flat", dimension=16), documents, seed=0), queries, 5, **SEARCH)
    cut_queries, cut_documents = (v[:, :16] / np.linalg.norm(v[:, :16], axis=1, keepdims=True) for v in (queries, documents))
    np.testing.assert_array_equal(point.indices, exact_topk(cut_queries, cut_documents, 5)[1])
