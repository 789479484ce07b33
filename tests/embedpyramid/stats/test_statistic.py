import numpy as np
import pytest
from scipy import stats

from embedpyramid.stats import paired_bootstrap, paired_statistic_bootstrap


def spearman(gold, score):
    return stats.spearmanr(gold, score).statistic


def test_a_model_against_itself_is_exactly_zero():
    rng = np.random.default_rng(0)
    gold, score = rng.random(40), rng.random(40)
    result = paired_statistic_bootstrap(spearman, (gold, score), (gold, score), n_resamples=200, seed=3)
    assert result.value_a == result.value_b
    assert (result.delta, result.ci_low, result.ci_high, result.median) == (0.0, 0.0, 0.0, 0.0)
    assert result.share_above_zero == 0.0 and result.n_valid == 200


def test_a_monotone_transform_has_the_same_spearman_on_every_resample():
    # Ranks of exp(score) equal ranks of score, so every resampled difference is exactly 0 even
    # though the values differ; Pearson would see the difference.
    rng = np.random.default_rng(1)
    gold, score = rng.random(30), rng.random(30)
    result = paired_statistic_bootstrap(spearman, (gold, score), (gold, np.exp(score)), n_resamples=100, seed=0)
    assert (result.ci_low, result.ci_high) == (0.0, 0.0)


def test_a_constant_shift_of_the_mean_is_exactly_that_shift():
    values = np.array([1.0, 2.0, 4.0, 8.0])
    result = paired_statistic_bootstrap(np.mean, (values,), (values + 1.0,), n_resamples=50, confidence=0.9, seed=1)
    assert result.delta == 1.0 and (result.ci_low, result.ci_high) == (1.0, 1.0)
    assert result.share_above_zero == 1.0


def test_hand_computed_maximum_on_three_items():
    # delta* = max(b*) - max(a*) is 2 when item 2 (a=3, b=5) is drawn and 0 otherwise. With 3
    # resamples and confidence 0.5, k = floor(4 * 0.25) = 1: the interval is [min, max].
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 5.0])
    drawn = np.random.default_rng(7).integers(0, 3, size=(3, 3))
    expected = sorted(2.0 if 2 in row else 0.0 for row in drawn)
    result = paired_statistic_bootstrap(np.max, (a,), (b,), n_resamples=3, confidence=0.5, seed=7)
    assert result.delta == 2.0
    assert (result.ci_low, result.ci_high, result.median) == (expected[0], expected[-1], expected[1])


def test_the_mean_statistic_matches_the_paired_bootstrap_of_per_item_deltas():
    rng = np.random.default_rng(2)
    a, b = rng.random(25), rng.random(25)
    result = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=500, seed=11)
    reference = paired_bootstrap(b - a, n_resamples=500, seed=11, method="percentile")
    assert result.delta == pytest.approx(float(reference.mean), abs=1e-12)
    assert result.ci_low == pytest.approx(float(reference.ci_low), abs=1e-12)
    assert result.ci_high == pytest.approx(float(reference.ci_high), abs=1e-12)


def test_swapping_the_models_negates_the_interval_exactly():
    rng = np.random.default_rng(4)
    gold, a, b = rng.random(20), rng.random(20), rng.random(20)
    forward = paired_statistic_bootstrap(spearman, (gold, a), (gold, b), n_resamples=99, seed=5)
    backward = paired_statistic_bootstrap(spearman, (gold, b), (gold, a), n_resamples=99, seed=5)
    assert (backward.ci_low, backward.ci_high) == (-forward.ci_high, -forward.ci_low)


def test_vectorized_and_per_resample_statistics_agree():
    rng = np.random.default_rng(5)
    gold, a, b = rng.random(15), rng.random(15), rng.random(15)

    def vectorized(gold_rows, score_rows):
        return np.stack([[spearman(g, s), stats.pearsonr(g, s).statistic] for g, s in zip(gold_rows, score_rows, strict=True)])

    def plain(gold, score):
        return [spearman(gold, score), stats.pearsonr(gold, score).statistic]

    fast = paired_statistic_bootstrap(vectorized, (gold, a), (gold, b), vectorized=True, n_resamples=80, seed=2)
    slow = paired_statistic_bootstrap(plain, (gold, a), (gold, b), n_resamples=80, seed=2)
    assert fast.ci_low.shape == (2,)
    np.testing.assert_array_equal(fast.ci_low, slow.ci_low)
    np.testing.assert_array_equal(fast.ci_high, slow.ci_high)


