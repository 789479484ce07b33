import numpy as np

from embedpyramid.retrieval.metrics.hit import hit_at_k

# q0: relevant at ranks 2 and 3; q1: at rank 1; q2: none
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])


def test_hit_at_k() -> None:
    # @1: only q1 has a relevant document at rank 1; @2: q0 too; q2 never
    np.testing.assert_array_equal(hit_at_k(RELEVANT, 1), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(hit_at_k(RELEVANT, 2), [1.0, 1.0, 0.0])


def test_empty_ranking_scores_zero() -> None:
    np.testing.assert_array_equal(hit_at_k(np.zeros((2, 0), dtype=bool), 5), [0.0, 0.0])
