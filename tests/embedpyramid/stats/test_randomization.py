import numpy as np
import pytest
from scipy.stats import permutation_test

from embedpyramid.stats import paired_sign_flip_test, sign_flip_mc_error
from embedpyramid.stats.randomization import sign_patterns


def scipy_sign_flip(deltas, n_resamples, rng=None):
    return permutation_test(
        (deltas,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=rng,
    )


@pytest.mark.parametrize(
    "deltas",
    [
        np.random.default_rng(0).normal(size=10),
        np.random.default_rng(1).normal(0.5, 1.0, size=13),
        np.array([1.0, -1.0, 2.0, 0.0, 3.0, -2.0, 1.0]),
        np.array([0.1, 0.1, 0.1, -0.2, 0.3]),
        np.array([0.25, 0.0, 0.0, 0.5]),
    ],
)
def test_exact_mode_matches_scipy_exactly(deltas):
    # 2^n <= n_permutations: both enumerate every sign pattern.
    expected = scipy_sign_flip(deltas, n_resamples=10_000)
    assert float(paired_sign_flip_test(deltas, n_permutations=10_000)) == expected.pvalue


def test_exact_mode_matches_scipy_per_metric_column():
    deltas = np.random.default_rng(2).normal(0.3, 1.0, size=(9, 3))
    pvalues = paired_sign_flip_test(deltas, n_permutations=512)
    assert pvalues.shape == (3,)
    for column in range(3):
        assert pvalues[column] == scipy_sign_flip(deltas[:, column], n_resamples=512).pvalue


def test_hand_computed_exact_values():
    # Model against itself: t = 0, every pattern is as extreme.
    assert float(paired_sign_flip_test(np.zeros(6))) == 1.0
    # A constant shift over 5 queries: only the all-plus and all-minus patterns reach |t|.
    assert float(paired_sign_flip_test(np.full(5, 0.1))) == 2 / 32


def test_groups_share_one_sign():
    deltas = np.array([1.0, 1.0, 1.0, 1.0, -1.0])
    # Per query: |sum of five signs| >= 3 in 2 * (1 + 5) of 32 patterns.
    assert float(paired_sign_flip_test(deltas)) == 12 / 32
    # Groups {4 queries, sum 4} and {1 query, sum -1}: |+-4 +-1| >= 3 in all 4 patterns.
    assert float(paired_sign_flip_test(deltas, groups=["a", "a", "a", "a", "b"])) == 1.0


def test_randomized_mode_matches_a_loop_over_the_same_patterns():
    deltas = np.random.default_rng(3).normal(0.2, 1.0, size=(40, 2))
    n_permutations, seed = 3_000, 5
    patterns, exhaustive = sign_patterns(40, n_permutations=n_permutations, seed=seed)
    assert not exhaustive
    observed = np.abs(deltas.mean(axis=0))
    as_extreme = np.zeros(2)
    for chunk in patterns:
        for signs in chunk:
            flipped = np.abs((signs[:, None] * deltas).mean(axis=0))
            as_extreme += flipped >= observed * (1 - 100 * np.finfo(float).eps)
    expected = (as_extreme + 1) / (n_permutations + 1)
    pvalues = paired_sign_flip_test(deltas, n_permutations=n_permutations, seed=seed)
    np.testing.assert_array_equal(pvalues, expected)


def test_randomized_mode_agrees_with_scipy_within_monte_carlo_error():
    deltas = np.random.default_rng(4).normal(0.3, 1.0, size=30)
    ours = float(paired_sign_flip_test(deltas, n_permutations=20_000, seed=1))
    theirs = scipy_sign_flip(deltas, n_resamples=20_000, rng=np.random.default_rng(2)).pvalue
    # Both estimate p ~ 0.1; Monte Carlo standard error sqrt(p(1-p)/B) ~ 0.002 each.
    assert ours == pytest.approx(theirs, abs=0.015)
    assert 0.0 < ours < 1.0


def test_randomized_p_value_is_never_zero():
    deltas = np.full(30, 1.0)
    assert float(paired_sign_flip_test(deltas, n_permutations=999)) == 1 / 1000


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="n_permutations must be at least 1"):
        paired_sign_flip_test([1.0, 2.0], n_permutations=0)
    with pytest.raises(ValueError, match="finite"):
        paired_sign_flip_test([1.0, np.inf])


def test_exhaustive_patterns_cover_every_sign_vector_once_across_chunks():
    patterns, exhaustive = sign_patterns(18, n_permutations=2**18, seed=0)
    signs = np.concatenate(list(patterns))
    assert exhaustive and signs.shape == (2**18, 18)
    codes = ((signs < 0) * (1 << np.arange(18))).sum(axis=1)
    np.testing.assert_array_equal(np.sort(codes), np.arange(2**18))


def test_monte_carlo_error_is_zero_when_exact_and_binomial_otherwise():
    assert sign_flip_mc_error(np.array([0.25]), n_units=10, n_permutations=2**10).tolist() == [0.0]
    error = sign_flip_mc_error(np.array([0.1, 1.0]), n_units=40, n_permutations=10_000)
    np.testing.assert_allclose(error, [np.sqrt(0.1 * 0.9 / 10_000), 0.0])


def test_random_patterns_do_not_depend_on_blocking():
    first, _ = sign_patterns(300_000, n_permutations=10, seed=3)
    blocks = list(first)
    assert len(blocks) > 1
    whole = np.concatenate(blocks)
    raw = np.random.default_rng(3).integers(0, 2**64, size=(10, -(-300_000 // 64)), dtype=np.uint64)
    bits = np.unpackbits(raw.astype("<u8").view(np.uint8), axis=1, count=300_000, bitorder="little")
    np.testing.assert_array_equal(whole, 1.0 - 2.0 * bits)
