import numpy as np
import pytest

from embedpyramid.retrieval import search
from embedpyramid.retrieval.search import exact_topk, run_table


def brute_force(queries: np.ndarray, documents: np.ndarray, k: int) -> list[list[int]]:
    scores = queries @ documents.T
    return [sorted(range(len(documents)), key=lambda j: (-scores[q, j], j))[:k] for q in range(len(queries))]


@pytest.mark.parametrize(("doc_block", "query_block", "k"), [(16384, 1024, 10), (37, 7, 10), (5, 3, 12), (300, 50, 400)])
def test_blocked_search_equals_brute_force_with_ties_to_the_smaller_index(doc_block, query_block, k):
    rng = np.random.default_rng(7)
    # Small integer vectors: many exact ties in score, including at the k-th position.
    queries = rng.integers(-2, 3, (40, 4)).astype(np.float32)
    documents = rng.integers(-2, 3, (300, 4)).astype(np.float32)
    scores, indices = exact_topk(queries, documents, k, doc_block_size=doc_block, query_block_size=query_block)
    expected = brute_force(queries, documents, k)
    assert indices.tolist() == expected
    assert np.array_equal(scores, np.take_along_axis(queries @ documents.T, np.asarray(expected), axis=1))


@pytest.mark.parametrize("blas", ["mkl", "openblas"])
def test_either_blas_gives_the_brute_force_top_k(monkeypatch, blas):
    # The machine picks one BLAS for the products (search.product_blas); both paths must hold
    # the same rule. Integer vectors: every product is exact in float32 under either kernel.
    monkeypatch.setattr(search, "product_blas", lambda: blas)
    rng = np.random.default_rng(3)
    queries = rng.integers(-3, 4, (25, 8)).astype(np.float32)
    documents = rng.integers(-3, 4, (500, 8)).astype(np.float32)
    scores, indices = exact_topk(queries, documents, 20, doc_block_size=64, query_block_size=10)
    expected = brute_force(queries, documents, 20)
    assert indices.tolist() == expected
    assert np.array_equal(scores, np.take_along_axis(queries @ documents.T, np.asarray(expected), axis=1))


@pytest.mark.parametrize("ties_at_cut", ["first", "last"])
@pytest.mark.parametrize(("doc_block", "k"), [(7, 5), (64, 2), (64, 30), (1000, 30), (64, 900)])
def test_ties_at_the_cut_across_blocks_follow_the_rule(ties_at_cut, doc_block, k):
    # Scores in {-8..8} over 700 documents: every row's k-th score is shared by documents of
    # several blocks, kept ones and collected ones alike; k = 900 exceeds the corpus. The rows
    # keep their first documents whole (16 k, at most a block), so the first threshold is
    # shared by many documents after them.
    rng = np.random.default_rng(13)
    queries = rng.integers(-2, 3, (30, 4)).astype(np.float32)
    documents = rng.integers(-1, 2, (700, 4)).astype(np.float32)
    scores, indices = exact_topk(queries, documents, k, doc_block_size=doc_block, ties_at_cut=ties_at_cut)
    exact = queries @ documents.T
    position = np.arange(700)[None].repeat(30, 0)
    expected = np.lexsort((-position if ties_at_cut == "last" else position, -exact), axis=1)[:, :k]
    assert indices.tolist() == expected.tolist()
    assert np.array_equal(scores, np.take_along_axis(exact, expected, axis=1))


def test_all_documents_tied_rank_by_index():
    scores, indices = exact_topk(np.ones((2, 3), np.float32), np.ones((6, 3), np.float32), 4, doc_block_size=4)
    assert indices.tolist() == [[0, 1, 2, 3]] * 2 and (scores == 3).all()


def test_depth_is_capped_by_the_corpus_and_dimensions_must_match():
    scores, indices = exact_topk(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), 5)
    assert indices.tolist() == [[0, 1], [1, 0]] and scores.shape == (2, 2)
    with pytest.raises(ValueError, match="must share a dimension"):
        exact_topk(np.ones((1, 3), np.float32), np.ones((2, 4), np.float32), 1)


def test_run_table():
    scores = np.array([[0.9, 0.5], [0.7, 0.7]], np.float32)
    indices = np.array([[1, 0], [0, 1]])
    run = run_table(["q1", "q2"], ["d1", "d2"], scores, indices)
    assert run.to_pylist()[0] == {"query_id": "q1", "rank": 1, "doc_id": "d2", "score": pytest.approx(0.9)}
    assert run["rank"].to_pylist() == [1, 2, 1, 2]


def test_each_metric_equals_brute_force_in_float64():
    rng = np.random.default_rng(3)
    documents = rng.standard_normal((300, 8)).astype(np.float32) * rng.uniform(0.1, 5, (300, 1)).astype(np.float32)
    documents[17] = 0.0  # a zero vector scores 0 under cosine rather than NaN
    queries = rng.standard_normal((20, 8)).astype(np.float32)
    q64, d64 = queries.astype(np.float64), documents.astype(np.float64)
    d_norms = np.linalg.norm(d64, axis=1)
    expected = {
        "inner_product": q64 @ d64.T,
        "cosine": (q64 @ d64.T) / np.linalg.norm(q64, axis=1)[:, None] / np.where(d_norms > 0, d_norms, 1.0),
        "l2": -((q64[:, None, :] - d64[None]) ** 2).sum(-1),
    }
    for metric, reference in expected.items():
        scores, indices = exact_topk(queries, documents, 7, metric=metric, doc_block_size=64, query_block_size=8)
        np.testing.assert_array_equal(indices, np.argsort(-reference, axis=1, kind="stable")[:, :7], err_msg=metric)
        np.testing.assert_allclose(scores, np.take_along_axis(reference, indices, axis=1), rtol=1e-4, atol=1e-4)


def test_streamed_blocks_give_the_same_run_as_a_matrix_and_report_progress():
    rng = np.random.default_rng(11)
    documents = rng.integers(-2, 3, (1000, 6)).astype(np.float32)
    queries = rng.integers(-2, 3, (50, 6)).astype(np.float32)
    seen = []
    blocks = (documents[start : start + 128] for start in range(0, 1000, 128))
    streamed = exact_topk(queries, blocks, 25, metric="l2", n_documents=1000, progress=lambda d, t: seen.append((d, t)))
    in_memory = exact_topk(queries, documents, 25, metric="l2", doc_block_size=333)
    for got, expected in zip(streamed, in_memory, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert seen[-1] == (1000, 1000) and len(seen) == 8


def test_importing_search_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, embedpyramid.retrieval.search, embedpyramid.encode; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.parametrize("ties_at_cut", ["first", "last"])
@pytest.mark.parametrize("n_documents", [200, 2000])
def test_documents_in_rising_score_order_remake_the_top_k_in_every_block(ties_at_cut, n_documents):
    # Each block beats every kept score (the selection path), with ties across the blocks' ends;
    # eighths keep every product exact.
    rng = np.random.default_rng(5)
    documents = (np.arange(n_documents, dtype=np.float32) // 3)[:, None] * np.ones((1, 2), np.float32)
    queries = rng.integers(4, 12, (6, 2)).astype(np.float32) / 8
    scores, indices = exact_topk(queries, documents, 7, doc_block_size=64, ties_at_cut=ties_at_cut)
    exact = queries @ documents.T
    position = np.arange(n_documents)
    expected = np.lexsort(((-position if ties_at_cut == "last" else position)[None].repeat(6, 0), -exact), axis=1)[:, :7]
    assert indices.tolist() == expected.tolist()
    assert np.array_equal(scores, np.take_along_axis(exact, expected, axis=1))


def test_nan_vectors_are_refused_with_their_row():
    documents = np.ones((40, 3), np.float32)
    documents[25, 1] = np.nan
    with pytest.raises(ValueError, match=r"1 document vectors in rows 16\.\.31 score NaN.*first at row 25"):
        exact_topk(np.ones((2, 3), np.float32), documents, 5, doc_block_size=16)
    with pytest.raises(ValueError, match=r"1 query vectors hold NaN or inf \(first at row 1\)"):
        exact_topk(np.array([[1, 0, 0], [np.inf, 0, 0]], np.float32), np.ones((4, 3), np.float32), 2)


def test_infinite_document_scores_rank_like_any_other():
    # Infinite components score +inf or -inf: kept, passed and ordered like any score, a -inf
    # document still ahead of a merge's padding (the whole corpus ranked, the -inf ones last).
    rng = np.random.default_rng(17)
    documents = rng.standard_normal((1000, 4)).astype(np.float32)
    documents[[10, 500], 0], documents[[20, 30], 0] = np.inf, -np.inf
    queries = rng.uniform(0.5, 1.5, (5, 4)).astype(np.float32)
    exact = queries @ documents.T
    expected = np.lexsort((np.arange(1000)[None].repeat(5, 0), -exact), axis=1)
    scores, indices = exact_topk(queries, documents, 3)
    assert indices.tolist() == expected[:, :3].tolist() and (scores[:, :2] == np.inf).all()
    _, bottom = exact_topk(-queries, documents, 1000)
    assert bottom[:, -2:].tolist() == [[10, 500]] * 5
