"""Judged at k: the share of the top k that has a qrel."""

import numpy as np


def judged_at_k(judged: np.ndarray, k: int) -> np.ndarray:
    """Judged@k of every query.

    Judged@k = |documents in the top k with any qrel, of any grade| / k — P@k with a threshold
    below every grade, as in ir_measures ``Judged@k``; missing ranks count as unjudged. Every
    measure here treats an unjudged document as non-relevant, so a model that retrieves
    relevant but unjudged documents looks worse: a low Judged@k beside a model says its other
    numbers are lower bounds. Under tied scores, its expectation.

    Args:
        judged: [n_queries, width] P(judged) at each rank, 0 past the end.
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    return judged[:, :k].sum(axis=1) / k
