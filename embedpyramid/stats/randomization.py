"""Paired randomization (sign-flip) test of the mean per-query delta.

Under the null hypothesis that models A and B are exchangeable on every query, each delta
``d_i = value_b(i) - value_a(i)`` is as likely to have the opposite sign, so the observed mean
``t = (1/n) sum_i d_i`` is compared with the sign-flipped means
``T(s) = (1/n) sum_i s_i d_i``, ``s_i`` in {-1, +1} (Fisher 1935; Smucker, Allan & Carterette
2007 for IR). With ``groups``, a whole group shares one sign (a cluster randomization test).
All metric columns use the same sign patterns.

Two-sided p-value, with ``gamma = 100 * eps * |t|`` absorbing floating-point noise between
theoretically equal statistics (the tolerance ``scipy.stats.permutation_test`` uses):

* exact, when the ``2^U`` sign patterns of the ``U`` units number at most ``n_permutations``:
  every pattern is enumerated and ``p = #{s : |T(s)| >= |t| - gamma} / 2^U``. The enumerated
  null is symmetric (``T(-s) = -T(s)``), so this equals scipy's exact two-sided p-value
  ``2 * min(P(T <= t), P(T >= t))`` (capped at 1) with ``permutation_type="samples"``;
* randomized otherwise: ``B = n_permutations`` patterns are drawn uniformly and
  ``p = (1 + #{b : |T_b| >= |t| - gamma}) / (B + 1)``, counting the observed pattern among the
  draws so that p is never 0 (Phipson & Smyth 2010). scipy's randomized mode instead doubles
  the smaller one-sided estimate, ``2 * min(1 + #{T_b <= t}, 1 + #{T_b >= t}) / (B + 1)``; both
  estimate the same quantity for this symmetric null, scipy's never falls below ``2 / (B + 1)``.

The Monte-Carlo error of a randomized p-value is its binomial standard error
``sqrt(p (1 - p) / B)`` (0 for an exact one). Random sign patterns come from 64-bit draws, one
bit per unit, so the patterns do not depend on how they are blocked.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.units import delta_matrix, resampling_units, rows_per_block, single_blas_thread


def sign_patterns(
    n_units: int, *, n_permutations: int, seed: int
) -> tuple[Iterator[np.ndarray], bool]:
    """Sign patterns as float64 (rows, n_units) chunks of +-1, and whether they are exhaustive.

    Exhaustive (all ``2^n_units`` patterns, in binary order) when that many are at most
    ``n_permutations``; otherwise ``n_permutations`` patterns drawn with
    ``np.random.default_rng(seed)``.
    """
    if 2**n_units <= n_permutations:
        return _all_sign_chunks(n_units), True
    return _random_sign_chunks(n_units, n_permutations=n_permutations, seed=seed), False


def paired_sign_flip_test(
    deltas: ArrayLike,
    *,
    n_permutations: int = 10_000,
    seed: int = 42,
    groups: ArrayLike | None = None,
) -> np.ndarray:
    """Two-sided sign-flip p-value of the mean delta, per metric column.

    ``deltas`` is (n_queries,) or (n_queries, n_metrics); the result has shape
    ``deltas.shape[1:]``. ``groups`` (one label per query) flips whole groups. See the module
    docstring for the exact and randomized p-value formulas.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be at least 1; got {n_permutations}")
    matrix, output_shape = delta_matrix(deltas)
    units = resampling_units(matrix, groups)
    n_queries = units.n_queries
    observed = np.abs(units.sums.sum(axis=0) / n_queries)
    threshold = observed - 100.0 * np.finfo(np.float64).eps * observed

    patterns, exhaustive = sign_patterns(units.n_units, n_permutations=n_permutations, seed=seed)
    as_extreme = np.zeros(matrix.shape[1], dtype=np.int64)
    n_patterns = 0
    with single_blas_thread():
        for signs in patterns:
            flipped = np.abs(signs @ units.sums / n_queries)
            as_extreme += np.count_nonzero(flipped >= threshold, axis=0)
            n_patterns += signs.shape[0]

    if exhaustive:
        pvalues = as_extreme / n_patterns
    else:
        pvalues = (as_extreme + 1) / (n_patterns + 1)
    return pvalues.reshape(output_shape)


def sign_flip_mc_error(
    pvalues: ArrayLike, *, n_units: int, n_permutations: int
) -> np.ndarray:
    """Monte-Carlo standard error ``sqrt(p (1 - p) / B)`` of sign-flip p-values over ``n_units``
    units; 0 where the patterns were enumerated exactly (``2^n_units <= n_permutations``)."""
    p = np.asarray(pvalues, dtype=np.float64)
    if 2**n_units <= n_permutations:
        return np.zeros_like(p)
    return np.sqrt(p * (1.0 - p) / n_permutations)


def _all_sign_chunks(n_units: int) -> Iterator[np.ndarray]:
    rows_per_chunk = rows_per_block(n_units, 2**n_units)
    shifts = np.arange(n_units, dtype=np.int64)
    n_patterns = 2**n_units
    for start in range(0, n_patterns, rows_per_chunk):
        codes = np.arange(start, min(start + rows_per_chunk, n_patterns), dtype=np.int64)
        yield 1.0 - 2.0 * ((codes[:, None] >> shifts) & 1)


def _random_sign_chunks(n_units: int, *, n_permutations: int, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    words = -(-n_units // 64)
    rows_per_chunk = rows_per_block(n_units, n_permutations)
    for start in range(0, n_permutations, rows_per_chunk):
        rows = min(rows_per_chunk, n_permutations - start)
        raw = rng.integers(0, 2**64, size=(rows, words), dtype=np.uint64, endpoint=False)
        bits = np.unpackbits(raw.astype("<u8").view(np.uint8), axis=1, count=n_units, bitorder="little")
        yield 1.0 - 2.0 * bits
