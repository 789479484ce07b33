"""Paired bootstrap of the mean per-query delta: hybrid (default), t, studentized, BCa or percentile intervals.

Given per-query deltas ``d_i = value_b(i) - value_a(i)`` (one column per metric), resample the
units with replacement ``B`` times and recompute the mean delta each time:

* by query: draw ``n`` queries, ``mean* = (1/n) * sum_i c_i d_i`` where ``c_i`` counts how often
  query ``i`` was drawn;
* by group (cluster bootstrap): draw ``G`` groups, ``mean* = sum_g c_g S_g / sum_g c_g n_g``
  with ``S_g`` the group's delta sum and ``n_g`` its size (the ratio estimator of
  Davison & Hinkley 1997, §3.8; Field & Welsh 2007).

Intervals at level ``1 - alpha`` read order statistics at ``k = floor((B + 1) alpha / 2)`` from
each end (Davison & Hinkley 1997, ch. 5; B = 10,000 at 95%: the 250th and the 9,751st):

* ``studentized`` (bootstrap-t): ``t*_b = (mean*_b - mean) / se*_b`` with each
  resample's own standard error ``se*^2 = G/(G-1) * sum_g c_g (S_g - mean*_b n_g)^2 / W*^2``
  (``W* = sum_g c_g n_g``; ``s^2 / n`` when the units are queries), and the interval
  ``[mean - t*_(B+1-k) se, mean - t*_(k) se]`` (Efron & Tibshirani 1993, §12.5; Davison &
  Hinkley 1997, §5.2.1). A resample whose units all carry the same value has ``se* = 0`` and
  ``t* = +-inf`` (0 when its mean is the observed mean). When more than ``alpha / 2`` of the
  resamples have no spread — two queries, or deltas so sparse that many resamples draw none of
  the few non-zero ones — the studentized interval is unbounded on a side; such a column is
  read as BCa instead and flagged (``fallback``).
* ``bca``: the percentile interval read at levels ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))``,
  with ``z0 = Phi^-1(share of resampled means below the mean, ties counted half)`` (a tie:
  equal up to the products' rounding, ``8 G eps max|S_g / n_g|``) and the
  jackknife acceleration ``a = sum U^3 / (6 (sum U^2)^1.5)``, ``U`` the deviations of the
  leave-one-unit-out means (Efron 1987; Efron & Tibshirani 1993, §14.3).
* ``percentile``: ``[k-th smallest, k-th largest]`` resampled mean (Efron & Tibshirani, ch. 13).
* ``t``: ``mean -+ t_(G-1)(1 - alpha/2) se``, the Student interval with the (cluster-robust)
  standard error of :func:`embedpyramid.stats.paired_t_test`; it needs no resample, so its ends
  carry no Monte-Carlo error (the resamples still give the median and share above zero).
* ``hybrid`` (the default): ``t`` for a column where at least half the queries tie at delta 0
  (``HYBRID_TIED_SHARE``), ``studentized`` otherwise. Ties are where the bootstrap-t pivot
  breaks: resamples that draw few of the non-zero deltas have a tiny ``se*``, so ``t*`` has
  heavy, lumpy tails and the interval is too short or unbounded; the t interval does not
  resample and holds there. On continuous skewed deltas the studentized interval corrects the
  skew the symmetric t interval ignores.

``bounds`` (the range the mean can take) clip every interval.

Why the hybrid is the default (``benchmarks/interval_coverage.py``: 2,000 samples per cell,
10,000 resamples, on zero-inflated nDCG@10 deltas, sparse +-1 Hit@1 deltas and skewed bounded
deltas at n = 10 to 1,000; its table is in ``benchmarks/results/interval_coverage.jsonl``): it is the only candidate
that covers at least 0.935 at every n >= 20 in all three. The studentized interval under-covers
the tied populations (0.90 to 0.92 at n = 20 to 30, 0.72 to 0.86 at n = 10), the t interval the
skewed one (0.90 to 0.93 at n = 20 to 100), BCa and the percentile interval both. No candidate
reaches 0.92 at n = 10 on all three: the hybrid covers 0.940, 0.918 and 0.856 there — with ten
queries the sample often holds none of the rare large deltas that carry the mean, which no
interval built from the sample can see. Reading symmetric order statistics and tail
probabilities makes the interval of ``-d`` exactly ``[-high, -low]``.

Monte-Carlo error of an endpoint read at rank ``r``: half the spread of the endpoint between the
order statistics at ``r -+ j``, ``j = ceil(sqrt(B q (1 - q)))`` and ``q = r / (B + 1)``: one
binomial standard deviation of the number of resamples below the true quantile (the
order-statistic interval for a quantile; Efron & Tibshirani 1993, §19.3 discuss the size of B).

Exact where it matters. Every metric column is resampled with the same draws (one counts matrix
per block of resamples times the (n_units, columns) matrix of unit sums), on one BLAS thread so
the products do not depend on the thread count. A column whose deltas are all equal (a model
against itself, a constant shift ``c``) has no sampling variability: its mean, interval and
median are exactly ``c``. A resample that draws only zero deltas sums to exactly 0; so does one
whose deltas cancel, because a resampled sum within the product's rounding bound of zero
(``2 G eps W* max|S_g / n_g|``) is recomputed correctly rounded (``math.fsum``) — unless the
column's values all lie on one power-of-two grid narrow enough that no sum can round (deltas of
P@k, Hit@k, binary nDCG@1), where the product is exact already. So the share above zero is not
biased by rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.config.resampling import percentile_rank
from embedpyramid.progress import report
from embedpyramid.stats.units import (
    ResamplingUnits,
    delta_matrix,
    resampling_units,
    rows_per_block,
    single_blas_thread,
)

IntervalMethod = Literal["t", "studentized", "hybrid", "bca", "percentile"]
INTERVAL_METHODS: tuple[str, ...] = ("t", "studentized", "hybrid", "bca", "percentile")
# The hybrid reads the t interval where at least this share of the queries tie at delta 0.
HYBRID_TIED_SHARE = 0.5

_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Per-metric bootstrap summaries; each array has shape ``deltas.shape[1:]``.

    ``mean`` is the observed mean delta, ``ci_low``/``ci_high`` the interval of ``method``
    with the Monte-Carlo errors of its endpoints, ``median`` the median of the resampled means
    and ``share_above_zero`` the fraction of resampled means strictly above zero. ``fallback``
    marks the columns whose studentized interval is unbounded, read as BCa instead; ``methods``
    names the interval each column was read with (``t``, ``studentized``, ``bca`` or
    ``percentile``: the hybrid's choice, or ``bca`` for a fallback). ``resampling`` is ``"query"`` or ``"group"``; ``n_units`` is the number of queries or
    groups resampled.
    """

    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    ci_low_mc_error: np.ndarray
    ci_high_mc_error: np.ndarray
    median: np.ndarray
    share_above_zero: np.ndarray
    fallback: np.ndarray
    methods: np.ndarray
    n_resamples: int
    seed: int
    confidence: float
    method: str
    resampling: str
    n_units: int


