"""Student's t in plain Python against scipy, which the warm CLI start does not import."""

from __future__ import annotations

import pytest
from scipy import special, stats

from embedpyramid.stats.student_t import regularized_beta, t_cdf, t_quantile

DFS = [1, 2, 3, 5, 9, 29, 49, 99, 299, 999, 9_999, 1_000_000, 2.5]


@pytest.mark.parametrize("df", DFS)
def test_the_quantile_matches_scipy(df):
    for p in (0.5, 0.6, 0.9, 0.95, 0.975, 0.995, 0.9995, 0.025, 1e-6):
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("df", DFS)
def test_the_cdf_matches_scipy(df):
    for t in (-40.0, -3.0, -0.2, 0.0, 0.7, 1.96, 4.5, 60.0):
        assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), rel=1e-8, abs=1e-15)


def test_the_regularized_beta_matches_scipy_on_both_sides_of_the_switch():
    for a, b in [(0.5, 0.5), (2.0, 0.5), (30.0, 0.5), (4.0, 9.0)]:
        for x in (1e-9, 0.1, 0.5, (a + 1) / (a + b + 2), 0.9, 1 - 1e-9):
            assert regularized_beta(x, a, b) == pytest.approx(special.betainc(a, b, x), rel=1e-11, abs=1e-15)
    assert regularized_beta(0.0, 2.0, 3.0) == 0.0 and regularized_beta(1.0, 2.0, 3.0) == 1.0


def test_known_values_and_bad_arguments():
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736174707, rel=1e-13)  # tan(pi * 0.475)
    assert t_quantile(0.975, 2) == pytest.approx(4.302652729749464, rel=1e-13)  # 2 * 0.95 / sqrt(2 * (1 - 0.95**2))
    assert t_quantile(0.5, 7) == 0.0
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 5)
    with pytest.raises(ValueError, match="df > 0"):
        t_quantile(0.9, 0)
