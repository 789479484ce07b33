import numpy as np
import pytest

from embedpyramid.stats import minimum_detectable_effect, paired_power, queries_needed


def test_textbook_sample_size_for_a_medium_effect():
    # Paired t-test, d = 0.5, alpha 0.05 two-sided, power 0.8: 34 pairs (Cohen 1988, table
    # 2.4.1 gives 33 for the normal approximation; the noncentral t needs one more).
    assert queries_needed(1.0, 0.5) == 34
    assert paired_power(34, 0.5) >= 0.8 > paired_power(33, 0.5)


def test_minimum_detectable_effect_inverts_the_power():
    mde = minimum_detectable_effect(0.3, 748)
    assert paired_power(748, float(mde) / 0.3) == pytest.approx(0.8, abs=1e-8)
    # It shrinks like 1 / sqrt(n), and needs at least two queries.
    larger = minimum_detectable_effect([0.3, 0.3, 0.3], [100, 400, 1])
    assert larger[0] / larger[1] == pytest.approx(2.0, rel=0.01)
    assert np.isnan(larger[2])


def test_queries_needed_agrees_with_the_minimum_detectable_effect():
    sd, delta = 0.31, 0.02
    n = queries_needed(sd, delta)
    assert float(minimum_detectable_effect(sd, n)) <= delta < float(minimum_detectable_effect(sd, n - 1))
    assert queries_needed(0.0, 0.01) == 2
    with pytest.raises(ValueError, match="non-zero delta"):
        queries_needed(0.3, 0.0)
