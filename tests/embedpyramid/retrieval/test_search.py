import numpy as np
import pytest

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
