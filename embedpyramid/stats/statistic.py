"""Paired bootstrap of the difference of an arbitrary statistic over items.

Some task metrics are not means of per-item values: a correlation over all pairs (STS), the
average precision or F1 of a set of scored pairs, the agreement of a clustering with the gold
classes. Two models are still compared on the *same* items: resample the ``n`` items with
replacement ``B`` times (seeded), compute the statistic ``T`` of each model on the resampled
items, and take the difference ``delta* = T_b(items*) - T_a(items*)``. The interval is the
percentile interval of the ``B`` differences, read off the order statistics exactly as
:func:`embedpyramid.stats.paired_bootstrap` does (Efron & Tibshirani 1993, ch. 13; Davison &
Hinkley 1997, ch. 5): with ``k = floor((B + 1)(1 - confidence) / 2)`` it is ``[k-th smallest,
k-th largest]``. Both models see the same drawn indices — the ones ``paired_bootstrap`` draws
for the same ``n``, ``B`` and seed — so a model against itself gives exactly ``[0, 0]`` and
swapping the models negates the interval exactly.

The two-sided p-value of "no difference" is the percentile interval inverted (the test that
rejects exactly when the interval excludes 0; Efron & Tibshirani 1993, ch. 15–16, with the
``+1`` of a Monte-Carlo p-value, Davison & Hinkley 1997, ch. 4): with ``B`` valid resamples,
``p = min(1, 2 (1 + min(#{delta* <= 0}, #{delta* >= 0})) / (B + 1))``. Since ``k`` is the
floor of ``(B + 1)(1 - confidence) / 2``, ``p <= 1 - confidence`` holds exactly when the
interval lies above or below 0, so an adjusted p (Holm over a family) decides what the interval
alone would at the family's level. A model against itself (every ``delta* = 0``) has ``p = 1``.

A resample on which a statistic is undefined (NaN: a correlation of constant values, an AP with
no positive drawn) is left out of that statistic's interval; ``n_valid`` counts the resamples
used. With ``groups`` (one label per item) whole groups are drawn (cluster bootstrap, Davison &
Hinkley 1997, §3.8), keeping dependent items together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.config.resampling import percentile_rank
from embedpyramid.stats.bootstrap import bootstrap_indices

Statistic = Callable[..., ArrayLike]
"""``statistic(*arrays) -> value`` (a scalar or a 1-D vector of statistics). The arrays are the
items' data, each with the items on axis 0; with ``vectorized=True`` each array carries a
leading resample axis, ``(rows, n_items, ...)``, and the result is ``(rows,)`` or ``(rows, m)``."""


@dataclass(frozen=True, eq=False)
class StatisticComparison:
    """Observed statistics of both models, their difference and its bootstrap summary.

    Arrays have the statistic's shape (``()`` for a scalar statistic, ``(m,)`` for a vector):
    ``value_a``, ``value_b`` and ``delta = value_b - value_a`` on all items; ``ci_low``,
    ``ci_high`` the percentile interval of the resampled differences, ``median`` their median,
    ``share_above_zero`` the share strictly above zero, ``p_value`` the two-sided bootstrap
    p-value of no difference (the interval inverted, see the module docstring), ``n_valid`` the
    resamples on which both statistics were defined. ``resampling`` is ``"item"`` or ``"group"``.
    """

    value_a: np.ndarray
    value_b: np.ndarray
    delta: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    median: np.ndarray
    share_above_zero: np.ndarray
    p_value: np.ndarray
    n_valid: np.ndarray
    n_items: int
    n_units: int
    n_resamples: int
    seed: int
    confidence: float
    method: str
    resampling: str


def paired_statistic_bootstrap(
    statistic: Statistic,
    data_a: Sequence[ArrayLike],
    data_b: Sequence[ArrayLike],
    *,
    vectorized: bool = False,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 42,
    groups: ArrayLike | None = None,
) -> StatisticComparison:
    """Paired bootstrap percentile interval of ``statistic(*data_b) - statistic(*data_a)``.

    ``data_a`` and ``data_b`` hold each model's per-item arrays (the same items in the same
    order, e.g. ``(gold, cosine_a)`` and ``(gold, cosine_b)``). See the module docstring for the
    resampling, the interval and the handling of undefined resamples.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence}")
    percentile_rank(n_resamples, confidence)
    arrays_a, arrays_b = _item_arrays(data_a, "data_a"), _item_arrays(data_b, "data_b")
    n_items = arrays_a[0].shape[0]
    if arrays_b[0].shape[0] != n_items:
        raise ValueError(f"data_a holds {n_items} items but data_b {arrays_b[0].shape[0]}; pair them on the same items")
    value_a = _observed(statistic, arrays_a, vectorized)
    value_b = _observed(statistic, arrays_b, vectorized)
    if value_a.shape != value_b.shape:
        raise ValueError(f"the statistic returned shape {value_a.shape} for data_a but {value_b.shape} for data_b")
    if not (np.isfinite(value_a).all() and np.isfinite(value_b).all()):
        raise ValueError(f"the statistic is undefined on the full data (a: {value_a}, b: {value_b}); "
                         "it cannot be compared")

    deltas = np.empty((n_resamples, value_a.size), dtype=np.float64)
    start = 0
    members, n_units = _units(groups, n_items)
    for rows in _resample_rows(n_items, members, n_resamples=n_resamples, seed=seed):
        for indices in rows:
            stop = start + indices.shape[0]
            a = _resampled(statistic, arrays_a, indices, vectorized)
            b = _resampled(statistic, arrays_b, indices, vectorized)
            deltas[start:stop] = b - a
            start = stop

    low, high, median, above, p_value, valid = (np.empty(value_a.size) for _ in range(6))
    for column in range(value_a.size):
        finite = np.sort(deltas[np.isfinite(deltas[:, column]), column])
        valid[column] = finite.size
        try:
            k = percentile_rank(finite.size, confidence)
        except ValueError as error:
            raise ValueError(f"only {finite.size} of {n_resamples} resamples define statistic {column}: {error}") from None
        low[column], high[column] = finite[k - 1], finite[finite.size - k]
        median[column] = np.median(finite)
        above[column] = np.count_nonzero(finite > 0.0) / finite.size
        as_extreme = min(np.count_nonzero(finite <= 0.0), np.count_nonzero(finite >= 0.0))
        p_value[column] = min(1.0, 2.0 * (1 + as_extreme) / (finite.size + 1))
    shape = value_a.shape
    return StatisticComparison(
        value_a=value_a, value_b=value_b, delta=value_b - value_a,
        ci_low=low.reshape(shape), ci_high=high.reshape(shape), median=median.reshape(shape),
        share_above_zero=above.reshape(shape), p_value=p_value.reshape(shape), n_valid=valid.astype(np.int64).reshape(shape),
        n_items=n_items, n_units=n_units, n_resamples=n_resamples, seed=seed, confidence=confidence,
        method="percentile", resampling="item" if groups is None else "group",
    )


