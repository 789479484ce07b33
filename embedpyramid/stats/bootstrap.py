"""Paired bootstrap of the mean per-query delta, with a percentile interval.

Given per-query deltas ``d_i = value_b(i) - value_a(i)`` (one column per metric), resample the
units with replacement ``B`` times and recompute the mean delta each time:

* by query: draw ``n`` queries, ``mean* = (1/n) * sum_i c_i d_i`` where ``c_i`` counts how often
  query ``i`` was drawn;
* by group (cluster bootstrap): draw ``G`` groups, ``mean* = sum_g c_g S_g / sum_g c_g n_g``
  with ``S_g`` the group's delta sum and ``n_g`` its size (the ratio estimator of
  Davison & Hinkley 1997, §3.8; Field & Welsh 2007).

The interval is the percentile interval (Efron & Tibshirani 1993, ch. 13) read off order
statistics ``theta*_((B+1) alpha)`` as in Davison & Hinkley (1997, ch. 5): with
``k = floor((B + 1)(1 - confidence) / 2)`` it is ``[k-th smallest, k-th largest]`` of the ``B``
resampled means (B = 10,000 at 95%: the 250th and the 9,751st). Reading symmetric order
statistics, rather than interpolating, makes the interval of ``-d`` exactly ``[-high, -low]``
(negating the input negates every product and partial sum exactly, given a matrix product that
is deterministic for a given shape, as numpy's bundled OpenBLAS is).

Every metric column is resampled with the same draws (one counts matrix per chunk of resamples
times the (n_units, n_metrics) matrix of unit sums), so the metrics of one comparison are
jointly resampled. The deltas are shifted by the first query's delta ``r`` before summing and
the shift is added back, ``mean* = r + mean*(d - r)``: a constant delta ``c`` then gives every
resampled mean as ``c + 0 = c`` exactly, so the interval of a constant shift is exactly
``[c, c]`` (and ``[0, 0]`` for a model against itself).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.units import (
    ResamplingUnits,
    delta_matrix,
    resampling_units,
    weighted_unit_sums,
)

# About 2 MiB of int64 indices per chunk: small enough to stay in cache, which is several times
# faster than one large draw, and independent of the result (see ``bootstrap_indices``).
_CHUNK_INDICES = 1 << 18


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Per-metric bootstrap summaries; each array has shape ``deltas.shape[1:]``.

    ``mean`` is the observed mean delta, ``ci_low``/``ci_high`` the percentile interval,
    ``median`` the median of the resampled means and ``share_above_zero`` the fraction of
    resampled means strictly above zero. ``resampling`` is ``"query"`` or ``"group"``;
    ``n_units`` is the number of queries or groups resampled.
    """

    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    median: np.ndarray
    share_above_zero: np.ndarray
    n_resamples: int
    seed: int
    confidence: float
    method: str
    resampling: str
    n_units: int


def bootstrap_indices(n_units: int, *, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield the drawn unit indices as int64 arrays of shape (rows, n_units), one row per resample.

    Concatenated, the chunks equal ``np.random.default_rng(seed).integers(0, n_units,
    size=(n_resamples, n_units))``: 64-bit bounded draws consume the generator the same way
    whatever the chunking, so the chunk size only affects speed.
    """
    rng = np.random.default_rng(seed)
    rows_per_chunk = max(1, _CHUNK_INDICES // n_units)
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        yield rng.integers(0, n_units, size=(rows, n_units), dtype=np.int64)


def bootstrap_counts(n_units: int, *, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield float64 (rows, n_units) matrices: how often each unit is drawn in each resample."""
    for indices in bootstrap_indices(n_units, n_resamples=n_resamples, seed=seed):
        rows = indices.shape[0]
        indices += (np.arange(rows, dtype=np.int64) * n_units)[:, None]
        counts = np.bincount(indices.ravel(), minlength=rows * n_units)
        yield counts.reshape(rows, n_units).astype(np.float64)


def percentile_rank(n_resamples: int, confidence: float) -> int:
    """Order-statistic rank ``k = floor((B + 1)(1 - confidence) / 2)`` of the percentile interval.

    Raises when ``k < 1``: so few resamples cannot bound a ``confidence`` interval.
    """
    k = math.floor((n_resamples + 1) * (1.0 - confidence) / 2.0 + 1e-9)
    if k < 1:
        needed = math.ceil(2.0 / (1.0 - confidence) - 1.0 - 1e-9)
        raise ValueError(
            f"n_resamples={n_resamples} is too few for a {confidence:.0%} percentile interval; "
            f"use at least {needed}"
        )
    return k


def paired_bootstrap(
    deltas: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 42,
    groups: ArrayLike | None = None,
) -> BootstrapResult:
    """Paired bootstrap percentile interval of the mean delta, per metric column.

    ``deltas`` is (n_queries,) or (n_queries, n_metrics), ``model_b - model_a`` per query.
    ``groups`` (one label per query) switches to the cluster bootstrap: whole groups are drawn.
    See the module docstring for the formulas and references.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence}")
    k = percentile_rank(n_resamples, confidence)
    matrix, output_shape = delta_matrix(deltas)
    reference = matrix[0].copy()
    units = resampling_units(matrix - reference, groups)

    resampled = reference + _resampled_means(units, n_resamples=n_resamples, seed=seed)
    resampled.sort(axis=0)
    middle = n_resamples // 2
    if n_resamples % 2:
        median = resampled[middle]
    else:
        median = (resampled[middle - 1] + resampled[middle]) / 2.0

    return BootstrapResult(
        mean=(reference + units.sums.sum(axis=0) / units.sizes.sum()).reshape(output_shape),
        ci_low=resampled[k - 1].reshape(output_shape),
        ci_high=resampled[n_resamples - k].reshape(output_shape),
        median=median.reshape(output_shape),
        share_above_zero=(resampled > 0.0).mean(axis=0).reshape(output_shape),
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        method="percentile",
        resampling="query" if groups is None else "group",
        n_units=units.n_units,
    )


def _resampled_means(units: ResamplingUnits, *, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_metrics) resampled ratios ``counts @ sums / counts @ sizes``."""
    totals_t = np.vstack([units.sums.T, units.sizes])
    means = np.empty((n_resamples, units.sums.shape[1]), dtype=np.float64)
    start = 0
    for counts in bootstrap_counts(units.n_units, n_resamples=n_resamples, seed=seed):
        weighted = weighted_unit_sums(counts, totals_t)
        stop = start + counts.shape[0]
        means[start:stop] = weighted[:, :-1] / weighted[:, -1:]
        start = stop
    return means
