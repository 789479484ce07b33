"""Randomized Tukey HSD: all pairwise comparisons of several models, with simultaneous intervals,
compact letter groups and rank intervals.

With ``m`` models scored on the same ``n`` queries (a queries x models matrix ``X``), the null
hypothesis is that the models are exchangeable on every query. Each randomization permutes the
``m`` values of every query (of every group, with ``groups``: all queries of a group share one
permutation) and records the range of the permuted model means,
``R_b = max_j mean_j - min_j mean_j``. For the pair (i, j) with observed difference
``|mean_i - mean_j|`` the two-sided p-value is ``(1 + #{b : R_b >= |mean_i - mean_j| - gamma})
/ (B + 1)`` (``gamma = 100 eps |difference|`` absorbs rounding, as in the sign-flip test), and
the simultaneous interval of ``mean_j - mean_i`` is ``difference +- q`` with ``q`` the
order statistic of the ranges at rank ``ceil((B + 1) confidence)``. Comparing every pair with
the distribution of the *largest* difference controls the family-wise error over all pairs
(Tukey 1953; the randomized version of Carterette 2012, "Multiple testing in statistical
analysis of systems-based information retrieval experiments", ACM TOIS 30(1), and Sakai 2014,
"Statistical reform in information retrieval?", SIGIR Forum 48(1)). The p-values' Monte-Carlo
error is ``sqrt(p (1 - p) / B)``.

The decisions are summarised as a compact letter display (models sharing a letter are not
distinguishable, :func:`embedpyramid.stats.compact_letter_display`) and as rank intervals: model
``i`` ranks somewhere between ``1 + #{models significantly better}`` and
``m - #{models significantly worse}``.

Up to :data:`TABLE_MODELS` models the permutation of a unit is drawn as one of the ``m!``
orders (one 64-bit draw per unit, a table look-up per model); beyond that, by sorting uniform
keys. Both depend only on the seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.letters import compact_letter_display
from embedpyramid.stats.units import ResamplingUnits, resampling_units, rows_per_block

TABLE_MODELS = 5
"""Models up to which a unit's permutation is drawn from the table of all m! orders."""

_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True, eq=False)
class TukeyHSD:
    """All-pairs randomized Tukey HSD of ``models`` (input order).

    ``means`` (m,); ``differences[i, j] = means[j] - means[i]``; ``p_values`` and
    ``p_value_mc_errors`` (m, m), symmetric, 1 and 0 on the diagonal; ``critical_range`` the
    half-width ``q`` of every simultaneous interval; ``significant`` (m, m) where
    ``p <= 1 - confidence``; ``letters`` per model; ``rank_low``/``rank_high`` (m,) the rank
    interval of each model (1 = best).
    """

    models: tuple[str, ...]
    means: np.ndarray
    differences: np.ndarray
    p_values: np.ndarray
    p_value_mc_errors: np.ndarray
    critical_range: float
    significant: np.ndarray
    letters: dict[str, str]
    rank_low: np.ndarray
    rank_high: np.ndarray
    n_queries: int
    n_units: int
    n_permutations: int
    seed: int
    confidence: float


