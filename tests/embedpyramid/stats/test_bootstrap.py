import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from embedpyramid.config.resampling import percentile_rank
from embedpyramid.stats import paired_bootstrap
from embedpyramid.stats.bootstrap import INTERVAL_METHODS, bootstrap_counts, bootstrap_indices

METHODS = list(INTERVAL_METHODS)


def loop_bootstrap(deltas, *, n_resamples, confidence, seed, groups=None):
    """Obviously-correct reference: one resample at a time, from the same index draws, with the
    intervals computed from their textbook formulas (the hybrid: t where half the deltas or more
    are 0, studentized otherwise)."""
    matrix = np.asarray(deltas, dtype=float).reshape(len(deltas), -1)
    if groups is None:
        members = [np.array([i]) for i in range(len(matrix))]
    else:
        labels = np.asarray(groups)
        members = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    n_units, total = len(members), len(matrix)
    mean = matrix.mean(axis=0)
    unit_sums = np.array([matrix[m].sum(axis=0) for m in members])
    unit_sizes = np.array([len(m) for m in members])

    def standard_error(sums, sizes):
        center = sums.sum(axis=0) / sizes.sum()
        return np.sqrt(n_units / (n_units - 1) * ((sums - center * sizes[:, None]) ** 2).sum(axis=0)) / sizes.sum()

    se = standard_error(unit_sums, unit_sizes)
    means, t = [], []
    for chunk in bootstrap_indices(n_units, n_resamples=n_resamples, seed=seed):
        for row in chunk:
            rows = np.concatenate([members[unit] for unit in row])
            resampled = matrix[rows].mean(axis=0)
            means.append(resampled)
            t.append((resampled - mean) / standard_error(unit_sums[row], unit_sizes[row]))
    means, t = np.sort(np.array(means), axis=0), np.sort(np.array(t), axis=0)
    k = int(np.floor((n_resamples + 1) * (1 - confidence) / 2 + 1e-9))

    # BCa: bias from the share below the mean (ties: equal up to rounding, counted half),
    # acceleration from the leave-one-unit-out means.
    tolerance = 8 * n_units * np.finfo(float).eps * np.abs(unit_sums / unit_sizes[:, None]).max(axis=0)
    tied = np.abs(means - mean) <= tolerance
    below = ((means < mean) & ~tied).mean(axis=0) + tied.mean(axis=0) / 2
    z0 = norm.ppf(below)
    leave_out = np.array([(unit_sums.sum(axis=0) - unit_sums[g]) / (total - unit_sizes[g]) for g in range(n_units)])
    u = leave_out.mean(axis=0) - leave_out
    a = (u**3).sum(axis=0) / (6 * ((u**2).sum(axis=0)) ** 1.5)
    z = norm.ppf((1 - confidence) / 2)
    levels = [norm.cdf(z0 + (z0 + edge) / (1 - a * (z0 + edge))) for edge in (z, -z)]
    low_rank = np.floor((n_resamples + 1) * levels[0]).astype(int)
    high_rank = n_resamples + 1 - np.floor((n_resamples + 1) * (1 - levels[1])).astype(int)
    columns = np.arange(matrix.shape[1])
    half = student_t.ppf(1 - (1 - confidence) / 2, n_units - 1) * se
    studentized = (mean - t[n_resamples - k] * se, mean - t[k - 1] * se)
    tied = (matrix == 0).mean(axis=0) >= 0.5
    return {
        "t": (mean - half, mean + half),
        "hybrid": tuple(np.where(tied, end, student) for end, student in zip((mean - half, mean + half), studentized, strict=True)),
        "percentile": (means[k - 1], means[n_resamples - k]),
        "studentized": studentized,
        "bca": (means[low_rank - 1, columns], means[high_rank - 1, columns]),
        "median": np.median(means, axis=0),
        "share_above_zero": (means > 0).mean(axis=0),
    }


