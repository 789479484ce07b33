"""Normalised discounted cumulative gain at k (trec_eval ``ndcg_cut_k``)."""

from typing import Literal

import numpy as np


def graded_gain(grades: np.ndarray, gain: Literal["linear", "exponential"]) -> np.ndarray:
    """Gain of each qrel grade: ``linear`` = max(g, 0), ``exponential`` = 2^max(g, 0) - 1.

    Grades <= 0 (judged non-relevant, including negative grades) and unjudged documents (grade
    0) have gain 0, as in trec_eval.
    """
    positive = np.maximum(grades, 0).astype(np.float64)
    return positive if gain == "linear" else np.exp2(positive) - 1.0


def _discounts(depth: int) -> np.ndarray:
    """1 / log2(i + 1) for ranks i = 1..depth."""
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


def ndcg_at_k(gains: np.ndarray, ideal_gains: np.ndarray, k: int) -> np.ndarray:
    """nDCG@k of every query.

    nDCG@k = DCG@k / IDCG@k with DCG@k = sum_{i=1..min(k, n)} gain_i / log2(i + 1), where gain_i
    is the gain of the document retrieved at rank i (0 when unjudged) and n the number
    retrieved. IDCG@k is the same sum over the ideal ranking of ALL the query's judged gains
    (sorted descending, cut at k), so relevant documents that were not retrieved still count.
    With linear gain this equals trec_eval ``ndcg_cut_k`` (Järvelin & Kekäläinen, 2002).

    Args:
        gains: [n_queries, depth] gain at each rank, zero-padded past the last retrieved.
        ideal_gains: [n_queries, ideal_depth] judged gains sorted descending, zero-padded;
            every row must have a positive first entry (IDCG > 0).
        k: cutoff.

    Returns:
        [n_queries] float64.
    """
    retrieved = gains[:, :k]
    ideal = ideal_gains[:, :k]
    dcg = retrieved @ _discounts(retrieved.shape[1])
    idcg = ideal @ _discounts(ideal.shape[1])
    return dcg / idcg
