import numpy as np
import pytest
from scipy.stats import false_discovery_control

from embedpyramid.stats import benjamini_hochberg_adjust, holm_adjust


def test_holm_hand_worked_example():
    # Sorted: 0.005 x4 = 0.02; 0.01 x3 = 0.03; 0.03 x2 = 0.06; 0.04 x1 = 0.04 -> max(0.06, 0.04).
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15)


def test_holm_caps_at_one_and_keeps_ties_together():
    np.testing.assert_array_equal(holm_adjust([0.5, 0.6]), [1.0, 1.0])
    np.testing.assert_allclose(holm_adjust([0.02, 0.02, 0.9]), [0.06, 0.06, 0.9])


def test_holm_single_and_empty_families():
    np.testing.assert_array_equal(holm_adjust([0.2]), [0.2])
    assert holm_adjust([]).shape == (0,)


def test_holm_is_monotone_in_the_raw_p_values():
    raw = np.random.default_rng(0).uniform(size=200) ** 3
    adjusted = holm_adjust(raw)
    order = np.argsort(raw)
    assert (np.diff(adjusted[order]) >= 0).all()
    assert (adjusted >= raw).all()


@pytest.mark.parametrize("bad", [[0.1, np.nan], [1.2], [-0.1], [[0.1]]])
def test_holm_rejects_values_that_are_not_p_values(bad):
    with pytest.raises(ValueError):
        holm_adjust(bad)


def test_benjamini_hochberg_hand_worked_example():
    # Sorted 0.005, 0.01, 0.03, 0.04 (m = 4): x4/1 = 0.02, x4/2 = 0.02, x4/3 = 0.04, x4/4 = 0.04;
    # step-up minima from the top leave them as they are.
    adjusted = benjamini_hochberg_adjust([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.02, 0.04, 0.04, 0.02], rtol=0, atol=1e-15)
    # A large p-value cannot pull a smaller one above it: 0.04 x 3/2 = 0.06 > 0.05 x 3/3.
    np.testing.assert_allclose(benjamini_hochberg_adjust([0.01, 0.04, 0.05]), [0.03, 0.05, 0.05])


def test_benjamini_hochberg_matches_scipy_and_is_never_above_holm():
    raw = np.random.default_rng(1).uniform(size=300) ** 4
    np.testing.assert_allclose(benjamini_hochberg_adjust(raw), false_discovery_control(raw), rtol=1e-12)
    assert (benjamini_hochberg_adjust(raw) <= holm_adjust(raw) + 1e-15).all()
    assert benjamini_hochberg_adjust([]).shape == (0,)
    with pytest.raises(ValueError):
        benjamini_hochberg_adjust([0.1, np.nan])
