"""Vector transforms of level L4: dimension cuts, int8 and binary codes, pair scores, and the
document vectors read block by block.

Scores follow one convention everywhere in L4 (that of :mod:`embedpyramid.retrieval.search`):
larger is better. Inner-product scores are dot products, cosine scores dot products of unit
vectors, L2 scores negated squared Euclidean distances. Every (scores, indices) pair is ordered
by score descending, then document index ascending.

Documents are a matrix in memory or a stored embedding table (:class:`TableVectors`), read in
blocks of ``block_rows`` rows; the transforms that depend on the whole matrix (is it unit?) are
decided in one pass (:class:`Preparation`) and then applied block by block, row by row, so a
block, a gathered row or the whole matrix is transformed to the same bits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from embedpyramid.encode import BLOCK_ROWS, embedding_shape, iter_embedding_blocks
from embedpyramid.retrieval.search import Metric

UNIT_TOLERANCE = 1e-4
"""Vectors whose norms all lie within this of 1 are treated as unit vectors (a normalizing card)."""


@dataclass(frozen=True)
class TableVectors:
    """The vectors of a stored embedding table, never read whole: in blocks of ``block_rows``
    rows (:func:`vector_blocks`), or only the rows asked for (:func:`gather_rows`)."""

    path: Path
    block_rows: int = BLOCK_ROWS

    def __post_init__(self) -> None:
        if self.block_rows < 1:
            raise ValueError(f"block_rows must be positive, got {self.block_rows}")


Vectors = np.ndarray | TableVectors
"""Document vectors: a matrix in memory, or a stored table read block by block."""


def vector_shape(vectors: Vectors) -> tuple[int, int]:
    """(rows, dimension); a table's from its footer and schema, without reading a vector."""
    return embedding_shape(vectors.path) if isinstance(vectors, TableVectors) else vectors.shape


def vector_blocks(vectors: Vectors) -> Iterator[np.ndarray]:
    """Consecutive blocks of rows in table order: a matrix as one block, a table in blocks of
    its ``block_rows``."""
    if isinstance(vectors, TableVectors):
        for _, block in iter_embedding_blocks(vectors.path, vectors.block_rows):
            yield block
    else:
        yield vectors


def gather_rows(vectors: Vectors, rows: np.ndarray) -> np.ndarray:
    """The rows numbered ``rows`` (sorted, unique), in that order: from a table in one pass over
    its blocks, keeping only those rows."""
    if not isinstance(vectors, TableVectors):
        return np.asarray(vectors)[rows]
    parts, start = [], 0
    for block in vector_blocks(vectors):
        low, high = np.searchsorted(rows, [start, start + len(block)])
        parts.append(block[rows[low:high] - start])
        start += len(block)
    return np.concatenate(parts) if parts else np.empty((0, vector_shape(vectors)[1]), dtype=np.float32)


def _unit_evidence(vectors: np.ndarray) -> tuple[bool, bool]:
    """(some row is non-zero, every non-zero row has norm 1 within :data:`UNIT_TOLERANCE`)."""
    norms = np.linalg.norm(vectors, axis=1)
    norms = norms[norms > 0]
    return bool(len(norms)), bool(np.all(np.abs(norms - 1.0) <= UNIT_TOLERANCE))


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


