"""IR-shaped populations of per-query deltas, for simulating the coverage of an interval.

Each population is a generative model of two systems' per-query values, and its mean delta is
exact (enumerated or in closed form), so a simulated interval's coverage is read against the
truth. ``benchmarks/interval_coverage.py`` runs them at n = 10 to 1,000 to choose the default
interval; ``tests/embedpyramid/stats/test_coverage.py`` checks that choice at one small n.

* ``zero-inflated nDCG@10``: one relevant document per query. On half the queries the two
  systems return the same ranking (delta exactly 0); on the others each system places the
  relevant document at rank ``r`` independently, ``P(r) = p (1 - p)^(r-1)`` for r = 1..10 and
  missed (nDCG 0) with the rest, p = 0.3 for A and 0.4 for B; nDCG@10 = 1 / log2(r + 1). Queries
  where both find it at the same rank tie too: 60% of the deltas are 0, the others take 106
  discrete values in [-1, 1]; mean 0.0402.
* ``sparse ±1 (Hit@1)``: a binary metric of two systems that agree on three queries in four —
  both right 45%, both wrong 30%, only B right 15%, only A right 10%: deltas -1, 0, +1 with
  probabilities 0.10, 0.75, 0.15; mean 0.05.
* ``skewed bounded (graded)``: a continuous metric in [0, 1], A ~ Beta(2, 5); B fixes one query
  in five, ``B = A + (1 - A) W`` with W ~ Beta(2, 2), and loses a little on the others,
  ``B = A (1 - V)`` with V ~ Beta(1, 9): deltas in [-1, 1], skewness 2.1, mean
  0.2 · 5/7 · 1/2 − 0.8 · 2/7 · 1/10 = 17/350.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


@dataclass(frozen=True)
class DeltaPopulation:
    """A named population of per-query deltas: ``sample(rng, (n, samples))`` draws ``samples``
    independent samples of ``n`` deltas as columns; ``mean`` is the exact population mean and
    ``bounds`` the range a mean delta can take."""

    name: str
    sample: Sampler
    mean: float
    bounds: tuple[float, float] | None


def _rank_gains(p: float) -> tuple[np.ndarray, np.ndarray]:
    """nDCG@10 of one relevant document at ranks 1..10 and missed, and their probabilities."""
    ranks = np.arange(1, 11)
    probabilities = np.append(p * (1.0 - p) ** (ranks - 1), (1.0 - p) ** 10)
    return np.append(1.0 / np.log2(ranks + 1.0), 0.0), probabilities


def _zero_inflated_ndcg(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    gains, p_a = _rank_gains(0.3)
    _, p_b = _rank_gains(0.4)
    value_a = rng.choice(gains, size=shape, p=p_a)
    value_b = rng.choice(gains, size=shape, p=p_b)
    same_ranking = rng.random(shape) < 0.5
    return np.where(same_ranking, 0.0, value_b - value_a)


def _zero_inflated_ndcg_mean() -> float:
    gains, p_a = _rank_gains(0.3)
    _, p_b = _rank_gains(0.4)
    return 0.5 * float(gains @ p_b - gains @ p_a)


def _sparse_hit(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.choice(np.array([-1.0, 0.0, 1.0]), size=shape, p=[0.10, 0.75, 0.15])


def _skewed_bounded(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    value_a = rng.beta(2.0, 5.0, shape)
    fixed = rng.random(shape) < 0.2
    improved = value_a + (1.0 - value_a) * rng.beta(2.0, 2.0, shape)
    worsened = value_a * (1.0 - rng.beta(1.0, 9.0, shape))
    return np.where(fixed, improved, worsened) - value_a


def ir_delta_populations() -> list[DeltaPopulation]:
    """The three IR-shaped populations of the module docstring, in that order."""
    return [
        DeltaPopulation("zero-inflated nDCG@10", _zero_inflated_ndcg, _zero_inflated_ndcg_mean(), (-1.0, 1.0)),
        DeltaPopulation("sparse ±1 (Hit@1)", _sparse_hit, 0.05, (-1.0, 1.0)),
        DeltaPopulation("skewed bounded (graded)", _skewed_bounded, 17.0 / 350.0, (-1.0, 1.0)),
    ]
