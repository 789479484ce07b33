"""Coverage of the default interval on the three IR-shaped populations, by seeded simulation.

Each column of the (n, samples) matrix is an independent sample of one population of
``embedpyramid.stats.simulation`` (exact population mean); one call bootstraps them all (the
columns share the resampled indices, which leaves each column's interval a valid bootstrap
interval). At n = 20, the smallest n where the default must hold 93.5% in
``benchmarks/interval_coverage.py``, 2,000 samples give a coverage estimate with binomial
standard error ``sqrt(0.95 · 0.05 / 2000) = 0.0049``; the tolerance is three of them.
"""

import math

import numpy as np
import pytest

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats import paired_bootstrap
from embedpyramid.stats.simulation import ir_delta_populations

N_QUERIES, N_SAMPLES, NOMINAL = 20, 2_000, 0.95
TOLERANCE = 3.0 * math.sqrt(NOMINAL * (1.0 - NOMINAL) / N_SAMPLES)
POPULATIONS = {population.name: population for population in ir_delta_populations()}


def coverage(name: str, method: str, *, seed: int = 0) -> float:
    population = POPULATIONS[name]
    samples = population.sample(np.random.default_rng(seed), (N_QUERIES, N_SAMPLES))
    result = paired_bootstrap(samples, n_resamples=2_000, seed=seed + 1, method=method, bounds=population.bounds)
    return float(((result.ci_low <= population.mean) & (population.mean <= result.ci_high)).mean())


@pytest.mark.parametrize("name", list(POPULATIONS))
def test_the_default_interval_holds_its_level_on_ir_shaped_deltas_at_n_20(name):
    default = ComparisonSettings(baseline="a").interval
    assert default == "hybrid"
    assert coverage(name, default) == pytest.approx(NOMINAL, abs=TOLERANCE)


@pytest.mark.parametrize(
    ("name", "method"),
    [("zero-inflated nDCG@10", "studentized"), ("sparse ±1 (Hit@1)", "studentized"), ("skewed bounded (graded)", "t")],
)
def test_each_half_of_the_hybrid_alone_under_covers_where_the_other_takes_over(name, method):
    assert coverage(name, method) < NOMINAL - TOLERANCE


def test_the_populations_have_the_stated_shape_and_exact_mean():
    rng = np.random.default_rng(5)
    for population in POPULATIONS.values():
        draws = population.sample(rng, (400_000, 1))
        assert draws.mean() == pytest.approx(population.mean, abs=4.0 * draws.std() / math.sqrt(draws.size))
        assert (draws >= -1.0).all() and (draws <= 1.0).all()
    zero_share = {name: float((p.sample(rng, (400_000, 1)) == 0.0).mean()) for name, p in POPULATIONS.items()}
    assert zero_share["zero-inflated nDCG@10"] == pytest.approx(0.6035, abs=0.005)
    assert zero_share["sparse ±1 (Hit@1)"] == pytest.approx(0.75, abs=0.005)
    assert zero_share["skewed bounded (graded)"] == 0.0