@dataclass(frozen=True)
class Preparation:
    """What turns stored vectors into the vectors an index stores or searches with, float32 and
    contiguous, decided once over the whole matrix (:meth:`of`) and applied to any rows of it.

    A ``dimension`` cut keeps the leading coordinates and re-normalizes when the whole matrix is
    unit (``unit_input``; the card's own ``dimension`` is "truncate, then normalize"); vectors
    that are not unit are only truncated. Cosine indexes store unit vectors; a matrix that is
    unit after the cut (``unit_output``) is left as it is, so a Flat index reproduces the exact
    run bit for bit. Every step is row by row once the two flags are known. Without a cut or
    cosine neither flag matters: they are None, and no block is read to decide them.
    """

    metric: Metric
    dimension: int | None
    unit_input: bool | None
    unit_output: bool | None

    @classmethod
    def of(cls, blocks: Iterable[np.ndarray], metric: Metric, dimension: int | None) -> Preparation:
        """Decide the flags in one pass over the matrix's blocks (none when they do not matter)."""
        if dimension is None and metric != "cosine":
            return cls(metric, None, None, None)
        nonzero, unit_rows = [False, False], [True, True]  # (whole rows, rows cut to dimension)
        for block in blocks:
            block = np.asarray(block, dtype=np.float32)
            if dimension is not None and not 1 <= dimension <= block.shape[1]:
                raise ValueError(f"cannot cut {block.shape[1]}-d vectors to {dimension} dimensions")
            parts = [block] if dimension is None else [block, block[:, :dimension]]
            for position, part in enumerate(parts):
                some, within = _unit_evidence(part)
                nonzero[position] |= some
                unit_rows[position] &= within
        unit_input = nonzero[0] and unit_rows[0]
        # A unit matrix cut and re-normalized is unit again (an all-zero cut stays zero either way).
        unit_output = unit_input or (dimension is not None and nonzero[1] and unit_rows[1])
        return cls(metric, dimension, unit_input, unit_output)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.dimension is not None:
            vectors = np.ascontiguousarray(vectors[:, : self.dimension])
            if self.unit_input:
                vectors = unit(vectors)
        if self.metric == "cosine" and not self.unit_output:
            vectors = unit(vectors)
        return vectors


def prepared_vectors(vectors: np.ndarray, metric: Metric, dimension: int | None) -> np.ndarray:
    """The vectors an index stores or searches with (see :class:`Preparation`)."""
    return Preparation.of([vectors], metric, dimension)(vectors)


@dataclass(frozen=True, eq=False)
class GatheredRows:
    """The rows some result indices point at: ``rows`` (sorted, unique document indices) and
    their prepared ``vectors``, so that scoring a top-k reads those rows, not the table."""

    rows: np.ndarray
    vectors: np.ndarray

    @classmethod
    def of(cls, documents: Vectors, indices: Iterable[np.ndarray], preparation: Preparation | None = None) -> GatheredRows:
        """Every row named in ``indices`` (-1, a missing result, is skipped), read in one pass."""
        rows = np.unique(np.concatenate([np.asarray(i, dtype=np.int64).reshape(-1) for i in indices]))
        rows = rows[rows >= 0]
        vectors = gather_rows(documents, rows)
        return cls(rows, vectors if preparation is None else preparation(vectors))

    def positions(self, indices: np.ndarray) -> np.ndarray:
        """Where each document index sits in :attr:`vectors` (-1 stays -1); an index that was not
        gathered is an error, never a wrong row."""
        found = np.searchsorted(self.rows, indices)
        wanted = indices >= 0
        gathered = found < len(self.rows)
        gathered[gathered] = self.rows[found[gathered]] == indices[gathered]
        if np.any(wanted & ~gathered):
            raise ValueError(f"document {indices[wanted & ~gathered][0]} was not gathered")
        return np.where(indices >= 0, found, -1)


def int8_peak(vectors: np.ndarray) -> np.ndarray:
    """Per-dimension ``max_i |x_ij|`` of some rows; the peak of a matrix is the element-wise
    maximum of the peaks of its blocks."""
    return np.abs(vectors).max(axis=0, initial=0.0)


def symmetric_int8_index(peak: np.ndarray, metric: Metric) -> faiss.IndexScalarQuantizer:
    """An empty FAISS ``IndexScalarQuantizer`` (8 bits per coordinate) that stores int8 codes of
    the vectors added to it, searched by FAISS with float queries like every other L4 index;
    ``peak`` is :func:`int8_peak` of all the vectors it will hold.

    Each dimension ``j`` gets the symmetric range ``[-m_j, m_j]``, ``m_j = max_i |x_ij|`` (1 for a
    dimension that is zero everywhere), cut into 256 levels: ``code = floor((x + m_j) / (2 m_j)
    · 255)`` and ``x̂ = -m_j + (code + 0.5) · 2 m_j / 255``, so ``|x - x̂| <= m_j / 255`` and zero
    stays zero. (``kind: faiss, factory: SQ8`` differs in its range: ``[min_j, max_j]``.)
    """
    peak = np.where(peak > 0, peak, 1.0).astype(np.float32)
    faiss_metric = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    index = faiss.IndexScalarQuantizer(len(peak), faiss.ScalarQuantizer.QT_8bit, faiss_metric)
    faiss.copy_array_to_vector(np.concatenate([-peak, 2 * peak]), index.sq.trained)
    index.is_trained = True
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
