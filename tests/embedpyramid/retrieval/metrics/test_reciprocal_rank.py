import numpy as np

from embedpyramid.retrieval.metrics.reciprocal_rank import reciprocal_rank_at_k

# q0: relevant at ranks 2 and 3; q1: at rank 1; q2: none
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])


def test_reciprocal_rank_at_k() -> None:
    # q0's first relevant is at rank 2: 0 at k=1, 1/2 from k=2 on; q1: 1; q2: 0
    np.testing.assert_allclose(reciprocal_rank_at_k(RELEVANT, 1), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(reciprocal_rank_at_k(RELEVANT, 4), [0.5, 1.0, 0.0])


def test_empty_ranking_scores_zero() -> None:
    empty = np.zeros((2, 0), dtype=bool)
    np.testing.assert_array_equal(reciprocal_rank_at_k(empty, 5), [0.0, 0.0])
