"""What a resampling setting must allow: the order-statistic rank of a bootstrap interval's
ends. The settings that ask for an interval (comparison, transfer) are refused at load when
their resamples cannot bound it; the bootstrap reads the same rank to cut its intervals."""

import math


def percentile_rank(n_resamples: int, confidence: float) -> int:
    """Order-statistic rank ``k = floor((B + 1)(1 - confidence) / 2)`` of the interval ends.

    Raises when ``k < 1``: so few resamples cannot bound a ``confidence`` interval.
    """
    k = math.floor((n_resamples + 1) * (1.0 - confidence) / 2.0 + 1e-9)
    if k < 1:
        needed = math.ceil(2.0 / (1.0 - confidence) - 1.0 - 1e-9)
        raise ValueError(
            f"n_resamples={n_resamples} is too few for a {confidence:.0%} interval; "
            f"use at least {needed}"
        )
    return k
