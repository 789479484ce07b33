"""ANN recall@k: how much of the exact top-k an index returns, a property of the index alone."""

from __future__ import annotations

import numpy as np

from embedpyramid.retrieval.search import Metric
from embedpyramid.serving.vectors import pair_scores


def ann_recall_at_k(
    ann_indices: np.ndarray,
    exact_indices: np.ndarray,
    queries: np.ndarray,
    documents: np.ndarray,
    k: int,
    metric: Metric = "inner_product",
) -> np.ndarray:
    """Per-query tie-aware ANN recall@k (float64, shape (n_queries,)).

    With ``E`` the exact top-k of a query and ``A`` the first k documents the index returned,

        recall@k = |{a ∈ A : a ∈ E  or  s(q, a) >= min_{e ∈ E} s(q, e)}| / |E|

    where ``s`` is the exact score (inner product, or −‖q−d‖² for L2) recomputed in float64 from
    the float vectors the exact search used. A returned document tied with the k-th exact
    document therefore counts even when the exact search's tie-break (smaller index) left it
    out. ``|E| = min(k, n_documents)``; missing results (index -1) never count.
    """
    returned = np.asarray(ann_indices)[:, :k]
    exact = np.asarray(exact_indices)[:, :k]
    if returned.shape[0] != exact.shape[0]:
        raise ValueError(f"ANN results cover {returned.shape[0]} queries, the exact top-k {exact.shape[0]}")
    in_exact = (returned[:, :, None] == exact[:, None, :]).any(axis=2)
    threshold = np.nanmin(pair_scores(queries, documents, exact, metric), axis=1)
    with np.errstate(invalid="ignore"):
        tied_or_better = pair_scores(queries, documents, returned, metric) >= threshold[:, None]
    hits = (returned >= 0) & (in_exact | tied_or_better)
    return hits.sum(axis=1) / (exact >= 0).sum(axis=1)