def test_two_opposite_deltas_follow_the_hand_computed_distribution():
    # n = 2, deltas (1, -1): the resampled mean is +1 (both draws pick query 0), 0 (one each) or
    # -1 (both pick query 1), with probabilities 1/4, 1/2, 1/4.
    counts = np.concatenate(list(bootstrap_counts(2, n_resamples=10_000, seed=42)))
    times_query0 = counts[:, 0]
    frequencies = [np.mean(times_query0 == c) for c in (2, 1, 0)]
    np.testing.assert_allclose(frequencies, [0.25, 0.5, 0.25], atol=0.02)

    percentile = paired_bootstrap(np.array([1.0, -1.0]), n_resamples=10_000, seed=42, method="percentile")
    # About 2,500 resamples sit at -1 and at +1: the 250th smallest and largest are -1 and +1.
    assert (float(percentile.ci_low), float(percentile.ci_high)) == (-1.0, 1.0)
    assert float(percentile.mean) == 0.0
    assert float(percentile.median) == 0.0
    assert float(percentile.share_above_zero) == pytest.approx(frequencies[0], abs=1e-12)
    assert percentile.share_above_zero.shape == ()

    # Studentized: se = sd / sqrt(2) = 1; the resamples (1, 1) and (-1, -1) have no spread, so
    # t* = +-inf for a quarter of them each: the t pivot cannot bound the mean, and the column
    # is read as BCa instead (here the percentile interval: no bias, no acceleration).
    studentized = paired_bootstrap(np.array([1.0, -1.0]), n_resamples=10_000, seed=42, method="studentized")
    assert (float(studentized.ci_low), float(studentized.ci_high)) == (-1.0, 1.0)
    assert bool(studentized.fallback) and not bool(percentile.fallback)


def test_sparse_deltas_fall_back_to_bca_rather_than_an_unbounded_interval():
    # Two non-zero deltas among 748: about e^-2 = 13.5% of the resamples draw neither, have no
    # spread and an infinite t*, so the studentized interval is unbounded; BCa gives a finite one.
    deltas = np.zeros(748)
    deltas[3], deltas[100] = -0.04, 0.003
    result = paired_bootstrap(deltas, n_resamples=2_000, seed=1, method="studentized")
    bca = paired_bootstrap(deltas, n_resamples=2_000, seed=1, method="bca")
    assert bool(result.fallback) and np.isfinite([result.ci_low, result.ci_high]).all()
    assert str(result.methods) == "bca"
    assert (float(result.ci_low), float(result.ci_high)) == (float(bca.ci_low), float(bca.ci_high))
    dense = paired_bootstrap(np.random.default_rng(0).normal(size=748), n_resamples=2_000, seed=1, method="studentized")
    assert not bool(dense.fallback)


def test_percentile_rank_reads_the_conventional_order_statistics():
    assert percentile_rank(10_000, 0.95) == 250
    assert percentile_rank(9_999, 0.95) == 250
    assert percentile_rank(999, 0.90) == 50
    with pytest.raises(ValueError, match="use at least 39"):
        percentile_rank(38, 0.95)


