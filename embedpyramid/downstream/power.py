"""Simulation-based power: how many queries a paired comparison of two models needs to detect a
chosen difference in mean grade.

The observed variability comes from the paired per-query differences ``d_q = g_b(q) - g_a(q)``
of every pair of models (per criterion, and for the mean grade over the criteria), each pair's
differences centred on its own mean and pooled. A simulated study of n queries draws n centred
differences from that pool with replacement and adds the chosen difference ``delta``; it is a
success when the two-sided paired t test rejects at ``alpha`` (``|t| > t_{1-alpha/2, n-1}``,
``t = mean / (sd / sqrt n)``; a study whose differences are all equal has no t and does not
reject) — what the pairwise Wald contrast of the identity-link model
amounts to for one pair. Power at n is the share of successes over ``n_simulations`` studies,
drawn from a generator seeded with ``(seed, n)`` so every point is reproducible on its own.

The smallest n with power >= target is found by doubling from n = 2 and then bisecting
(power grows with n). For normal differences with standard deviation sigma the answer is the
non-central t solution, close to ``((z_{1-alpha/2} + z_{target}) sigma / delta)^2`` (reported
beside it as ``normal_approximation``); the pool keeps the real, discrete, skewed shape of
grade differences instead.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from embedpyramid.downstream.design import GradeDesign

MEAN_OVER_CRITERIA = "mean"
_CELLS_PER_CHUNK = 2_000_000


@dataclass(frozen=True)
class PowerAnalysis:
    criterion: str
    difference: float
    alpha: float
    target: float
    sd_difference: float
    n_required: int | None
    normal_approximation: int | None
    curve: tuple[tuple[int, float], ...]
    n_simulations: int
    seed: int
    note: str = ""


def centred_differences(design: GradeDesign) -> dict[str, np.ndarray]:
    """Per criterion and for the mean over criteria: the pooled, pair-centred paired differences."""
    grades = np.full((len(design.models), len(design.query_ids), len(design.criteria)), np.nan)
    grades[design.model_codes, design.query_codes, design.criterion_codes] = design.grades
    pools: dict[str, list[np.ndarray]] = {c: [] for c in (*design.criteria, MEAN_OVER_CRITERIA)}
    for a, b in itertools.combinations(range(len(design.models)), 2):
        differences = grades[b] - grades[a]
        for index, criterion in enumerate(design.criteria):
            pools[criterion].append(differences[:, index] - differences[:, index].mean())
        mean_difference = differences.mean(axis=1)
        pools[MEAN_OVER_CRITERIA].append(mean_difference - mean_difference.mean())
    return {criterion: np.concatenate(parts) for criterion, parts in pools.items()}


def simulated_power(pool: np.ndarray, difference: float, n: int, alpha: float, n_simulations: int, seed: int) -> float:
    """Share of ``n_simulations`` simulated studies of ``n`` queries whose paired t test rejects."""
    if n < 2:
        raise ValueError(f"a paired t test needs at least 2 queries; got n={n}")
    rng = np.random.default_rng([seed, n])
    centred = pool - pool.mean()
    critical = stats.t.ppf(1 - alpha / 2, n - 1)
    rejections = 0
    chunk = max(1, _CELLS_PER_CHUNK // n)
    for start in range(0, n_simulations, chunk):
        draws = centred[rng.integers(0, centred.size, size=(min(chunk, n_simulations - start), n))] + difference
        mean, sd = draws.mean(axis=1), draws.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mean / (sd / math.sqrt(n))
        # n identical differences leave t undefined (sd = 0): no evidence, no rejection. With
        # discrete grades this is common at small n and would otherwise pass for power.
        rejections += int(np.count_nonzero((sd > 0) & (np.abs(t) > critical)))
    return rejections / n_simulations


def queries_needed_simulated(
    pool: np.ndarray, difference: float, *, alpha: float, target: float, n_simulations: int, max_queries: int,
    seed: int,
) -> tuple[int | None, list[tuple[int, float]]]:
    """The smallest n (2 <= n <= max_queries) with simulated power >= target, or None, and the
    (n, power) points evaluated on the way, sorted by n. The closed form for normal deltas of a
    known sd is :func:`embedpyramid.stats.power.queries_needed`."""
    curve: dict[int, float] = {}

    def power(n: int) -> float:
        if n not in curve:
            curve[n] = simulated_power(pool, difference, n, alpha, n_simulations, seed)
        return curve[n]

    low, high = 1, 2
    while power(high) < target:
        if high >= max_queries:
            return None, sorted(curve.items())
        low, high = high, min(2 * high, max_queries)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if power(middle) >= target else (middle, high)
    return high, sorted(curve.items())


def normal_approximation(sd: float, difference: float, alpha: float, target: float) -> int | None:
    if not sd > 0:
        return None
    return max(2, math.ceil(((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(target)) * sd / difference) ** 2))


def power_analysis(design: GradeDesign, *, difference: float, alpha: float, target: float, n_simulations: int,
                   max_queries: int, seed: int) -> list[PowerAnalysis]:
    """One analysis per criterion and for the mean grade over the criteria."""
    results = []
    for criterion, pool in centred_differences(design).items():
        sd = float(pool.std(ddof=1)) if pool.size > 1 else 0.0
        n_required, curve = queries_needed_simulated(pool, difference, alpha=alpha, target=target,
                                                     n_simulations=n_simulations, max_queries=max_queries, seed=seed)
        note = "" if n_required is not None else f"power stays below {target} up to {max_queries} queries"
        if sd == 0.0:
            note = "every observed paired difference is the same: no variance to simulate from"
        results.append(PowerAnalysis(criterion, difference, alpha, target, sd, n_required,
                                     normal_approximation(sd, difference, alpha, target), tuple(curve),
                                     n_simulations, seed, note))
    return results