def _item_arrays(data: Sequence[ArrayLike], name: str) -> list[np.ndarray]:
    arrays = [np.asarray(array) for array in data]
    if not arrays:
        raise ValueError(f"{name} must hold at least one per-item array")
    lengths = {array.shape[0] if array.ndim else None for array in arrays}
    if len(lengths) != 1 or None in lengths or 0 in lengths:
        raise ValueError(f"{name}: every array needs the same non-zero number of items on axis 0; got "
                         f"shapes {[array.shape for array in arrays]}")
    return arrays


def _observed(statistic: Statistic, arrays: list[np.ndarray], vectorized: bool) -> np.ndarray:
    if vectorized:
        return np.asarray(statistic(*(array[None] for array in arrays)), dtype=np.float64)[0]
    return np.asarray(statistic(*arrays), dtype=np.float64)


def _resampled(statistic: Statistic, arrays: list[np.ndarray], indices: np.ndarray, vectorized: bool) -> np.ndarray:
    """(rows, m) statistics of the resamples whose item indices are the rows of ``indices``."""
    if vectorized:
        values = np.asarray(statistic(*(array[indices] for array in arrays)), dtype=np.float64)
        return values.reshape(indices.shape[0], -1)
    return np.stack([np.asarray(statistic(*(array[row] for array in arrays)), dtype=np.float64).reshape(-1)
                     for row in indices])


def _units(groups: ArrayLike | None, n_items: int) -> tuple[list[np.ndarray] | None, int]:
    """The item indices of each group, in sorted label order (``None`` for item resampling)."""
    if groups is None:
        return None, n_items
    labels = np.asarray(groups)
    if labels.shape != (n_items,):
        raise ValueError(f"groups must hold one label per item, shape ({n_items},); got {labels.shape}")
    _, codes = np.unique(labels, return_inverse=True)
    order = np.argsort(codes, kind="stable")
    members = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)
    return members, len(members)


def _resample_rows(n_items: int, members: list[np.ndarray] | None, *, n_resamples: int,
                   seed: int) -> Iterator[list[np.ndarray]]:
    """Chunks of resampled item indices: one (rows, n_items) matrix when items are drawn, else
    one (1, size) row per resample, the members of the drawn groups concatenated."""
    n_units = n_items if members is None else len(members)
    for drawn in bootstrap_indices(n_units, n_resamples=n_resamples, seed=seed):
        if members is None:
            yield [drawn]
        else:
            yield [np.concatenate([members[unit] for unit in row])[None] for row in drawn]
