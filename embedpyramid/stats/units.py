"""Resampling units shared by the paired bootstrap and the sign-flip test.

Both procedures resample *units*: single queries, or clusters of queries that share a group
label (a session, a source document) and are therefore not independent. A unit carries the sum
of its queries' deltas per metric and its size, so every statistic of either procedure is a
ratio of weighted sums, ``sum_u w_u * S_u / sum_u w_u * n_u``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True, eq=False)
class ResamplingUnits:
    """Per-unit delta sums ``sums`` (n_units, n_metrics) and query counts ``sizes`` (n_units,)."""

    sums: np.ndarray
    sizes: np.ndarray

    @property
    def n_units(self) -> int:
        return int(self.sizes.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.sizes.sum())


def delta_matrix(deltas: ArrayLike) -> tuple[np.ndarray, tuple[int, ...]]:
    """Validate per-query deltas; return a float64 (n_queries, n_metrics) matrix and the shape
    of one per-metric result (``()`` for a 1-D input, ``(n_metrics,)`` for a 2-D input)."""
    array = np.asarray(deltas, dtype=np.float64)
    if array.ndim not in (1, 2):
        raise ValueError(
            "deltas must be 1-D (n_queries,) or 2-D (n_queries, n_metrics); "
            f"got shape {array.shape}"
        )
    if array.size == 0:
        raise ValueError(
            f"deltas must hold at least one query and one metric; got shape {array.shape}"
        )
    matrix = array.reshape(array.shape[0], -1)
    if not np.isfinite(matrix).all():
        row, column = np.argwhere(~np.isfinite(matrix))[0]
        raise ValueError(
            f"deltas must be finite; query row {row}, metric column {column} "
            f"holds {matrix[row, column]}"
        )
    return matrix, array.shape[1:]


def weighted_unit_sums(weights: np.ndarray, unit_values_t: np.ndarray) -> np.ndarray:
    """``weights @ unit_values`` for (rows, n_units) ``weights`` and (k, n_units) ``unit_values_t``.

    Computed as ``(unit_values_t @ weights.T).T``, the few (k) rows on the left: OpenBLAS then
    runs this skinny product on one thread with a fixed summation order (it matches the
    single-threaded result bit for bit), whereas ``weights @ unit_values`` is split across
    threads, which measured several times slower on a busy 2-core machine and rounds
    differently with the thread count.
    """
    return (unit_values_t @ weights.T).T


def resampling_units(matrix: np.ndarray, groups: ArrayLike | None) -> ResamplingUnits:
    """Collapse a (n_queries, n_metrics) matrix onto units: each query, or each distinct group.

    Groups are ordered by their sorted label (``np.unique``), so the units do not depend on the
    order in which the groups first appear.
    """
    n_queries = matrix.shape[0]
    if groups is None:
        return ResamplingUnits(matrix, np.ones(n_queries, dtype=np.float64))
    labels = np.asarray(groups)
    if labels.shape != (n_queries,):
        raise ValueError(
            f"groups must hold one label per query, shape ({n_queries},); got {labels.shape}"
        )
    _, codes = np.unique(labels, return_inverse=True)
    n_units = int(codes.max()) + 1
    sums = np.zeros((n_units, matrix.shape[1]), dtype=np.float64)
    np.add.at(sums, codes, matrix)
    sizes = np.bincount(codes, minlength=n_units).astype(np.float64)
    return ResamplingUnits(sums, sizes)
