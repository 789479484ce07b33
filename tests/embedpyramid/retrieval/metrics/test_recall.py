import numpy as np

from embedpyramid.retrieval.metrics.recall import recall_at_k

# q0: relevant at ranks 2 and 3, R = 4; q1: at rank 1, R = 1; q2: none retrieved, R = 2
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
N_RELEVANT = np.array([4, 1, 2])


def test_recall_at_k() -> None:
    # @2: q0 1 of 4, q1 1 of 1, q2 0 of 2; @3: q0 2 of 4
    np.testing.assert_allclose(recall_at_k(RELEVANT, N_RELEVANT, 2), [0.25, 1.0, 0.0])
    np.testing.assert_allclose(recall_at_k(RELEVANT, N_RELEVANT, 3), [0.5, 1.0, 0.0])


def test_empty_ranking_scores_zero() -> None:
    empty = np.zeros((2, 0), dtype=bool)
    np.testing.assert_array_equal(recall_at_k(empty, np.array([1, 3]), 5), [0.0, 0.0])
