"""Agreement between two rankings of the same models: Kendall's τ_b, Spearman's ρ, the order of
every pair of models, and whether the two rankings have the same winner.

Every function takes scores of shape ``(..., m)`` — one row per resample, ``m`` models in the
same column order on both sides — and works on the *pairwise orders*
``s_ij = sign(x_i − x_j)``, with ``|x_i − x_j| <= tie_epsilon`` counted as a tie (``s_ij = 0``),
as in the paired comparisons' win/tie/loss. Higher scores are better (every measure here is).

* Kendall's τ_b (Kendall 1945; Agresti, *Analysis of Ordinal Categorical Data*, §7.1.3)::

      τ_b = (n_c − n_d) / sqrt((n_0 − n_1)(n_0 − n_2))
          = Σ_{i<j} s^x_ij s^y_ij / sqrt(Σ_{i<j} (s^x_ij)² · Σ_{i<j} (s^y_ij)²)

  with ``n_0 = m(m−1)/2`` pairs, ``n_1``, ``n_2`` the pairs tied in x, in y. Undefined (NaN)
  when either ranking ties every pair. Equal to ``scipy.stats.kendalltau`` (variant b) when
  ``tie_epsilon = 0``.
* Spearman's ρ: Pearson's r of the mid-ranks (tied models share the mean of their ranks; rank 1
  is the best), ``rank_i = 1 + #{j: x_j > x_i} + (#{j: x_j tied with x_i} − 1) / 2``. Undefined
  when either ranking ties every model. Equal to ``scipy.stats.spearmanr`` when ``tie_epsilon = 0``.
* Pairwise agreement: the share of model pairs whose order (better, worse or tied) is the same in
  both rankings; a *flip* is a pair ordered strictly oppositely.
* Same winner: the probability that a model drawn uniformly from x's top set (the models tied
  with the best) is the one drawn from y's top set, ``|T_x ∩ T_y| / (|T_x| |T_y|)``: 1 or 0
  without ties at the top.

With two models τ_b and ρ are ±1 by construction (or undefined): a rank correlation needs at
least :data:`MIN_MODELS_FOR_CORRELATION` models to say anything, below that only the pairwise
agreement is reported.
"""

from __future__ import annotations

import numpy as np

MIN_MODELS_FOR_CORRELATION = 3


def pairwise_orders(scores: np.ndarray, tie_epsilon: float = 0.0) -> np.ndarray:
    """``(..., m, m)`` int8 matrix of ``sign(x_i − x_j)``, zero when ``|x_i − x_j| <= tie_epsilon``."""
    values = np.asarray(scores, dtype=np.float64)
    difference = values[..., :, None] - values[..., None, :]
    orders = np.sign(difference).astype(np.int8)
    orders[np.abs(difference) <= tie_epsilon] = 0
    return orders


def _upper(orders: np.ndarray) -> np.ndarray:
    m = orders.shape[-1]
    rows, columns = np.triu_indices(m, k=1)
    return orders[..., rows, columns].astype(np.float64)


def kendall_tau_b(orders_x: np.ndarray, orders_y: np.ndarray) -> np.ndarray:
    """τ_b per leading index from two pairwise-order arrays; NaN where a ranking is all tied."""
    x, y = _upper(orders_x), _upper(orders_y)
    denominator = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (x * y).sum(axis=-1) / np.where(denominator > 0, denominator, 1.0), np.nan)


def mid_ranks(orders: np.ndarray) -> np.ndarray:
    """``(..., m)`` mid-ranks, 1 = best, tied models sharing the mean of their ranks."""
    worse_than = (orders < 0).sum(axis=-1)
    tied_with = (orders == 0).sum(axis=-1) - 1
    return 1.0 + worse_than + tied_with / 2.0


def spearman_rho(orders_x: np.ndarray, orders_y: np.ndarray) -> np.ndarray:
    """Spearman's ρ per leading index (Pearson's r of the mid-ranks); NaN where a ranking is all tied."""
    rx, ry = mid_ranks(orders_x), mid_ranks(orders_y)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(axis=-1) / np.where(denominator > 0, denominator, 1.0), np.nan)


def pairwise_agreement(orders_x: np.ndarray, orders_y: np.ndarray) -> np.ndarray:
    """Share of model pairs ordered the same way (ties included) in both rankings."""
    return (_upper(orders_x) == _upper(orders_y)).mean(axis=-1)


def top_sets(scores: np.ndarray, tie_epsilon: float = 0.0) -> np.ndarray:
    """``(..., m)`` booleans: the models within ``tie_epsilon`` of the best score."""
    values = np.asarray(scores, dtype=np.float64)
    return values >= values.max(axis=-1, keepdims=True) - tie_epsilon


def same_winner(scores_x: np.ndarray, scores_y: np.ndarray, tie_epsilon: float = 0.0) -> np.ndarray:
    """Probability that uniform picks from the two top sets are the same model."""
    top_x, top_y = top_sets(scores_x, tie_epsilon), top_sets(scores_y, tie_epsilon)
    return (top_x & top_y).sum(axis=-1) / (top_x.sum(axis=-1) * top_y.sum(axis=-1))
