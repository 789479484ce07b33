import numpy as np

from embedpyramid.retrieval.metrics.precision import precision_at_k

# q0: relevant at ranks 2 and 3; q1: at rank 1; q2: none
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])


def test_precision_at_k() -> None:
    # @2: q0 1/2, q1 1/2, q2 0; @3: q0 2/3, q1 1/3
    np.testing.assert_allclose(precision_at_k(RELEVANT, 2), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(precision_at_k(RELEVANT, 3), [2 / 3, 1 / 3, 0.0])


def test_divides_by_k_when_fewer_are_retrieved() -> None:
    # @10 on 4 ranks: q0 2/10, q1 1/10
    np.testing.assert_allclose(precision_at_k(RELEVANT, 10), [0.2, 0.1, 0.0])
    np.testing.assert_array_equal(precision_at_k(np.zeros((2, 0), dtype=bool), 5), [0.0, 0.0])
