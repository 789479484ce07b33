"""Hit rate at k, a.k.a. success at k (trec_eval ``success_k``)."""

import numpy as np


def hit_at_k(relevant: np.ndarray, k: int) -> np.ndarray:
    """Hit@k of every query.

    Hit@k = 1 if at least one relevant document (grade >= threshold) is in the top k, else 0,
    as in trec_eval ``success_k``.

    Args:
        relevant: [n_queries, depth] bool, grade >= threshold at each rank, False past the end.
        k: cutoff.

    Returns:
        [n_queries] float64 of 0.0 / 1.0.
    """
    return relevant[:, :k].any(axis=1).astype(np.float64)
