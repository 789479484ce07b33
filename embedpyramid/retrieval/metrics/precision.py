"""Precision at k (trec_eval ``P_k``)."""

import numpy as np


def precision_at_k(relevant: np.ndarray, k: int) -> np.ndarray:
    """P@k of every query.

    P@k = |relevant documents in the top k| / k. The denominator is k even when fewer than k
    documents were retrieved (the missing ranks count as non-relevant), as in trec_eval
    ``P_k``.

    Args:
        relevant: [n_queries, depth] bool, grade >= threshold at each rank, False past the end.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    return relevant[:, :k].sum(axis=1) / k
