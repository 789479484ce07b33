"""Average precision at k, averaged into MAP@k (trec_eval ``map_cut_k``)."""

import numpy as np


def average_precision_at_k(relevant_pairs: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """AP@k of every query (its mean over queries is MAP@k).

    AP@k = (1 / R) * sum_{i <= k, rel_i} P@i = (1 / R) * sum_{i <= k} rel_i * |relevant at
    ranks <= i| / i, with R the number of the query's qrels with grade >= threshold. The
    denominator is ALL relevant documents, not min(k, R), as in trec_eval ``map_cut_k``; so
    AP@k < 1 whenever R > k. Under tied scores ``rel_i * |relevant at ranks <= i|`` is its
    expectation, which makes the result the expected AP (McSherry & Najork 2008).

    Args:
        relevant_pairs: [n_queries, width] E[rel_i * |relevant at ranks <= i|], 0 past the end.
        n_relevant: [n_queries] R, every entry >= 1.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    top = relevant_pairs[:, :k]
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    return (top / ranks).sum(axis=1) / n_relevant
