"""Multiple-testing adjustments: Holm's step-down (family-wise error) and Benjamini–Hochberg's
step-up (false discovery rate).

Sort the ``m`` p-values ascending, ``p_(1) <= ... <= p_(m)``:

* Holm (1979): ``p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))``. Rejecting where
  ``p~ <= alpha`` controls the family-wise error rate at ``alpha`` under any dependence between
  the tests — the guarantee the confirmatory family needs.
* Benjamini & Hochberg (1995): ``p~_(i) = min(1, min_{j >= i} m p_(j) / j)``. Rejecting where
  ``p~ <= q`` keeps the expected share of false discoveries among the rejections at most ``q``
  for independent or positively dependent (PRDS, Benjamini & Yekutieli 2001) tests, as the
  metrics and slices of one comparison are: the exploratory family's adjustment, which does
  not shrink every test's power as the family grows.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def holm_adjust(pvalues: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values, in the input order (monotone in the raw p-values, capped at 1)."""
    raw = _pvalues(pvalues)
    m = raw.shape[0]
    order = np.argsort(raw, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * raw[order])
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def benjamini_hochberg_adjust(pvalues: ArrayLike) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values), in the input order, capped at 1."""
    raw = _pvalues(pvalues)
    m = raw.shape[0]
    order = np.argsort(raw, kind="stable")
    scaled = raw[order] * m / np.arange(1, m + 1)
    stepped = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def _pvalues(pvalues: ArrayLike) -> np.ndarray:
    raw = np.asarray(pvalues, dtype=np.float64)
    if raw.ndim != 1:
        raise ValueError(f"pvalues must be 1-D; got shape {raw.shape}")
    if not ((raw >= 0.0) & (raw <= 1.0)).all():
        raise ValueError("pvalues must lie in [0, 1] (NaN is not a p-value)")
    return raw
