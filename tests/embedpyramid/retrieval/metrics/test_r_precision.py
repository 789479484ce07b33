import numpy as np

from embedpyramid.retrieval.metrics.r_precision import r_precision

# q0: relevant at ranks 2 and 3, R = 4; q1: at rank 1, R = 1; q2: none retrieved, R = 2
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
N_RELEVANT = np.array([4, 1, 2])


def test_r_precision() -> None:
    # q0: top R=4 holds ranks 2, 3 -> 2/4; q1: top 1 -> 1/1; q2: top 2 -> 0/2
    np.testing.assert_allclose(r_precision(RELEVANT, N_RELEVANT), [0.5, 1.0, 0.0])


def test_r_beyond_the_retrieved_depth() -> None:
    # R = 5 on 4 retrieved ranks holding 2 relevant: 2/5
    np.testing.assert_allclose(r_precision(RELEVANT[:1], np.array([5])), [0.4])
    # Expected relevance under ties: two relevant among four tied documents, R = 2 -> 1/2.
    np.testing.assert_allclose(r_precision(np.full((1, 4), 0.5), np.array([2])), [0.5])
