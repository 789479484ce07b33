"""Reciprocal rank at k, averaged into MRR@k (trec_eval ``recip_rank`` on the run cut at k)."""

import numpy as np


def reciprocal_rank_at_k(relevant: np.ndarray, k: int) -> np.ndarray:
    """RR@k of every query (its mean over queries is MRR@k).

    RR@k = 1 / i for the smallest rank i <= k holding a relevant document (grade >= threshold),
    0 if none of the top k is relevant; computed as max_{i <= k} rel_i / i. Equals trec_eval
    ``recip_rank`` on the run cut to depth k.

    Args:
        relevant: [n_queries, depth] bool, grade >= threshold at each rank, False past the end.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    top = relevant[:, :k]
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    return (top / ranks).max(axis=1, initial=0.0)
