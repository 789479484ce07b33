import numpy as np

from embedpyramid.retrieval.metrics.hit import hit_at_k

# q0: relevant at ranks 2 and 3; q1: at rank 1; q2: none
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False] * 4])
MISSED = (np.cumsum(RELEVANT, axis=1) == 0).astype(float)  # P(no relevant at ranks <= i)


def test_hit_at_k() -> None:
    # @1: only q1 has a relevant document at rank 1; @2: q0 too; q2 never
    np.testing.assert_array_equal(hit_at_k(MISSED, 1), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(hit_at_k(MISSED, 2), [1.0, 1.0, 0.0])


def test_cutoffs_past_the_ranking_read_its_last_rank() -> None:
    np.testing.assert_array_equal(hit_at_k(MISSED, 50), [1.0, 1.0, 0.0])
    # Under ties: one relevant among three tied documents at ranks 1-3 -> Hit@1 = 1/3.
    np.testing.assert_allclose(hit_at_k(np.array([[2 / 3, 1 / 3, 0.0]]), 1), [1 / 3])
