import numpy as np

from embedpyramid.retrieval.metrics.average_precision import average_precision_at_k

# q0: relevant at ranks 2 and 3, R = 4; q1: at rank 1, R = 1; q2: none retrieved, R = 2
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
N_RELEVANT = np.array([4, 1, 2])
# rel_i * |relevant at ranks <= i|, the input for a fixed order
PAIRS = RELEVANT * np.cumsum(RELEVANT, axis=1)


def test_average_precision_divides_by_all_relevant() -> None:
    # q0 @3: precisions at relevant ranks 2, 3 are 1/2, 2/3; divided by R = 4, not
    # min(k, R) = 3 -> (1/2 + 2/3) / 4 = 0.29167; q1: (1/1) / 1 = 1; q2: 0
    np.testing.assert_allclose(
        average_precision_at_k(PAIRS, N_RELEVANT, 3), [(1 / 2 + 2 / 3) / 4, 1.0, 0.0]
    )
    # q0 @2: only rank 2 counts -> (1/2) / 4 = 0.125
    np.testing.assert_allclose(average_precision_at_k(PAIRS, N_RELEVANT, 2), [0.125, 1.0, 0.0])


def test_expected_pairs_give_the_expected_average_precision() -> None:
    # One relevant document (R = 1) tied with one non-relevant at ranks 1-2: E[rel_i * count]
    # is 1/2 at each rank, so E[AP@2] = (1/2) / 1 + (1/2) / 2 = 3/4 = mean of AP 1 and AP 1/2.
    np.testing.assert_allclose(average_precision_at_k(np.array([[0.5, 0.5]]), np.array([1]), 2), [0.75])
