"""Recall at k (trec_eval ``recall_k``)."""

import numpy as np


def recall_at_k(relevant: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
    """Recall@k of every query.

    Recall@k = |relevant documents in the top k| / R, with R the number of the query's qrels
    with grade >= threshold (retrieved or not), as in trec_eval ``recall_k``.

    Args:
        relevant: [n_queries, depth] bool, grade >= threshold at each rank, False past the end.
        n_relevant: [n_queries] R, every entry >= 1.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    return relevant[:, :k].sum(axis=1) / n_relevant