@pytest.mark.parametrize("method", METHODS)
def test_matches_a_per_resample_loop_on_the_same_draws(method):
    rng = np.random.default_rng(0)
    deltas = rng.exponential(size=(57, 3)) * [1.0, 0.1, 10.0] - [0.5, 0.0, 3.0]
    result = paired_bootstrap(deltas, n_resamples=2_000, confidence=0.9, seed=7, method=method)
    expected = loop_bootstrap(deltas, n_resamples=2_000, confidence=0.9, seed=7)
    np.testing.assert_allclose(result.ci_low, expected[method][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.ci_high, expected[method][1], rtol=1e-12, atol=1e-12)
    for field in ("median", "share_above_zero"):
        np.testing.assert_allclose(getattr(result, field), expected[field], rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.mean, deltas.mean(axis=0), rtol=0, atol=1e-12)
    assert (result.n_resamples, result.seed, result.confidence) == (2_000, 7, 0.9)
    assert (result.method, result.resampling, result.n_units) == (method, "query", 57)


@pytest.mark.parametrize("method", METHODS)
def test_cluster_bootstrap_matches_a_per_resample_loop_on_the_same_draws(method):
    rng = np.random.default_rng(1)
    deltas = rng.normal(size=(40, 2))
    groups = rng.choice(["s1", "s2", "s3", "s4", "s5", "s6", "s7"], size=40)
    result = paired_bootstrap(deltas, n_resamples=1_000, seed=3, groups=groups, method=method)
    expected = loop_bootstrap(deltas, n_resamples=1_000, confidence=0.95, seed=3, groups=groups)
    np.testing.assert_allclose(result.ci_low, expected[method][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.ci_high, expected[method][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.median, expected["median"], rtol=0, atol=1e-12)
    assert (result.resampling, result.n_units) == ("group", 7)


@pytest.mark.parametrize("method", METHODS)
def test_singleton_groups_are_the_query_bootstrap_and_one_group_has_no_spread(method):
    deltas = np.random.default_rng(2).normal(size=30)
    by_query = paired_bootstrap(deltas, n_resamples=500, seed=1, method=method)
    by_singleton = paired_bootstrap(deltas, n_resamples=500, seed=1, groups=np.arange(30), method=method)
    for field in ("mean", "ci_low", "ci_high", "median", "share_above_zero"):
        np.testing.assert_allclose(getattr(by_query, field), getattr(by_singleton, field), rtol=0, atol=1e-15)

    one_group = paired_bootstrap(deltas, n_resamples=500, seed=1, groups=np.zeros(30), method=method)
    assert float(one_group.ci_low) == float(one_group.ci_high) == float(one_group.mean)
    assert float(one_group.mean) == pytest.approx(deltas.mean(), abs=1e-15)


@pytest.mark.parametrize("method", METHODS)
def test_model_against_itself_gives_exactly_zero(method):
    result = paired_bootstrap(np.zeros((83, 4)), method=method)
    for field in ("mean", "ci_low", "ci_high", "ci_low_mc_error", "ci_high_mc_error", "median", "share_above_zero"):
        np.testing.assert_array_equal(getattr(result, field), np.zeros(4))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shift", [0.1, 1 / 3, -0.7, 1e-3, 12345.678])
@pytest.mark.parametrize("groups", [None, np.arange(37) % 5])
def test_constant_shift_gives_exactly_that_shift(shift, groups, method):
    # Summing 37 copies of 0.1 is not 3.7 in floating point: a constant column is recognised.
    deltas = np.full((37, 2), shift)
    result = paired_bootstrap(deltas, n_resamples=1_000, seed=5, groups=groups, method=method)
    for field in ("mean", "ci_low", "ci_high", "median"):
        np.testing.assert_array_equal(getattr(result, field), np.full(2, shift))
    np.testing.assert_array_equal(result.share_above_zero, np.full(2, float(shift > 0)))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("groups", [None, np.arange(64) % 9])
def test_swapping_the_models_negates_the_interval_exactly(groups, method):
    deltas = np.random.default_rng(4).normal(size=(64, 3))
    deltas[:20] = 0.0
    forward = paired_bootstrap(deltas, n_resamples=3_000, seed=11, groups=groups, method=method)
    backward = paired_bootstrap(-deltas, n_resamples=3_000, seed=11, groups=groups, method=method)
    np.testing.assert_array_equal(backward.mean, -forward.mean)
    np.testing.assert_array_equal(backward.ci_low, -forward.ci_high)
    np.testing.assert_array_equal(backward.ci_high, -forward.ci_low)
    np.testing.assert_array_equal(backward.median, -forward.median)
    np.testing.assert_array_equal(backward.ci_low_mc_error, forward.ci_high_mc_error)


def exact_resampled_means(deltas, *, n_resamples, seed):
    """Every resampled mean as an exact fraction of the float deltas, from the same draws."""
    exact = [Fraction(value) for value in deltas]
    means = [
        sum((exact[i] for i in row), Fraction(0)) / len(deltas)
        for chunk in bootstrap_indices(len(deltas), n_resamples=n_resamples, seed=seed)
        for row in chunk
    ]
    return sorted(means)


@pytest.mark.parametrize(
    "nonzero",
    [
        {0: 0.5, 1: -0.25, 2: 0.75},  # a few dyadic deltas among zeros
        {0: 0.1, 1: 0.1, 2: 0.1, 3: -0.1, 4: -0.1, 5: -0.1, 6: 0.3, 7: -0.2},  # cancelling tenths
        {0: 1 / 3, 1: -1 / 7, 2: 0.6},
    ],
)
def test_deltas_zero_but_for_a_few_queries_give_exact_resampled_means(nonzero):
    # Most resamples draw only zeros or deltas that cancel: their means must be exactly 0, not
    # +-1e-17, or the share above zero and an interval touching 0 go wrong.
    deltas = np.zeros(40)
    for index, value in nonzero.items():
        deltas[index] = value
    n_resamples, seed = 4_000, 3
    exact = exact_resampled_means(deltas, n_resamples=n_resamples, seed=seed)
    assert sum(mean == 0 for mean in exact) > 100
    result = paired_bootstrap(deltas, n_resamples=n_resamples, seed=seed, method="percentile")
    assert float(result.share_above_zero) == sum(mean > 0 for mean in exact) / n_resamples
    # Exactly 0 where the exact mean is 0; within an ulp or two elsewhere.
    k = percentile_rank(n_resamples, 0.95)
    middle = (exact[n_resamples // 2 - 1] + exact[n_resamples // 2]) / 2
    for ours, theirs in ((result.ci_low, exact[k - 1]), (result.ci_high, exact[n_resamples - k]), (result.median, middle)):
        assert float(ours) == pytest.approx(float(theirs), rel=1e-15, abs=0.0)
    studentized = paired_bootstrap(deltas, n_resamples=n_resamples, seed=seed)
    assert float(studentized.share_above_zero) == float(result.share_above_zero)


def test_an_interval_through_zero_reads_exactly_zero():
    # One positive delta among 39 zeros: well over 2.5% of the resamples miss it, so the lower
    # percentile end is a resample of zeros only, exactly 0.0 (not -1e-17).
    deltas = np.zeros(40)
    deltas[7] = 1 / 3
    result = paired_bootstrap(deltas, n_resamples=2_000, seed=1, method="percentile")
    assert float(result.ci_low) == 0.0 and math.copysign(1.0, float(result.ci_low)) == 1.0


@pytest.mark.parametrize("method", METHODS)
def test_metrics_are_resampled_jointly_with_the_draws_of_a_single_metric(method):
    deltas = np.random.default_rng(6).normal(size=(25, 2))
    joint = paired_bootstrap(deltas, n_resamples=800, seed=9, method=method)
    for column in range(2):
        alone = paired_bootstrap(deltas[:, column], n_resamples=800, seed=9, method=method)
        np.testing.assert_allclose(joint.ci_low[column], alone.ci_low, rtol=0, atol=1e-12)
        np.testing.assert_allclose(joint.ci_high[column], alone.ci_high, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", [method for method in METHODS if method != "t"])
def test_monte_carlo_error_predicts_the_spread_of_an_endpoint_over_seeds(method):
    deltas = np.random.default_rng(12).exponential(size=60)
    runs = [paired_bootstrap(deltas, n_resamples=1_000, seed=seed, method=method) for seed in range(40)]
    observed = np.std([float(run.ci_low) for run in runs], ddof=1)
    predicted = np.mean([float(run.ci_low_mc_error) for run in runs])
    assert 0.5 * observed < predicted < 2.0 * observed


def test_the_t_interval_does_not_resample_so_it_has_no_monte_carlo_error():
    deltas = np.random.default_rng(12).exponential(size=60)
    runs = [paired_bootstrap(deltas, n_resamples=1_000, seed=seed, method="t") for seed in range(3)]
    assert len({(float(run.ci_low), float(run.ci_high)) for run in runs}) == 1
    assert all(float(run.ci_low_mc_error) == float(run.ci_high_mc_error) == 0.0 for run in runs)


def test_the_hybrid_reads_t_where_half_the_deltas_tie_and_studentized_elsewhere():
    # Column 0: 5 of 10 deltas are 0 (tied share 0.5, the threshold): the t interval,
    # mean 0.3, sd 0.48305 (hand-computed), t_9(0.975) = 2.262157.
    # Column 1: no zero delta: the studentized interval, exactly as method="studentized".
    tied = np.array([1.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    dense = np.linspace(-0.4, 0.9, 10)
    deltas = np.column_stack([tied, dense])
    hybrid = paired_bootstrap(deltas, n_resamples=2_000, seed=4, method="hybrid")
    studentized = paired_bootstrap(deltas, n_resamples=2_000, seed=4, method="studentized")
    half = 2.2621571627 * math.sqrt((2 * 0.7**2 + 2 * 0.2**2 + 6 * 0.3**2) / 9) / math.sqrt(10)
    assert hybrid.ci_low[0] == pytest.approx(0.3 - half, abs=1e-9)
    assert hybrid.ci_high[0] == pytest.approx(0.3 + half, abs=1e-9)
    assert (hybrid.ci_low[1], hybrid.ci_high[1]) == (studentized.ci_low[1], studentized.ci_high[1])
    assert hybrid.methods.tolist() == ["t", "studentized"]
    assert hybrid.ci_low_mc_error[0] == 0.0 and hybrid.ci_low_mc_error[1] > 0.0


def test_index_stream_does_not_depend_on_blocking():
    n_units = 700_000  # two rows per block of 2^21 indices: four blocks for seven resamples
    blocks = list(bootstrap_indices(n_units, n_resamples=7, seed=8))
    assert [len(block) for block in blocks] == [2, 2, 2, 1]
    expected = np.random.default_rng(8).integers(0, n_units, size=(7, n_units))
    np.testing.assert_array_equal(np.concatenate(blocks), expected)


def test_seed_is_a_parameter():
    deltas = np.random.default_rng(10).normal(size=50)
    first = paired_bootstrap(deltas, n_resamples=500, seed=1)
    again = paired_bootstrap(deltas, n_resamples=500, seed=1)
    other = paired_bootstrap(deltas, n_resamples=500, seed=2)
    assert float(first.ci_low) == float(again.ci_low)
    assert float(first.ci_low) != float(other.ci_low)


def test_bounds_clip_the_interval():
    # Near the top of [-1, 1] with a long left tail, the studentized interval overshoots 1.
    deltas = np.array([0.95, 1.0, 0.3, 0.99, 1.0, 0.98])
    free = paired_bootstrap(deltas, n_resamples=2_000, seed=0)
    clipped = paired_bootstrap(deltas, n_resamples=2_000, seed=0, bounds=(-1.0, 1.0))
    assert float(free.ci_low) < -1.0 and float(free.ci_high) > 1.0
    assert -1.0 <= float(clipped.ci_low) <= float(clipped.mean) <= float(clipped.ci_high) <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deltas": [1.0, np.nan]}, "must be finite; query row 1"),
        ({"deltas": []}, "at least one query"),
        ({"deltas": np.zeros((2, 2, 2))}, "1-D"),
        ({"deltas": [1.0, 2.0], "confidence": 1.0}, "strictly between 0 and 1"),
        ({"deltas": [1.0, 2.0], "n_resamples": 0}, "at least 1"),
        ({"deltas": [1.0, 2.0], "groups": ["a"]}, "one label per query"),
        ({"deltas": [1.0, 2.0], "method": "basic"}, "unknown interval method 'basic'"),
        ({"deltas": [1.0, 2.0], "bounds": (1.0, -1.0)}, "low <= high"),
    ],
)
def test_rejects_bad_input_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(**kwargs)
