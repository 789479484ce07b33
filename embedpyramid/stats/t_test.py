"""Paired t-test of the mean per-query delta, the parametric companion of the sign-flip test.

``t = mean(d) / se`` with ``se = sd(d) / sqrt(n)`` and ``n - 1`` degrees of freedom (Student
1908; ``scipy.stats.ttest_rel`` on the two models' values). With ``groups`` the standard error is
the cluster-robust one, ``se^2 = G/(G-1) * sum_g (S_g - mean n_g)^2 / N^2`` over ``G`` groups of
``n_g`` queries with delta sums ``S_g``, and ``G - 1`` degrees of freedom (Cameron & Miller 2015,
§II.C and §VI.C). Two-sided p-value ``2 * P(T_df >= |t|)``.

The two tests answer slightly different questions and disagree most on sparse deltas: the t-test
leans on the normality of the mean, the sign-flip test only on the symmetry of each delta under
the null. With a few non-zero deltas among many zeros the t statistic is inflated by the tiny
standard deviation, so the t-test reports a smaller p than the exact sign-flip test can
(e.g. 3 of 20 queries at +1, the rest 0: t-test p = 0.083, sign-flip p = 0.25). The report gives
both; the families adjust the sign-flip p-value.

Degenerate cases: fewer than two units give NaN; deltas with no spread give ``t = 0, p = 1``
when they are all 0 and ``t = +-inf, p = 0`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.units import delta_matrix, resampling_units


@dataclass(frozen=True, eq=False)
class TTestResult:
    """Per-metric t statistic, two-sided p-value and degrees of freedom (shape
    ``deltas.shape[1:]``; ``df`` is one number)."""

    statistic: np.ndarray
    p_value: np.ndarray
    df: int


def paired_t_test(deltas: ArrayLike, *, groups: ArrayLike | None = None) -> TTestResult:
    """Two-sided paired (or cluster-robust) t-test of mean delta = 0, per metric column."""
    matrix, output_shape = delta_matrix(deltas)
    units = resampling_units(matrix, groups)
    n_units, n_queries = units.n_units, units.n_queries
    df = n_units - 1
    if df < 1:
        nan = np.full(matrix.shape[1], np.nan).reshape(output_shape)
        return TTestResult(nan, nan.copy(), df)
    constant = (matrix == matrix[0]).all(axis=0)
    mean = np.where(constant, matrix[0], units.sums.sum(axis=0) / n_queries)
    centered = units.sums - mean * units.sizes[:, None]
    se = np.sqrt(n_units / df * (centered**2).sum(axis=0)) / n_queries
    flat = constant | (se == 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.where(flat, np.where(mean == 0.0, 0.0, np.copysign(np.inf, mean)), mean / se)
    from scipy.stats import t as student_t  # scipy is imported where used: a warm CLI start computes no statistics

    p_value = np.minimum(2.0 * student_t.sf(np.abs(statistic), df), 1.0)
    return TTestResult(statistic.reshape(output_shape), p_value.reshape(output_shape), df)
