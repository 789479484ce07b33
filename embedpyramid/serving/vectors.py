"""Vector transforms of level L4: dimension cuts, int8 and binary codes, pair scores.

Scores follow one convention everywhere in L4 (that of :mod:`embedpyramid.retrieval.search`):
larger is better. Inner-product scores are dot products, cosine scores dot products of unit
vectors, L2 scores negated squared Euclidean distances. Every (scores, indices) pair is ordered
by score descending, then document index ascending.
"""

from __future__ import annotations

import faiss
import numpy as np

from embedpyramid.retrieval.search import Metric

UNIT_TOLERANCE = 1e-4
"""Vectors whose norms all lie within this of 1 are treated as unit vectors (a normalizing card)."""


def is_unit(vectors: np.ndarray) -> bool:
    """Whether every non-zero row has norm 1 (within :data:`UNIT_TOLERANCE`)."""
    norms = np.linalg.norm(vectors, axis=1)
    norms = norms[norms > 0]
    return bool(len(norms)) and bool(np.all(np.abs(norms - 1.0) <= UNIT_TOLERANCE))


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); all-zero rows stay zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def truncate_and_normalize(vectors: np.ndarray, dimension: int) -> np.ndarray:
    """Matryoshka cut: the first ``dimension`` coordinates, re-scaled to unit L2 norm (float32).

    A row whose kept coordinates are all zero stays zero rather than becoming NaN.
    """
    if not 1 <= dimension <= vectors.shape[1]:
        raise ValueError(f"cannot cut {vectors.shape[1]}-d vectors to {dimension} dimensions")
    return unit(np.array(vectors[:, :dimension], dtype=np.float32))


def prepared_vectors(vectors: np.ndarray, metric: Metric, dimension: int | None) -> np.ndarray:
    """The vectors an index stores or searches with, float32 and contiguous.

    A ``dimension`` cut keeps the leading coordinates and re-normalizes unit vectors (the
    card's own ``dimension`` is "truncate, then normalize"); vectors that are not unit are only
    truncated. Cosine indexes store unit vectors; vectors that are unit already are left as
    they are, so a Flat index reproduces the exact run bit for bit.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if dimension is not None:
        if not 1 <= dimension <= vectors.shape[1]:
            raise ValueError(f"cannot cut {vectors.shape[1]}-d vectors to {dimension} dimensions")
        was_unit = is_unit(vectors)
        vectors = np.ascontiguousarray(vectors[:, :dimension])
        if was_unit:
            vectors = unit(vectors)
    if metric == "cosine" and not is_unit(vectors):
        vectors = unit(vectors)
    return vectors


def symmetric_int8_index(vectors: np.ndarray, metric: Metric) -> faiss.IndexScalarQuantizer:
    """int8 codes of the vectors in a FAISS ``IndexScalarQuantizer`` (8 bits per coordinate),
    searched by FAISS with float queries like every other L4 index.

    Each dimension ``j`` gets the symmetric range ``[-m_j, m_j]``, ``m_j = max_i |x_ij|`` (1 for a
    dimension that is zero everywhere), cut into 256 levels: ``code = floor((x + m_j) / (2 m_j)
    · 255)`` and ``x̂ = -m_j + (code + 0.5) · 2 m_j / 255``, so ``|x - x̂| <= m_j / 255`` and zero
    stays zero. (``kind: faiss, factory: SQ8`` differs in its range: ``[min_j, max_j]``.)
    """
    peak = np.abs(vectors).max(axis=0, initial=0.0)
    peak = np.where(peak > 0, peak, 1.0).astype(np.float32)
    faiss_metric = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    index = faiss.IndexScalarQuantizer(vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss_metric)
    faiss.copy_array_to_vector(np.concatenate([-peak, 2 * peak]), index.sq.trained)
    index.is_trained = True
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def binarize(vectors: np.ndarray) -> np.ndarray:
    """Sign bits (coordinate > 0), packed 8 per byte: (n, d/8) uint8 codes for Hamming search."""
    if vectors.shape[1] % 8:
        raise ValueError(f"binary codes need a dimension divisible by 8, got {vectors.shape[1]}")
    return np.packbits(vectors > 0, axis=1)


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
        if metric == "l2":
            block = -np.square(gathered - query[:, None, :]).sum(axis=2)
        else:
            block = np.einsum("qjd,qd->qj", gathered, query)
            if metric == "cosine":
                norms = np.linalg.norm(gathered, axis=2) * np.linalg.norm(query, axis=1)[:, None]
                block = np.divide(block, norms, out=np.zeros_like(block), where=norms > 0)
        scores[rows] = np.where(indices[rows] < 0, np.nan, block)
    return scores
