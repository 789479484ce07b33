import numpy as np
import pytest
from scipy import stats

from embedpyramid.stats import cohens_dz, paired_sign_flip_test, paired_t_test


def test_matches_scipy_per_metric_column():
    values_a = np.random.default_rng(0).uniform(size=(25, 3))
    values_b = np.clip(values_a + np.random.default_rng(1).normal(0.05, 0.2, size=(25, 3)), 0, 1)
    result = paired_t_test(values_b - values_a)
    expected = stats.ttest_rel(values_b, values_a)
    np.testing.assert_allclose(result.statistic, expected.statistic, rtol=1e-12)
    np.testing.assert_allclose(result.p_value, expected.pvalue, rtol=1e-12)
    assert result.df == 24


def test_sparse_deltas_make_the_two_tests_disagree():
    # 3 of 20 queries gain 1, the rest are unchanged: the t-test leans on a tiny sd, the exact
    # sign-flip test only counts the 2^3 sign patterns of the non-zero deltas.
    deltas = np.zeros(20)
    deltas[:3] = 1.0
    assert float(paired_t_test(deltas).p_value) == pytest.approx(0.0828, abs=1e-4)
    assert float(paired_sign_flip_test(deltas, n_permutations=2**20)) == 0.25


def test_cluster_robust_standard_error_hand_computed():
    # Groups {1, 1} and {3}, {-1}: S = (2, 3, -1), n = (2, 1, 1), mean = 4/4 = 1;
    # S - mean n = (0, 2, -2); se^2 = 3/2 * 8 / 16 = 0.75; t = 1 / sqrt(0.75) on 2 df.
    result = paired_t_test([1.0, 1.0, 3.0, -1.0], groups=["a", "a", "b", "c"])
    assert float(result.statistic) == pytest.approx(1 / np.sqrt(0.75), rel=1e-14)
    assert float(result.p_value) == pytest.approx(2 * stats.t.sf(1 / np.sqrt(0.75), 2), rel=1e-12)
    assert result.df == 2


def test_degenerate_cases():
    assert float(paired_t_test(np.zeros(5)).p_value) == 1.0
    shifted = paired_t_test(np.full(5, 0.1))
    assert (float(shifted.statistic), float(shifted.p_value)) == (np.inf, 0.0)
    assert np.isnan(paired_t_test([0.3]).p_value)


def test_cohens_dz_is_mean_over_sd_with_stated_edge_cases():
    deltas = np.array([[0.5, 0.0], [0.25, 0.0], [0.0, 0.0], [0.25, 0.0]])
    np.testing.assert_allclose(cohens_dz(deltas), [0.25 / np.std([0.5, 0.25, 0.0, 0.25], ddof=1), 0.0])
    assert float(cohens_dz(np.full(4, -0.2))) == -np.inf
    assert np.isnan(cohens_dz([0.4]))
