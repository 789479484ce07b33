"""Vectors keyed by text id: the rows of an embedding table looked up by id, L2-normalized, and
the cosines of id pairs — shared by L1 pair sanity and the L2 task families."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class TextVectors:
    """A model's vectors of a task dataset's texts, by text id (as an embedding table holds them)."""

    ids: list[str]
    vectors: np.ndarray
    _row: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.ids):
            raise ValueError(f"{len(self.ids)} text ids but vectors of shape {self.vectors.shape}; one row per id")
        object.__setattr__(self, "_row", {text_id: row for row, text_id in enumerate(self.ids)})

    def unit_rows(self, ids: Sequence[str]) -> np.ndarray:
        """The L2-normalized float32 vectors of ``ids``, in that order."""
        return unit_vectors(self.rows(ids))

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        """The vectors of ``ids`` as the card produced them (float32, not re-normalized), in that order."""
        row = self._row
        missing = [text_id for text_id in ids if text_id not in row]
        if missing:
            raise ValueError(f"text ids {missing[:5]} have no vector ({len(missing)} in all); "
                             "re-encode the dataset's texts table")
        return np.asarray(self.vectors[[row[text_id] for text_id in ids]], dtype=np.float32)


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32; norms accumulated in float64; zero rows stay zero)."""
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros(vectors.shape, np.float64), where=norms > 0).astype(np.float32)


def pair_cosines(vectors: TextVectors, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
    """Cosine of each (first[i], second[i]) text pair, in float64."""
    a, b = vectors.unit_rows(first).astype(np.float64), vectors.unit_rows(second).astype(np.float64)
    return np.einsum("ij,ij->i", a, b)


SIMILARITIES = ("cosine", "inner_product", "l2")
"""How a card's vectors are compared (``ModelCard.similarity``); every L2 family scores with it."""


def pair_similarities(vectors: TextVectors, first: Sequence[str], second: Sequence[str],
                      similarity: str = "cosine") -> np.ndarray:
    """The card's similarity of each (first[i], second[i]) text pair, in float64, higher = more
    similar: ``cosine`` of the unit vectors, ``inner_product`` of the vectors as produced, or
    ``l2``, the negative Euclidean distance."""
    if similarity == "cosine":
        return pair_cosines(vectors, first, second)
    a, b = vectors.rows(first).astype(np.float64), vectors.rows(second).astype(np.float64)
    if similarity == "inner_product":
        return np.einsum("ij,ij->i", a, b)
    if similarity == "l2":
        return -np.linalg.norm(a - b, axis=1)
    raise ValueError(f"unknown similarity {similarity!r}; allowed: {', '.join(SIMILARITIES)}")


def similarity_matrix(vectors: TextVectors, rows: Sequence[str], columns: Sequence[str],
                      similarity: str = "cosine") -> np.ndarray:
    """(rows, columns) float64 similarities of the card (see :func:`pair_similarities`)."""
    if similarity == "cosine":
        a, b = vectors.unit_rows(rows).astype(np.float64), vectors.unit_rows(columns).astype(np.float64)
        return a @ b.T
    a, b = vectors.rows(rows).astype(np.float64), vectors.rows(columns).astype(np.float64)
    if similarity == "inner_product":
        return a @ b.T
    if similarity == "l2":
        squared = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
        return -np.sqrt(np.clip(squared, 0.0, None))
    raise ValueError(f"unknown similarity {similarity!r}; allowed: {', '.join(SIMILARITIES)}")