def randomized_tukey_hsd(
    values: ArrayLike,
    models: Sequence[str],
    *,
    n_permutations: int = 10_000,
    seed: int = 42,
    confidence: float = 0.95,
    groups: ArrayLike | None = None,
) -> TukeyHSD:
    """Randomized Tukey HSD of the columns of ``values`` (queries x models), named ``models``.

    Higher values are better (the letters and ranks put the highest mean first).
    """
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 2:
        raise ValueError(f"values must be (n_queries >= 1, n_models >= 2); got shape {matrix.shape}")
    if len(models) != matrix.shape[1] or len(set(models)) != len(models):
        raise ValueError(f"models must name each of the {matrix.shape[1]} columns once; got {list(models)}")
    if not np.isfinite(matrix).all():
        raise ValueError("values must be finite")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1; got {n_permutations}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence}")
    units = resampling_units(matrix, groups)
    n_queries, n_models = units.n_queries, matrix.shape[1]
    means = np.array([math.fsum(units.sums[:, j]) for j in range(n_models)]) / n_queries
    ranges = np.sort(_permuted_ranges(units, n_permutations=n_permutations, seed=seed) / n_queries)

    differences = means[None, :] - means[:, None]
    observed = np.abs(differences)
    threshold = observed - 100.0 * _EPS * observed
    as_extreme = n_permutations - np.searchsorted(ranges, threshold.ravel(), side="left").reshape(observed.shape)
    p_values = (as_extreme + 1.0) / (n_permutations + 1.0)
    np.fill_diagonal(p_values, 1.0)
    mc_errors = np.sqrt(p_values * (1.0 - p_values) / n_permutations)
    rank = min(n_permutations, math.ceil((n_permutations + 1) * confidence - 1e-9))
    significant = p_values <= 1.0 - confidence
    np.fill_diagonal(significant, False)

    order = sorted(range(n_models), key=lambda j: (-means[j], j))
    pairs = [(models[i], models[j]) for i, j in zip(*np.nonzero(np.triu(significant)), strict=True)]
    letters = compact_letter_display([models[j] for j in order], pairs)
    better = (significant & (differences > 0)).sum(axis=1)  # models j significantly above i
    worse = (significant & (differences < 0)).sum(axis=1)
    return TukeyHSD(
        models=tuple(models),
        means=means,
        differences=differences,
        p_values=p_values,
        p_value_mc_errors=mc_errors,
        critical_range=float(ranges[rank - 1]),
        significant=significant,
        letters=letters,
        rank_low=1 + better,
        rank_high=n_models - worse,
        n_queries=n_queries,
        n_units=units.n_units,
        n_permutations=n_permutations,
        seed=seed,
        confidence=confidence,
    )


def _permuted_ranges(units: ResamplingUnits, *, n_permutations: int, seed: int) -> np.ndarray:
    """(B,) range of the permuted model totals: max minus min over models of sum_u U[u, pi_u(j)]."""
    n_units, n_models = units.sums.shape
    rng = np.random.default_rng(seed)
    draw = _draw_from_table(units.sums) if n_models <= TABLE_MODELS else _draw_by_sorting(units.sums)
    ranges = np.empty(n_permutations)
    rows_per_chunk = rows_per_block(n_units * n_models, n_permutations)
    for start in range(0, n_permutations, rows_per_chunk):
        rows = min(rows_per_chunk, n_permutations - start)
        totals = draw(rng, rows)
        ranges[start : start + rows] = totals.max(axis=1) - totals.min(axis=1)
    return ranges


def _draw_from_table(sums: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
    """(rows, m) permuted totals, each unit's order one of the m! orders drawn uniformly."""
    n_units, n_models = sums.shape
    orders = np.array(list(itertools.permutations(range(n_models))))
    # tables[j][u * m! + c]: what model slot j holds on unit u under the c-th order.
    tables = [np.ascontiguousarray(sums[:, orders[:, j]]).ravel() for j in range(n_models)]
    offsets = np.arange(n_units, dtype=np.int64) * len(orders)

    def draw(rng: np.random.Generator, rows: int) -> np.ndarray:
        cells = rng.integers(0, len(orders), size=(rows, n_units), dtype=np.int64) + offsets
        return np.stack([table[cells].sum(axis=1) for table in tables], axis=1)

    return draw


def _draw_by_sorting(sums: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
    """(rows, m) permuted totals, each unit's order the argsort of m uniform keys."""

    def draw(rng: np.random.Generator, rows: int) -> np.ndarray:
        shuffled = np.argsort(rng.random((rows, *sums.shape)), axis=2)
        return np.take_along_axis(np.broadcast_to(sums, shuffled.shape), shuffled, axis=2).sum(axis=1)

    return draw
