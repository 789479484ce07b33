import numpy as np

from embedpyramid.retrieval.metrics.reciprocal_rank import reciprocal_rank_at_k

# q0: relevant at ranks 2 and 3; q1: at rank 1; q2: none
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
MISSED = (np.cumsum(RELEVANT, axis=1) == 0).astype(float)  # P(no relevant at ranks <= i)


def test_reciprocal_rank_at_k() -> None:
    # q0's first relevant is at rank 2: 0 at k=1, 1/2 from k=2 on; q1: 1; q2: 0
    np.testing.assert_allclose(reciprocal_rank_at_k(MISSED, 1), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(reciprocal_rank_at_k(MISSED, 4), [0.5, 1.0, 0.0])
    np.testing.assert_allclose(reciprocal_rank_at_k(MISSED, 100), [0.5, 1.0, 0.0])


def test_expected_reciprocal_rank_under_ties() -> None:
    # One relevant among three tied documents at ranks 1-3: first at rank 1, 2 or 3 with
    # probability 1/3 each -> E[RR] = (1 + 1/2 + 1/3) / 3 = 11/18.
    np.testing.assert_allclose(reciprocal_rank_at_k(np.array([[2 / 3, 1 / 3, 0.0]]), 3), [11 / 18])
