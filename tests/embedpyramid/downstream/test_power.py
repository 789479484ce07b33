import numpy as np
import pytest
from scipy import stats
from simulated_grades import simulated_grades

from embedpyramid.downstream.design import grade_design, grade_table
from embedpyramid.downstream.power import (
    centred_differences,
    normal_approximation,
    power_analysis,
    queries_needed_simulated,
    simulated_power,
)

# Differences that are exactly standard normal in mean and spread: delta = 0.5 sigma.
POOL = stats.norm.ppf((np.arange(20_000) + 0.5) / 20_000)
POOL = (POOL - POOL.mean()) / POOL.std(ddof=1)


def closed_form_power(n, delta=0.5, alpha=0.05):
    """Power of the two-sided paired t test for normal differences (non-central t)."""
    critical = stats.t.ppf(1 - alpha / 2, n - 1)
    noncentral = stats.nct(n - 1, delta * np.sqrt(n))
    return noncentral.sf(critical) + noncentral.cdf(-critical)


def test_simulated_power_matches_the_noncentral_t_for_normal_differences():
    closed_form_n = next(n for n in range(2, 200) if closed_form_power(n) >= 0.8)
    assert closed_form_n == 34
    for n in (10, 34):
        simulated = simulated_power(POOL, 0.5, n, 0.05, 4000, seed=1)
        expected = closed_form_power(n)
        assert abs(simulated - expected) < 3 * np.sqrt(expected * (1 - expected) / 4000)
    n_required, curve = queries_needed_simulated(POOL, 0.5, alpha=0.05, target=0.8, n_simulations=4000,
                                                 max_queries=1000, seed=1)
    assert abs(n_required - closed_form_n) <= 2
    evaluated = dict(curve)
    assert {2, 4, 8, 16, 32, 64} <= set(evaluated) and evaluated[n_required] >= 0.8 > evaluated[n_required - 1]
    assert normal_approximation(1.0, 0.5, 0.05, 0.8) == 32  # ((1.96 + 0.8416) / 0.5)^2 = 31.4


def test_power_is_seeded_and_capped_by_max_queries():
    assert simulated_power(POOL, 0.2, 50, 0.05, 500, seed=3) == simulated_power(POOL, 0.2, 50, 0.05, 500, seed=3)
    n_required, curve = queries_needed_simulated(POOL, 0.1, alpha=0.05, target=0.8, n_simulations=500, max_queries=40,
                                                 seed=3)
    assert n_required is None and curve[-1][0] == 40
    with pytest.raises(ValueError, match="at least 2"):
        simulated_power(POOL, 0.5, 1, 0.05, 10, seed=0)


def test_the_pool_holds_every_pairs_centred_differences_and_the_analysis_covers_each_criterion():
    design = grade_design(grade_table(simulated_grades(2, (0.0, 0.5, 0.2), n_queries=30, query_sd=0.5)),
                          ["m0", "m1", "m2"], interaction=False)
    pools = centred_differences(design)
    assert set(pools) == {"relevance", "ranking", "coverage", "mean"}
    assert all(pool.size == 3 * 30 and abs(pool.mean()) < 1e-12 for pool in pools.values())
    results = power_analysis(design, difference=0.5, alpha=0.05, target=0.8, n_simulations=500, max_queries=2000, seed=5)
    assert [r.criterion for r in results] == ["relevance", "ranking", "coverage", "mean"]
    for result in results:
        assert result.n_required is not None and result.seed == 5
        # the simulation and the normal approximation agree roughly (the pool is discrete)
        assert 0.6 * result.normal_approximation <= result.n_required <= 1.6 * result.normal_approximation + 3


def test_studies_with_identical_differences_do_not_count_as_rejections():
    # Binary-like grades: most paired differences are 0. Two draws of 0 (shifted by delta) have
    # sd = 0 and no t; counting them as rejections would make n = 2 look powerful.
    pool = np.array([0.0] * 90 + [4.0] * 5 + [-4.0] * 5)
    assert simulated_power(pool, 0.25, 2, 0.05, 2000, seed=0) < 0.05
    n_required, _ = queries_needed_simulated(pool, 0.25, alpha=0.05, target=0.8, n_simulations=2000, max_queries=5000,
                                             seed=0)
    expected = normal_approximation(pool.std(ddof=1), 0.25, 0.05, 0.8)
    assert 0.8 * expected <= n_required <= 1.25 * expected
