"""Average precision at k, averaged into MAP@k (trec_eval ``map_cut_k``)."""

import numpy as np


def average_precision_at_k(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """AP@k of every query (its mean over queries is MAP@k).

    AP@k = (1 / R) * sum_{i <= k, rel_i} P@i, with P@i the precision at rank i and R the number
    of the query's qrels with grade >= threshold. The denominator is ALL relevant documents,
    not min(k, R), as in trec_eval ``map_cut_k``; so AP@k < 1 whenever R > k.

    Args:
        relevant: [n_queries, depth] bool, grade >= threshold at each rank, False past the end.
        n_relevant: [n_queries] R, every entry >= 1.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    top = relevant[:, :k]
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    precision_at_rank = np.cumsum(top, axis=1) / ranks
    return (precision_at_rank * top).sum(axis=1) / n_relevant