def bootstrap_indices(n_units: int, *, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield the drawn unit indices as int64 arrays of shape (rows, n_units), one row per resample.

    Concatenated, the blocks equal ``np.random.default_rng(seed).integers(0, n_units,
    size=(n_resamples, n_units))``: 64-bit bounded draws consume the generator the same way
    whatever the blocking, so the block size only affects speed.
    """
    rng = np.random.default_rng(seed)
    rows_per_chunk = rows_per_block(n_units, n_resamples)
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        yield rng.integers(0, n_units, size=(rows, n_units), dtype=np.int64)
        report("bootstrap resamples", start + rows, n_resamples)


def bootstrap_counts(n_units: int, *, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield float64 (rows, n_units) matrices: how often each unit is drawn in each resample."""
    for indices in bootstrap_indices(n_units, n_resamples=n_resamples, seed=seed):
        rows = indices.shape[0]
        indices += (np.arange(rows, dtype=np.int64) * n_units)[:, None]
        counts = np.bincount(indices.ravel(), minlength=rows * n_units)
        yield counts.reshape(rows, n_units).astype(np.float64)


def paired_bootstrap(
    deltas: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 42,
    groups: ArrayLike | None = None,
    method: IntervalMethod = "hybrid",
    bounds: tuple[float, float] | None = None,
) -> BootstrapResult:
    """Paired bootstrap interval of the mean delta, per metric column.

    ``deltas`` is (n_queries,) or (n_queries, n_metrics), ``model_b - model_a`` per query.
    ``groups`` (one label per query) switches to the cluster bootstrap: whole groups are drawn.
    ``method`` is ``t``, ``studentized``, ``hybrid``, ``bca`` or ``percentile``; ``bounds`` (low, high), the range
    the mean delta can take (``(-1, 1)`` for metrics in [0, 1]), clips the interval. See the
    module docstring for the formulas and references.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence}")
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown interval method {method!r}; allowed: {', '.join(INTERVAL_METHODS)}")
    if bounds is not None and not bounds[0] <= bounds[1]:
        raise ValueError(f"bounds must be (low, high) with low <= high; got {bounds}")
    k = percentile_rank(n_resamples, confidence)
    matrix, output_shape = delta_matrix(deltas)
    units = resampling_units(matrix, groups)
    n_metrics = matrix.shape[1]

    constant = (matrix == matrix[0]).all(axis=0)
    totals = np.array([math.fsum(units.sums[:, column]) for column in range(n_metrics)])
    mean = np.where(constant, matrix[0], totals / units.n_queries)
    unit_means = units.sums / units.sizes[:, None]
    # Groups whose means are all equal leave no spread either, whatever their sizes.
    degenerate = constant | (unit_means == unit_means[0]).all(axis=0)

    if method == "hybrid":
        tied = (matrix == 0.0).mean(axis=0) >= HYBRID_TIED_SHARE
        chosen = np.where(tied, "t", "studentized")
    else:
        chosen = np.full(n_metrics, method)
    low, high, median = mean.copy(), mean.copy(), mean.copy()
    low_error, high_error = np.zeros(n_metrics), np.zeros(n_metrics)
    fallback = np.zeros(n_metrics, dtype=bool)
    share = (mean > 0.0).astype(np.float64)
    varying = np.flatnonzero(~degenerate)
    if varying.size:
        columns = ResamplingUnits(units.sums[:, varying], units.sizes)
        draws = _resample(
            columns, mean[varying], n_resamples=n_resamples, seed=seed,
            studentized=bool((chosen[varying] == "studentized").any()),
        )
        middle = n_resamples // 2
        median[varying] = (
            draws.means[middle] if n_resamples % 2
            else (draws.means[middle - 1] + draws.means[middle]) / 2.0
        )
        share[varying] = (draws.means > 0.0).mean(axis=0)
        for name in np.unique(chosen[varying]).tolist():
            subset = np.flatnonzero(chosen[varying] == name)
            picked = varying[subset]
            ends = _interval(
                _Draws.columns(draws, subset), mean[picked],
                ResamplingUnits(columns.sums[:, subset], columns.sizes),
                k=k, confidence=confidence, method=name, bounds=bounds,
            )
            low[picked], high[picked], low_error[picked], high_error[picked], fallback[picked] = ends

    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return BootstrapResult(
        mean=mean.reshape(output_shape),
        ci_low=low.reshape(output_shape),
        ci_high=high.reshape(output_shape),
        ci_low_mc_error=low_error.reshape(output_shape),
        ci_high_mc_error=high_error.reshape(output_shape),
        median=median.reshape(output_shape),
        share_above_zero=share.reshape(output_shape),
        fallback=fallback.reshape(output_shape),
        methods=np.where(fallback, "bca", chosen).reshape(output_shape),
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        method=method,
        resampling="query" if groups is None else "group",
        n_units=units.n_units,
    )


@dataclass(frozen=True, eq=False)
class _Draws:
    """Sorted (B, n_metrics) resampled means; sorted studentized statistics when they were
    asked for; the observed standard error; ``tolerance``, per column, under which a resampled
    mean is taken to equal the observed mean (their difference is then rounding)."""

    means: np.ndarray
    t: np.ndarray | None
    se: np.ndarray | None
    tolerance: np.ndarray

    def columns(self, subset: np.ndarray) -> _Draws:
        """The draws of the columns ``subset`` only."""
        return _Draws(
            self.means[:, subset],
            None if self.t is None else self.t[:, subset],
            None if self.se is None else self.se[subset],
            self.tolerance[subset],
        )


def _resample(
    units: ResamplingUnits, mean: np.ndarray, *, n_resamples: int, seed: int, studentized: bool
) -> _Draws:
    """Resampled means (and studentized statistics) of columns that vary between units."""
    sums, sizes, n_units = units.sums, units.sizes, units.n_units
    n_metrics = sums.shape[1]
    centered = sums - mean * sizes[:, None]
    blocks = [sums]
    if studentized:
        blocks.append(centered**2)
        if not units.singletons:
            blocks += [centered * sizes[:, None], (sizes**2)[:, None]]
    blocks.append(sizes[:, None])
    values = np.hstack(blocks)
    largest = np.abs(sums / sizes[:, None]).max(axis=0)
    # Columns whose resampled sums are exact in float64 need no second look.
    rounding = np.where(_sums_exactly(sums, n_units), -1.0, 2.0 * n_units * _EPS * largest)
    tolerance = 8.0 * n_units * _EPS * largest

    means = np.empty((n_resamples, n_metrics))
    t = np.empty((n_resamples, n_metrics)) if studentized else None
    start = 0
    with single_blas_thread():
        for counts in bootstrap_counts(n_units, n_resamples=n_resamples, seed=seed):
            weighted = counts @ values
            stop = start + counts.shape[0]
            weight = weighted[:, -1:]
            totals = _exact_near_zero(weighted[:, :n_metrics], counts, sums, weight * rounding)
            means[start:stop] = totals / weight
            if t is not None:
                t[start:stop] = _studentized(
                    means[start:stop] - mean, weighted, weight, n_metrics, n_units,
                    singletons=units.singletons, tolerance=tolerance,
                )
            start = stop
    means.sort(axis=0)
    if t is not None:
        t.sort(axis=0)
    se = np.sqrt(n_units / (n_units - 1) * (centered**2).sum(axis=0)) / sizes.sum()
    return _Draws(means, t, se, tolerance)


def _exact_near_zero(
    totals: np.ndarray, counts: np.ndarray, sums: np.ndarray, bound: np.ndarray
) -> np.ndarray:
    """Recompute, correctly rounded, the resampled sums the product cannot tell from zero (a
    resample that drew only zero deltas is exactly 0 already)."""
    rows, columns = np.nonzero(np.abs(totals) <= bound)
    drew_nonzero = np.einsum("ij,ji->i", counts[rows], sums[:, columns] != 0.0) > 0
    rows, columns = rows[drew_nonzero], columns[drew_nonzero]
    if not len(rows):
        return totals
    # np.nonzero lists them row by row: one resample's draws serve all its columns.
    starts = np.flatnonzero(np.diff(rows, prepend=-1))
    for row, row_columns in zip(rows[starts].tolist(), np.split(columns, starts[1:]), strict=True):
        drawn = np.flatnonzero(counts[row])
        repeated = np.repeat(sums[np.ix_(drawn, row_columns)], counts[row, drawn].astype(np.int64), axis=0)
        for column, values in zip(row_columns.tolist(), repeated.T.tolist(), strict=True):
            totals[row, column] = math.fsum(values)
    return totals


def _sums_exactly(sums: np.ndarray, n_draws: int) -> np.ndarray:
    """Per column: whether every sum of ``n_draws`` unit values is exact in float64 — all values
    are integer multiples of one power of two, few enough bits apart (deltas of P@k, Hit@k,
    CompleteEvidence@k, of binary nDCG@1 ...), so no partial sum ever rounds."""
    fraction, exponent = np.frexp(sums)
    mantissa = np.abs(fraction * 2.0**53).astype(np.int64)
    trailing = np.log2(np.where(mantissa > 0, mantissa & -mantissa, 2**53)).astype(np.int64)
    lowest_bit = np.where(sums != 0.0, exponent - 53 + trailing, np.iinfo(np.int64).max).min(axis=0)
    highest_bit = np.where(sums != 0.0, exponent, np.iinfo(np.int64).min).max(axis=0)
    needed = highest_bit - lowest_bit + math.ceil(math.log2(n_draws + 1))
    return (needed < 53) | ~(sums != 0.0).any(axis=0)


def _studentized(
    shift: np.ndarray,
    weighted: np.ndarray,
    weight: np.ndarray,
    n_metrics: int,
    n_units: int,
    *,
    singletons: bool,
    tolerance: np.ndarray,
) -> np.ndarray:
    """``(mean* - mean) / se*`` per resample; +-inf (or 0) where a resample has no spread."""
    squares = weighted[:, n_metrics : 2 * n_metrics]
    if singletons:
        spread = squares - weight * shift**2
        scale = squares + weight * shift**2
    else:
        cross = weighted[:, 2 * n_metrics : 3 * n_metrics]
        size_squares = weighted[:, 3 * n_metrics : 3 * n_metrics + 1]
        spread = squares - 2.0 * shift * cross + shift**2 * size_squares
        scale = squares + 2.0 * np.abs(shift * cross) + shift**2 * size_squares
    flat = spread <= 16.0 * n_units * _EPS * scale
    se = np.sqrt(n_units / (n_units - 1) * np.maximum(spread, 0.0)) / weight
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = shift / se
    unbounded = np.where(np.abs(shift) <= tolerance, 0.0, np.copysign(np.inf, shift))
    return np.where(flat, unbounded, ratio)


def _interval(
    draws: _Draws,
    mean: np.ndarray,
    units: ResamplingUnits,
    *,
    k: int,
    confidence: float,
    method: str,
    bounds: tuple[float, float] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, their Monte-Carlo errors, fallback) of the varying columns; ``fallback``
    marks the studentized columns read as BCa because their studentized interval is unbounded."""
    n_resamples, n_metrics = draws.means.shape
    top = np.full(n_metrics, n_resamples + 1 - k)
    bottom = np.full(n_metrics, k)
    fallback = np.zeros(n_metrics, dtype=bool)

    def identity(values: np.ndarray) -> np.ndarray:
        return _clipped(values, bounds)

    if method == "t":
        return _t_interval(mean, draws.se, units.n_units, confidence=confidence, bounds=bounds)
    if method == "bca":
        bottom, top = _bca_ranks(draws.means, mean, draws.tolerance, units, confidence)
    low, low_error = _read(draws.means, bottom, identity, n_resamples)
    high, high_error = _read(draws.means, top, identity, n_resamples)
    if method != "studentized":
        return low, high, low_error, high_error, fallback

    assert draws.t is not None and draws.se is not None
    se = draws.se

    def from_t(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            ends = mean - values * se
        return _clipped(ends, bounds)

    fallback = np.isinf(draws.t[top - 1, np.arange(n_metrics)]) | np.isinf(draws.t[bottom - 1, np.arange(n_metrics)])
    t_low, t_low_error = _read(draws.t, top, from_t, n_resamples)
    t_high, t_high_error = _read(draws.t, bottom, from_t, n_resamples)
    if fallback.any():
        bca_bottom, bca_top = _bca_ranks(draws.means, mean, draws.tolerance, units, confidence)
        low, low_error = _read(draws.means, bca_bottom, identity, n_resamples)
        high, high_error = _read(draws.means, bca_top, identity, n_resamples)
    return (
        np.where(fallback, low, t_low),
        np.where(fallback, high, t_high),
        np.where(fallback, low_error, t_low_error),
        np.where(fallback, high_error, t_high_error),
        fallback,
    )


def _t_interval(
    mean: np.ndarray, se: np.ndarray | None, n_units: int, *, confidence: float, bounds: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``mean -+ t_(n_units - 1)(1 - alpha/2) se``: no resampling, so no Monte-Carlo error."""
    from scipy.stats import t as student_t  # scipy is imported where used: a warm CLI start computes no statistics

    assert se is not None
    half = student_t.ppf(0.5 + confidence / 2.0, n_units - 1) * se
    zeros = np.zeros_like(mean)
    return _clipped(mean - half, bounds), _clipped(mean + half, bounds), zeros, zeros.copy(), zeros.astype(bool)


def _read(
    ordered: np.ndarray, ranks: np.ndarray, endpoint: Callable[[np.ndarray], np.ndarray], n_resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """The endpoint at 1-based ``ranks`` of each sorted column, and its Monte-Carlo error."""
    share = ranks / (n_resamples + 1)
    spread = np.ceil(np.sqrt(n_resamples * share * (1.0 - share))).astype(np.int64)

    def at(rank: np.ndarray) -> np.ndarray:
        index = np.clip(rank, 1, n_resamples)[None, :] - 1
        return endpoint(np.take_along_axis(ordered, index, axis=0)[0])

    below, above = at(ranks - spread), at(ranks + spread)
    with np.errstate(invalid="ignore"):
        error = np.where(below == above, 0.0, np.abs(above - below) / 2.0)
    return at(ranks), error


def _clipped(values: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    return values if bounds is None else np.clip(values, *bounds)


def _bca_ranks(
    means: np.ndarray, mean: np.ndarray, tolerance: np.ndarray, units: ResamplingUnits, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """1-based (low, high) order-statistic ranks of the BCa interval, per column; a resampled
    mean within ``tolerance`` of the mean is a tie (counted half)."""
    from scipy.special import ndtr, ndtri  # scipy is imported where used: a warm CLI start computes no statistics

    n_resamples = means.shape[0]
    below = (means < mean - tolerance).sum(axis=0)
    above = (means > mean + tolerance).sum(axis=0)
    ties = n_resamples - below - above
    floor = 0.5 / n_resamples

    def tail(count: np.ndarray) -> np.ndarray:
        return ndtri(np.maximum((count + ties / 2.0) / n_resamples, floor))

    # Taking the smaller side keeps z0 of -d exactly -z0 of d.
    bias = np.where(below <= above, tail(below), -tail(above))
    total = units.sizes.sum()
    leave_out = (units.sums - mean * units.sizes[:, None]) / (total - units.sizes)[:, None]
    deviations = leave_out - leave_out.mean(axis=0)
    spread = (deviations**2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        acceleration = np.where(spread > 0.0, (deviations**3).sum(axis=0) / (6.0 * spread**1.5), 0.0)
    z = ndtri((1.0 - confidence) / 2.0)

    def level(edge: float) -> np.ndarray:
        shifted = bias + edge
        denominator = 1.0 - acceleration * shifted
        with np.errstate(divide="ignore"):
            return np.where(denominator > 0.0, bias + shifted / denominator, np.copysign(np.inf, shifted))

    low_rank = np.floor((n_resamples + 1) * ndtr(level(z))).astype(np.int64)
    from_top = np.floor((n_resamples + 1) * ndtr(-level(-z))).astype(np.int64)
    return np.clip(low_rank, 1, n_resamples), np.clip(n_resamples + 1 - from_top, 1, n_resamples)
