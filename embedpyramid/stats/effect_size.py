"""Cohen's d_z: the standardized mean of paired deltas.

``d_z = mean(d) / sd(d)`` with ``sd`` the sample standard deviation (``n - 1`` in the
denominator) of the per-query deltas ``d_i = value_b(i) - value_a(i)`` (Cohen 1988, §2.3.5;
Lakens 2013, "Calculating and reporting effect sizes", eq. 5). It is the paired t statistic
divided by ``sqrt(n)``: what the difference is worth in units of its own query-to-query
variability, independent of how many queries were scored. Conventions for the degenerate
cases: one query gives NaN (no spread to measure); deltas that are all equal give 0 when they
are 0 and ``+-inf`` otherwise (a shift with no variability).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.units import delta_matrix


def cohens_dz(deltas: ArrayLike) -> np.ndarray:
    """``mean / sd`` of the deltas per metric column, with shape ``deltas.shape[1:]``."""
    matrix, output_shape = delta_matrix(deltas)
    mean, sd = matrix.mean(axis=0), delta_sd(matrix)
    with np.errstate(divide="ignore", invalid="ignore"):
        effect = np.where(sd > 0.0, mean / sd, np.where(mean == 0.0, 0.0, np.copysign(np.inf, mean)))
    effect = np.where(np.isnan(sd), np.nan, effect)
    return effect.reshape(output_shape)


def delta_sd(matrix: np.ndarray) -> np.ndarray:
    """Sample standard deviation (ddof 1) of each column; exactly 0 for a constant column, NaN
    for a single row."""
    if matrix.shape[0] < 2:
        return np.full(matrix.shape[1], np.nan)
    constant = (matrix == matrix[0]).all(axis=0)
    return np.where(constant, 0.0, matrix.std(axis=0, ddof=1))
