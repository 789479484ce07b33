"""Resampling units shared by the paired bootstrap, the sign-flip test and the Tukey HSD test.

Those procedures resample *units*: single queries, or clusters of queries that share a group
label (a session, a source document) and are therefore not independent. A unit carries the sum
of its queries' deltas per metric and its size, so every statistic of either procedure is a
ratio of weighted sums, ``sum_u w_u * S_u / sum_u w_u * n_u``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import ArrayLike
from threadpoolctl import ThreadpoolController

# About 2 M weights (16 MiB of float64) per block of resamples: large enough for the matrix
# product to run at full speed, small enough to stay far from the memory of a busy machine.
BLOCK_ELEMENTS = 1 << 21


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

    @property
    def singletons(self) -> bool:
        """True when every unit is one query (no groups)."""
        return bool((self.sizes == 1.0).all())


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


def rows_per_block(n_units: int, n_rows: int) -> int:
    """Rows of weights per block: about :data:`BLOCK_ELEMENTS` weights, at most ``n_rows``."""
    return max(1, min(n_rows, BLOCK_ELEMENTS // max(n_units, 1)))


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """Run the weighted sums on one BLAS thread.

    ``weights @ unit_values`` split across threads rounds differently with the thread count;
    on one thread a result depends only on its inputs (and numpy's bundled OpenBLAS), so a
    rerun, another machine or a negated input reproduces it bit for bit.
    """
    with _blas_libraries().limit(limits=1):
        yield


@cache
def _blas_libraries() -> ThreadpoolController:
    """The process's BLAS libraries, numpy's among them (loaded with numpy), found once:
    ``threadpool_limits`` scans every loaded library at each call, and the comparisons limit the
    threads once per block of resamples."""
    return ThreadpoolController().select(user_api="blas")


def resampling_units(matrix: np.ndarray, groups: ArrayLike | None) -> ResamplingUnits:
    """Collapse a (n_queries, n_metrics) matrix onto units: each query, or each distinct group.

    Groups are ordered by their sorted label (``np.unique``), so the units do not depend on the
    order in which the groups first appear. A group's sum is correctly rounded (``math.fsum``),
    so it does not depend on the order of its queries either.
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
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n_units + 1))
    sums = np.array(
        [
            [math.fsum(matrix[order[start:stop], column]) for column in range(matrix.shape[1])]
            for start, stop in itertools.pairwise(bounds.tolist())
        ],
        dtype=np.float64,
    ).reshape(n_units, matrix.shape[1])
    sizes = np.diff(bounds).astype(np.float64)
    return ResamplingUnits(sums, sizes)

