import numpy as np
import pytest

from embedpyramid.stats import paired_bootstrap
from embedpyramid.stats.bootstrap import bootstrap_counts, bootstrap_indices, percentile_rank


def loop_bootstrap(deltas, *, n_resamples, confidence, seed, groups=None):
    """Obviously-correct reference: one resample at a time, from the same index draws."""
    matrix = np.asarray(deltas, dtype=float).reshape(len(deltas), -1)
    if groups is None:
        members = [np.array([i]) for i in range(len(matrix))]
    else:
        labels = np.asarray(groups)
        members = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    means = []
    for chunk in bootstrap_indices(len(members), n_resamples=n_resamples, seed=seed):
        for row in chunk:
            rows = np.concatenate([members[unit] for unit in row])
            means.append(matrix[rows].mean(axis=0))
    means = np.sort(np.array(means), axis=0)
    k = int(np.floor((n_resamples + 1) * (1 - confidence) / 2 + 1e-9))
    return {
        "ci_low": means[k - 1],
        "ci_high": means[n_resamples - k],
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

    result = paired_bootstrap(np.array([1.0, -1.0]), n_resamples=10_000, seed=42)
    # About 2,500 resamples sit at -1 and at +1: the 250th smallest and largest are -1 and +1.
    assert (float(result.ci_low), float(result.ci_high)) == (-1.0, 1.0)
    assert float(result.mean) == 0.0
    assert float(result.median) == 0.0
    assert float(result.share_above_zero) == pytest.approx(frequencies[0], abs=1e-12)
    assert result.share_above_zero.shape == ()


def test_percentile_rank_reads_the_conventional_order_statistics():
    assert percentile_rank(10_000, 0.95) == 250
    assert percentile_rank(9_999, 0.95) == 250
    assert percentile_rank(999, 0.90) == 50
    with pytest.raises(ValueError, match="use at least 39"):
        percentile_rank(38, 0.95)


def test_matches_a_per_resample_loop_on_the_same_draws():
    rng = np.random.default_rng(0)
    deltas = rng.normal(size=(57, 3)) * [1.0, 0.1, 10.0]
    result = paired_bootstrap(deltas, n_resamples=2_000, confidence=0.9, seed=7)
    expected = loop_bootstrap(deltas, n_resamples=2_000, confidence=0.9, seed=7)
    for field, values in expected.items():
        np.testing.assert_allclose(getattr(result, field), values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.mean, deltas.mean(axis=0), rtol=0, atol=1e-12)
    assert (result.n_resamples, result.seed, result.confidence) == (2_000, 7, 0.9)
    assert (result.method, result.resampling, result.n_units) == ("percentile", "query", 57)


def test_cluster_bootstrap_matches_a_per_resample_loop_on_the_same_draws():
    rng = np.random.default_rng(1)
    deltas = rng.normal(size=(40, 2))
    groups = rng.choice(["s1", "s2", "s3", "s4", "s5", "s6", "s7"], size=40)
    result = paired_bootstrap(deltas, n_resamples=1_000, seed=3, groups=groups)
    expected = loop_bootstrap(deltas, n_resamples=1_000, confidence=0.95, seed=3, groups=groups)
    for field, values in expected.items():
        np.testing.assert_allclose(getattr(result, field), values, rtol=0, atol=1e-12)
    assert (result.resampling, result.n_units) == ("group", 7)


def test_singleton_groups_are_the_query_bootstrap_and_one_group_has_no_spread():
    deltas = np.random.default_rng(2).normal(size=30)
    by_query = paired_bootstrap(deltas, n_resamples=500, seed=1)
    by_singleton = paired_bootstrap(deltas, n_resamples=500, seed=1, groups=np.arange(30))
    for field in ("mean", "ci_low", "ci_high", "median", "share_above_zero"):
        np.testing.assert_array_equal(getattr(by_query, field), getattr(by_singleton, field))

    one_group = paired_bootstrap(deltas, n_resamples=500, seed=1, groups=np.zeros(30))
    np.testing.assert_allclose(one_group.ci_low, deltas.mean(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(one_group.ci_high, deltas.mean(), rtol=0, atol=1e-15)


def test_model_against_itself_gives_exactly_zero():
    result = paired_bootstrap(np.zeros((83, 4)))
    for field in ("mean", "ci_low", "ci_high", "median", "share_above_zero"):
        np.testing.assert_array_equal(getattr(result, field), np.zeros(4))


@pytest.mark.parametrize("shift", [0.1, 1 / 3, -0.7, 1e-3, 12345.678])
@pytest.mark.parametrize("groups", [None, np.arange(37) % 5])
def test_constant_shift_gives_exactly_that_shift(shift, groups):
    # Summing 37 copies of 0.1 is not 3.7 in floating point; the shifted sums make it exact.
    deltas = np.full((37, 2), shift)
    result = paired_bootstrap(deltas, n_resamples=1_000, seed=5, groups=groups)
    for field in ("mean", "ci_low", "ci_high", "median"):
        np.testing.assert_array_equal(getattr(result, field), np.full(2, shift))


@pytest.mark.parametrize("groups", [None, np.arange(64) % 9])
def test_swapping_the_models_negates_the_interval_exactly(groups):
    deltas = np.random.default_rng(4).normal(size=(64, 3))
    forward = paired_bootstrap(deltas, n_resamples=3_000, seed=11, groups=groups)
    backward = paired_bootstrap(-deltas, n_resamples=3_000, seed=11, groups=groups)
    np.testing.assert_array_equal(backward.mean, -forward.mean)
    np.testing.assert_array_equal(backward.ci_low, -forward.ci_high)
    np.testing.assert_array_equal(backward.ci_high, -forward.ci_low)
    np.testing.assert_array_equal(backward.median, -forward.median)


def test_metrics_are_resampled_jointly_with_the_draws_of_a_single_metric():
    deltas = np.random.default_rng(6).normal(size=(25, 2))
    joint = paired_bootstrap(deltas, n_resamples=800, seed=9)
    for column in range(2):
        alone = paired_bootstrap(deltas[:, column], n_resamples=800, seed=9)
        np.testing.assert_allclose(joint.ci_low[column], alone.ci_low, rtol=0, atol=1e-12)
        np.testing.assert_allclose(joint.ci_high[column], alone.ci_high, rtol=0, atol=1e-12)


def test_index_stream_does_not_depend_on_chunking():
    n_units = 300_000  # under one row per chunk's worth of indices: several chunks
    chunks = list(bootstrap_indices(n_units, n_resamples=3, seed=8))
    assert len(chunks) == 3
    expected = np.random.default_rng(8).integers(0, n_units, size=(3, n_units))
    np.testing.assert_array_equal(np.concatenate(chunks), expected)


def test_seed_is_a_parameter():
    deltas = np.random.default_rng(10).normal(size=50)
    first = paired_bootstrap(deltas, n_resamples=500, seed=1)
    again = paired_bootstrap(deltas, n_resamples=500, seed=1)
    other = paired_bootstrap(deltas, n_resamples=500, seed=2)
    assert float(first.ci_low) == float(again.ci_low)
    assert float(first.ci_low) != float(other.ci_low)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deltas": [1.0, np.nan]}, "must be finite; query row 1"),
        ({"deltas": []}, "at least one query"),
        ({"deltas": np.zeros((2, 2, 2))}, "1-D"),
        ({"deltas": [1.0, 2.0], "confidence": 1.0}, "strictly between 0 and 1"),
        ({"deltas": [1.0, 2.0], "n_resamples": 0}, "at least 1"),
        ({"deltas": [1.0, 2.0], "groups": ["a"]}, "one label per query"),
    ],
)
def test_rejects_bad_input_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(**kwargs)
