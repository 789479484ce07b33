"""Power of the paired comparison: the minimum detectable effect at n queries, and the number of
queries needed to detect a given delta.

Both come from the two-sided paired t-test at level ``alpha`` with the deltas' standard
deviation ``sd`` taken as known: with ``n`` queries the test statistic follows a noncentral t
with ``n - 1`` degrees of freedom and noncentrality ``delta * sqrt(n) / sd``, so its power is
``P(T > t_crit) + P(T < -t_crit)``, ``t_crit = t_{1 - alpha/2, n-1}`` (Cohen 1988, ch. 2; for
IR test collections, Sakai 2016, "Topic set size design", Inf. Retr. J. 19). The minimum
detectable effect is the smallest ``delta`` with that power at least ``power``; the queries
needed, the smallest ``n`` with power at least ``power`` for a given ``delta``. The sign-flip
test used for the decisions has the same large-sample power, so these are its planning numbers
too.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

_LARGEST_N = 10**9


def paired_power(n: int, effect_size: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test with ``n`` queries at ``effect_size = delta / sd``."""
    if n < 2:
        raise ValueError(f"a paired t-test needs at least 2 queries; got n={n}")
    from scipy.stats import nct  # scipy is imported where used: a warm CLI start computes no statistics
    from scipy.stats import t as student_t

    df = n - 1
    critical = student_t.ppf(1.0 - alpha / 2.0, df)
    shift = abs(effect_size) * math.sqrt(n)
    # The far tail is negligible where scipy's noncentral t cdf underflows to NaN.
    far = float(np.nan_to_num(nct.cdf(-critical, df, shift), nan=0.0))
    return float(nct.sf(critical, df, shift)) + far


def minimum_detectable_effect(
    sd: ArrayLike, n: ArrayLike, *, alpha: float = 0.05, power: float = 0.8
) -> np.ndarray:
    """Smallest |delta| detected with probability ``power`` by ``n`` queries whose deltas have
    standard deviation ``sd`` (elementwise; NaN where ``n < 2`` or ``sd`` is NaN)."""
    _check(alpha, power)
    sds, counts = np.broadcast_arrays(np.asarray(sd, dtype=np.float64), np.asarray(n))
    factors = np.array([_standardized_effect(int(c), alpha, power) if c >= 2 else np.nan for c in counts.ravel()])
    return sds * factors.reshape(counts.shape)


def queries_needed(sd: float, delta: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Smallest number of queries whose paired test detects ``delta`` with probability ``power``
    when the deltas have standard deviation ``sd`` (closed form; the L6 grades, discrete and
    skewed, use :func:`embedpyramid.downstream.power.queries_needed_simulated` instead)."""
    _check(alpha, power)
    if not delta or not math.isfinite(sd) or sd < 0:
        raise ValueError(f"need a non-zero delta and a finite sd >= 0; got delta={delta}, sd={sd}")
    if sd == 0.0:
        return 2
    effect = abs(delta) / sd
    low, high = 2, 2
    while paired_power(high, effect, alpha=alpha) < power:
        if high >= _LARGEST_N:
            return _LARGEST_N
        low, high = high, min(high * 2, _LARGEST_N)
    while low < high:
        middle = (low + high) // 2
        if paired_power(middle, effect, alpha=alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return high


@lru_cache(maxsize=4096)
def _standardized_effect(n: int, alpha: float, power: float) -> float:
    """The minimum detectable ``delta / sd`` at ``n`` queries."""
    from scipy.optimize import brentq

    upper = 1.0
    while paired_power(n, upper, alpha=alpha) < power:
        upper *= 2.0
    return float(brentq(lambda effect: paired_power(n, effect, alpha=alpha) - power, 0.0, upper, xtol=1e-10))


def _check(alpha: float, power: float) -> None:
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must lie strictly between 0 and 1; got {alpha}, {power}")
