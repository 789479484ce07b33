import numpy as np

from embedpyramid.retrieval.metrics.complete_evidence import complete_evidence_at_k
from embedpyramid.retrieval.metrics.judged import judged_at_k

# q0: relevant at ranks 2 and 3, R = 2; q1: one of R = 2 relevant at rank 1; q2: R = 1 at rank 4
RELEVANT = np.array([[False, True, True, False], [True, False, False, False], [False, False, False, True]])
N_RELEVANT = np.array([2, 2, 1])
FOUND_ALL = (np.cumsum(RELEVANT, axis=1) == N_RELEVANT[:, None]).astype(float)


def test_complete_evidence_needs_every_relevant_document_in_the_top_k() -> None:
    np.testing.assert_array_equal(complete_evidence_at_k(FOUND_ALL, 2), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(complete_evidence_at_k(FOUND_ALL, 3), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(complete_evidence_at_k(FOUND_ALL, 10), [1.0, 0.0, 1.0])


def test_judged_at_k_divides_by_k() -> None:
    judged = np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(judged_at_k(judged, 2), [1.0, 0.0])
    np.testing.assert_allclose(judged_at_k(judged, 10), [0.3, 0.0])  # missing ranks are unjudged