def test_undefined_resamples_are_left_out_and_counted():
    # On two items the Spearman correlation is undefined whenever one item is drawn twice.
    gold, score = np.array([0.0, 1.0]), np.array([0.0, 1.0])
    with np.errstate(invalid="ignore"), pytest.warns(stats.ConstantInputWarning):
        result = paired_statistic_bootstrap(spearman, (gold, score), (gold, -score), n_resamples=400,
                                            confidence=0.5, seed=0)
    assert 150 < int(result.n_valid) < 250
    assert (result.ci_low, result.ci_high) == pytest.approx((-2.0, -2.0))


def test_groups_of_one_item_each_resample_like_items():
    rng = np.random.default_rng(6)
    a, b = rng.random(12), rng.random(12)
    items = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=60, seed=9)
    groups = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=60, seed=9, groups=np.arange(12))
    assert (groups.ci_low, groups.ci_high) == (items.ci_low, items.ci_high)
    assert groups.resampling == "group" and items.resampling == "item"


def test_whole_groups_are_drawn():
    # Two groups, each holding one item of each sign: every resample keeps the groups whole, so
    # the mean of b - a over a resample is always exactly 0.
    a = np.zeros(4)
    b = np.array([1.0, -1.0, 2.0, -2.0])
    result = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=40, confidence=0.5, seed=1,
                                        groups=["x", "x", "y", "y"])
    assert result.n_units == 2 and (result.ci_low, result.ci_high) == (0.0, 0.0)


def test_mismatched_items_are_refused():
    with pytest.raises(ValueError, match="data_a holds 3 items but data_b 2"):
        paired_statistic_bootstrap(np.mean, (np.ones(3),), (np.ones(2),), n_resamples=50)
    with pytest.raises(ValueError, match="undefined on the full data"):
        paired_statistic_bootstrap(lambda x: np.nan, (np.ones(3),), (np.ones(3),), n_resamples=50)


def test_the_p_value_counts_the_resampled_differences_on_the_far_side_of_zero():
    # The mean statistic: delta* is the mean of the drawn per-item deltas, recomputed here from
    # the generator the bootstrap draws with (rows of default_rng(seed).integers(0, n, (B, n))).
    rng = np.random.default_rng(8)
    a = rng.random(15)
    b = a + rng.normal(0.08, 0.2, 15)
    drawn = np.random.default_rng(5).integers(0, 15, size=(999, 15))
    resampled = (b - a)[drawn].mean(axis=1)
    below, above = np.count_nonzero(resampled <= 0), np.count_nonzero(resampled >= 0)
    result = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=999, seed=5)
    assert result.p_value == pytest.approx(min(1.0, 2 * (1 + min(below, above)) / 1000), abs=1e-15)
    # Degenerate cases by hand: a model against itself, and a constant shift (every delta* > 0).
    assert paired_statistic_bootstrap(np.mean, (a,), (a,), n_resamples=99, seed=1).p_value == 1.0
    assert paired_statistic_bootstrap(np.mean, (a,), (a + 1,), n_resamples=99, seed=1).p_value == 2 / 100


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_the_p_value_rejects_exactly_when_the_percentile_interval_excludes_zero(confidence):
    rng = np.random.default_rng(9)
    agreed = 0
    for trial in range(60):
        a = rng.random(12)
        b = a + rng.normal(0.1 * (trial % 4), 0.3, 12)
        result = paired_statistic_bootstrap(np.mean, (a,), (b,), n_resamples=199, confidence=confidence, seed=trial)
        excludes = result.ci_low > 0 or result.ci_high < 0
        assert (result.p_value <= 1 - confidence + 1e-12) == excludes
        agreed += excludes
    assert 10 < agreed < 50  # both outcomes occur
