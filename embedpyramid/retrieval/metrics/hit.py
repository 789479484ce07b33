"""Hit rate at k, a.k.a. success at k (trec_eval ``success_k``)."""

import numpy as np


def hit_at_k(missed: np.ndarray, k: int) -> np.ndarray:
    """Hit@k of every query.

    Hit@k = 1 if at least one relevant document (grade >= threshold) is in the top k, else 0,
    as in trec_eval ``success_k``; under tied scores its expectation, 1 - P(no relevant
    document in the top k).

    Args:
        missed: [n_queries, width] P(no relevant document at ranks <= i), carried past the last
            retrieved document.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    return 1.0 - missed[:, min(k, missed.shape[1]) - 1]
