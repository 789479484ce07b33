"""Holm's step-down adjustment of p-values for a family of tests.

Sort the ``m`` p-values ascending, ``p_(1) <= ... <= p_(m)``; the adjusted values are
``p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))`` (Holm 1979). Rejecting where
``p~ <= alpha`` controls the family-wise error rate at ``alpha`` under any dependence between
the tests, which matters here: the comparisons of one report share queries across metrics and
slices.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def holm_adjust(pvalues: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values, in the input order (monotone in the raw p-values, capped at 1)."""
    raw = np.asarray(pvalues, dtype=np.float64)
    if raw.ndim != 1:
        raise ValueError(f"pvalues must be 1-D; got shape {raw.shape}")
    if not ((raw >= 0.0) & (raw <= 1.0)).all():
        raise ValueError("pvalues must lie in [0, 1] (NaN is not a p-value)")
    m = raw.shape[0]
    order = np.argsort(raw, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * raw[order])
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted
