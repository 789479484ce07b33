import numpy as np
import pytest

from embedpyramid.serving import ann_recall_at_k


def test_a_returned_document_tied_with_the_kth_exact_score_counts():
    # Documents 1 and 2 are the same vector: the exact top-2 keeps the smaller index (0, 1), an
    # index that returns (0, 2) loses nothing, one that returns (0, 3) loses half.
    documents = np.array([[1.0, 0.0], [0.6, 0.8], [0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]], np.float32)
    queries = np.array([[1.0, 0.0]], np.float32)
    exact = np.array([[0, 1]])
    assert ann_recall_at_k(np.array([[0, 2]]), exact, queries, documents, 2).tolist() == [1.0]
    assert ann_recall_at_k(np.array([[2, 0]]), exact, queries, documents, 2).tolist() == [1.0]
    assert ann_recall_at_k(np.array([[0, 3]]), exact, queries, documents, 2).tolist() == [0.5]
    assert ann_recall_at_k(np.array([[4, 3]]), exact, queries, documents, 2).tolist() == [0.0]


def test_per_query_values_missing_results_and_l2():
    documents = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], np.float32)
    queries = np.array([[0.0, 0.0], [3.0, 0.0]], np.float32)
    exact = np.array([[0, 1, 2], [3, 2, 1]])
    returned = np.array([[0, 2, -1], [3, 2, 1]])
    recall = ann_recall_at_k(returned, exact, queries, documents, 3, metric="l2")
    assert recall.dtype == np.float64
    np.testing.assert_allclose(recall, [2 / 3, 1.0])
    np.testing.assert_allclose(ann_recall_at_k(returned, exact, queries, documents, 1, metric="l2"), [1.0, 1.0])
    with pytest.raises(ValueError, match="cover 1 queries, the exact top-k 2"):
        ann_recall_at_k(returned[:1], exact, queries, documents, 3)
