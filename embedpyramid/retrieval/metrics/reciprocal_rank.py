"""Reciprocal rank at k, averaged into MRR@k (trec_eval ``recip_rank`` on the run cut at k); the
uncut MRR is ``recip_rank`` on the whole run."""

import numpy as np


def reciprocal_rank_at_k(missed: np.ndarray, k: int) -> np.ndarray:
    """RR@k of every query (its mean over queries is MRR@k).

    RR@k = 1 / i for the smallest rank i <= k holding a relevant document (grade >= threshold),
    0 if none of the top k is relevant. Computed as sum_{i <= k} (m_{i-1} - m_i) / i with
    m_i = P(no relevant document at ranks <= i), m_0 = 1: the probability that the first
    relevant document sits at rank i, over i — exact for a fixed order, the expectation under
    tied scores. Equals trec_eval ``recip_rank`` on the run cut to depth k.

    Args:
        missed: [n_queries, width] P(no relevant document at ranks <= i), carried past the last
            retrieved document.
        k: cutoff (``width`` or more: the whole run).

    Returns:
        [n_queries] float64.
    """
    top = missed[:, : min(k, missed.shape[1])]
    first_at = np.diff(top, axis=1, prepend=1.0) * -1.0
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    return first_at @ (1.0 / ranks)
