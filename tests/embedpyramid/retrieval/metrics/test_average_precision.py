import numpy as np

from embedpyramid.retrieval.metrics.average_precision import average_precision_at_k

# q0: relevant at ranks 2 and 3, R = 4; q1: at rank 1, R = 1; q2: none retrieved, R = 2
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
N_RELEVANT = np.array([4, 1, 2])


def test_average_precision_divides_by_all_relevant() -> None:
    # q0 @3: precisions at relevant ranks 2, 3 are 1/2, 2/3; divided by R = 4, not
    # min(k, R) = 3 -> (1/2 + 2/3) / 4 = 0.29167; q1: (1/1) / 1 = 1; q2: 0
    np.testing.assert_allclose(
        average_precision_at_k(RELEVANT, N_RELEVANT, 3), [(1 / 2 + 2 / 3) / 4, 1.0, 0.0]
    )
    # q0 @2: only rank 2 counts -> (1/2) / 4 = 0.125
    np.testing.assert_allclose(
        average_precision_at_k(RELEVANT, N_RELEVANT, 2), [0.125, 1.0, 0.0]
    )


def test_empty_ranking_scores_zero() -> None:
    empty = np.zeros((2, 0), dtype=bool)
    np.testing.assert_array_equal(average_precision_at_k(empty, np.array([1, 3]), 5), [0.0, 0.0])
