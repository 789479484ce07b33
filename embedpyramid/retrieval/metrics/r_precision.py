"""R-precision (trec_eval ``Rprec``)."""

import numpy as np


def r_precision(relevant: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """RPrec of every query.

    RPrec = |relevant documents in the top R| / R, with R the number of the query's qrels with
    grade >= threshold: precision at the depth where a perfect ranking would reach recall 1.
    Ranks past the last retrieved document count as non-relevant, as in trec_eval ``Rprec``;
    under tied scores the count is its expectation.

    Args:
        relevant: [n_queries, width] P(grade >= threshold) at each rank, 0 past the end;
            width should reach max(R) (shorter rows are treated as padded with 0).
        n_relevant: [n_queries] R, every entry >= 1.

    Returns:
        [n_queries] float64.
    """
    ranks = np.arange(1, relevant.shape[1] + 1)
    within_r = ranks <= n_relevant[:, np.newaxis]
    return (relevant * within_r).sum(axis=1) / n_relevant
