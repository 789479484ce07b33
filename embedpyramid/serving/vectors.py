"""Vector transforms of level L4 and exact search under either metric.

Scores follow one convention everywhere in L4: larger is better. Inner-product scores are dot
products (cosines for unit vectors); L2 scores are negated squared Euclidean distances. Every
(scores, indices) pair is ordered by score descending, then document index ascending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedpyramid.retrieval.search import exact_topk
from embedpyramid.serving.specs import Metric

INT8_LEVELS = 127


def truncate_and_normalize(vectors: np.ndarray, dimension: int) -> np.ndarray:
    """Matryoshka cut: the first ``dimension`` coordinates, re-scaled to unit L2 norm (float32).

    A row whose kept coordinates are all zero stays zero rather than becoming NaN.
    """
    if not 1 <= dimension <= vectors.shape[1]:
        raise ValueError(f"cannot cut {vectors.shape[1]}-d vectors to {dimension} dimensions")
    cut = np.array(vectors[:, :dimension], dtype=np.float32)
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return np.divide(cut, norms, out=np.zeros_like(cut), where=norms > 0)


@dataclass(frozen=True, eq=False)
class Int8Vectors:
    """Stored vectors as int8 codes with one symmetric scale per dimension.

    ``scale_j = max_i |x_ij| / 127`` and ``code_ij = round(x_ij / scale_j)`` in [-127, 127], so
    ``|x_ij - code_ij · scale_j| <= scale_j / 2``; a dimension that is zero everywhere has scale
    1 and codes 0. Search is exact over the dequantized vectors ``code · scale``.
    """

    codes: np.ndarray  # (n, d) int8
    scales: np.ndarray  # (d,) float32

    @classmethod
    def quantize(cls, vectors: np.ndarray) -> Int8Vectors:
        vectors = np.asarray(vectors, dtype=np.float32)
        peak = np.abs(vectors).max(axis=0, initial=0.0)
        scales = np.where(peak > 0, peak / INT8_LEVELS, 1.0).astype(np.float32)
        codes = np.clip(np.rint(vectors / scales), -INT8_LEVELS, INT8_LEVELS).astype(np.int8)
        return cls(codes, scales)

    def dequantize(self) -> np.ndarray:
        return self.codes.astype(np.float32) * self.scales

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.scales.nbytes


def binarize(vectors: np.ndarray) -> np.ndarray:
    """Sign bits (coordinate > 0), packed 8 per byte: (n, d/8) uint8 codes for Hamming search."""
    if vectors.shape[1] % 8:
        raise ValueError(f"binary codes need a dimension divisible by 8, got {vectors.shape[1]}")
    return np.packbits(vectors > 0, axis=1)


def order_rows(scores: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row by (score descending, index ascending); missing entries (index -1) last."""
    scores = np.where(indices < 0, -np.inf, scores).astype(np.float32)
    order = np.lexsort((indices, -scores), axis=-1)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(indices, order, axis=1)


def pair_scores(
    queries: np.ndarray,
    documents: np.ndarray,
    indices: np.ndarray,
    metric: Metric,
    *,
    dtype: type[np.floating] = np.float64,
    block_size: int = 1024,
) -> np.ndarray:
    """Score of document ``indices[q, j]`` for query ``q`` (NaN where the index is -1).

    Computed pair by pair (one summation order for every pair), so identical vectors score
    identically wherever they sit, unlike in a blocked matrix product.
    """
    scores = np.full(indices.shape, np.nan, dtype=dtype)
    for start in range(0, len(indices), block_size):
        rows = slice(start, start + block_size)
        gathered = documents[np.maximum(indices[rows], 0)].astype(dtype, copy=False)
        query = np.asarray(queries[rows], dtype=dtype)
        block = (
            np.einsum("qjd,qd->qj", gathered, query)
            if metric == "inner_product"
            else -np.square(gathered - query[:, None, :]).sum(axis=2)
        )
        scores[rows] = np.where(indices[rows] < 0, np.nan, block)
    return scores


def exact_search(queries: np.ndarray, documents: np.ndarray, k: int, metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k under ``metric`` with the blocked torch search of L2 (:func:`exact_topk`).

    L2 ranks by ``q·d − ‖d‖²/2`` (an inner product of the vectors extended by 1 and −‖d‖²/2),
    which orders like −‖q−d‖²; the returned scores are ``2s − ‖q‖² = −‖q−d‖²``.
    """
    if metric == "inner_product":
        return exact_topk(queries, documents, k)
    queries = np.asarray(queries, dtype=np.float32)
    documents = np.asarray(documents, dtype=np.float32)
    half_norms = 0.5 * np.einsum("nd,nd->n", documents, documents)
    extended_queries = np.hstack([queries, np.ones((len(queries), 1), np.float32)])
    extended_documents = np.hstack([documents, -half_norms[:, None]])
    scores, indices = exact_topk(extended_queries, extended_documents, k)
    query_norms = np.einsum("nd,nd->n", queries, queries)[:, None]
    return order_rows(2 * scores - query_norms, indices)
