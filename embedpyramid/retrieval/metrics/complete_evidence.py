"""Complete evidence at k: every relevant document is in the top k."""

import numpy as np


def complete_evidence_at_k(found_all: np.ndarray, k: int) -> np.ndarray:
    """CompleteEvidence@k of every query.

    CompleteEvidence@k = 1 when all R relevant documents (grade >= threshold) are in the top k,
    else 0: the reader of the top k has every piece of evidence the qrels know of (it is
    Recall@k = 1 as an indicator; with R > k it is 0). Under tied scores, the probability of
    that. trec_eval has no twin; it follows from ``recall_k``.

    Args:
        found_all: [n_queries, width] P(every relevant document at ranks <= i), carried past
            the last retrieved document.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    return found_all[:, min(k, found_all.shape[1]) - 1].copy()
