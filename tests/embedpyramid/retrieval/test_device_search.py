"""The torch search (a GPU's path) run on the CPU device against the numpy path: the same ids and
scores, under both tie rules, in every metric, in blocks of every shape. Small integer vectors make
every product exact under any kernel, so the scores are equal and only the tie rule decides."""

import numpy as np
import pytest

from embedpyramid.retrieval.device_search import exact_topk_torch
from embedpyramid.retrieval.search import exact_topk


@pytest.mark.parametrize("ties_at_cut", ["first", "last"])
@pytest.mark.parametrize(("doc_block", "query_block", "k"), [(16384, 1024, 10), (37, 7, 10), (5, 3, 12), (64, 50, 900)])
def test_the_torch_path_gives_the_numpy_paths_ids_with_many_ties(ties_at_cut, doc_block, query_block, k):
    rng = np.random.default_rng(11)
    queries = rng.integers(-2, 3, (40, 4)).astype(np.float32)
    documents = rng.integers(-1, 2, (700, 4)).astype(np.float32)
    settings = {"doc_block_size": doc_block, "query_block_size": query_block, "ties_at_cut": ties_at_cut}
    expected = exact_topk(queries, documents, k, **settings)
    scores, indices = exact_topk_torch(queries, documents, k, device="cpu", **settings)
    assert indices.tolist() == expected[1].tolist()
    assert np.array_equal(scores, expected[0])


@pytest.mark.parametrize("metric", ["inner_product", "cosine", "l2"])
def test_every_metric_and_streamed_blocks_match(metric):
    rng = np.random.default_rng(2)
    queries = rng.integers(-3, 4, (25, 8)).astype(np.float32)
    documents = rng.integers(-3, 4, (500, 8)).astype(np.float32)
    if metric == "cosine":  # entries ±1 in 4 dimensions: the unit vectors hold ±1/2, still exact
        queries, documents = (np.sign(rng.standard_normal((n, 4))).astype(np.float32) * rng.integers(1, 4, (n, 1))
                              for n in (25, 500))
    blocks = [documents[start : start + 64] for start in range(0, 500, 64)]
    seen = []
    expected = exact_topk(queries, documents, 20, metric=metric, doc_block_size=64, query_block_size=10)
    scores, indices = exact_topk_torch(queries, iter(blocks), 20, device="cpu", metric=metric, doc_block_size=64,
                                       query_block_size=10, n_documents=500, progress=lambda *done: seen.append(done))
    assert indices.tolist() == expected[1].tolist()
    assert np.array_equal(scores, expected[0])
    assert seen[-1] == (500, 500)


def test_real_valued_vectors_rank_alike_and_a_small_corpus_caps_the_depth():
    rng = np.random.default_rng(4)
    queries = rng.standard_normal((30, 16)).astype(np.float32)
    documents = rng.standard_normal((90, 16)).astype(np.float32)
    expected = exact_topk(queries, documents, 200, doc_block_size=32)
    scores, indices = exact_topk_torch(queries, documents, 200, device="cpu", doc_block_size=32)
    assert indices.shape == (30, 90)
    assert indices.tolist() == expected[1].tolist()
    assert np.allclose(scores, expected[0], atol=1e-5)


def test_nan_vectors_are_refused_as_on_the_cpu():
    documents = np.ones((10, 3), np.float32)
    with pytest.raises(ValueError, match="query vectors hold NaN"):
        exact_topk_torch(np.full((2, 3), np.nan, np.float32), documents, 3, device="cpu")
    documents[4, 1] = np.nan
    with pytest.raises(ValueError, match="first at row 4"):
        exact_topk_torch(np.ones((2, 3), np.float32), documents, 3, device="cpu")
