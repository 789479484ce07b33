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
        row = self._row
        missing = [text_id for text_id in ids if text_id not in row]
        if missing:
            raise ValueError(f"text ids {missing[:5]} have no vector ({len(missing)} in all); "
                            "re-encode the dataset's texts table")
        return unit_vectors(self.vectors[[row[text_id] for text_id in ids]])


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32; norms accumulated in float64; zero rows stay zero)."""
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros(vectors.shape, np.float64), where=norms > 0).astype(np.float32)


def pair_cosines(vectors: TextVectors, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
    """Cosine of each (first[i], second[i]) text pair, in float64."""
    a, b = vectors.unit_rows(first).astype(np.float64), vectors.unit_rows(second).astype(np.float64)
    return np.einsum("ij,ij->i", a, b)
