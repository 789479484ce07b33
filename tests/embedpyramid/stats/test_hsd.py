import itertools

import numpy as np
import pytest

from embedpyramid.stats import randomized_tukey_hsd
from embedpyramid.stats.hsd import TABLE_MODELS


def loop_ranges(values, n_permutations, seed):
    """Reference: permute each query's row with the same draws, one permutation at a time."""
    orders = np.array(list(itertools.permutations(range(values.shape[1]))))
    codes = np.random.default_rng(seed).integers(0, len(orders), size=(n_permutations, values.shape[0]))
    ranges = []
    for row in codes:
        means = np.array([values[q, orders[c]] for q, c in enumerate(row)]).mean(axis=0)
        ranges.append(means.max() - means.min())
    return np.sort(ranges)


def test_matches_a_loop_over_the_same_permutations():
    rng = np.random.default_rng(0)
    values = rng.uniform(size=(30, 3)) + [0.0, 0.05, 0.3]
    result = randomized_tukey_hsd(values, ["a", "b", "c"], n_permutations=500, seed=4)
    ranges = loop_ranges(values, 500, 4)
    means = values.mean(axis=0)
    for i, j in itertools.combinations(range(3), 2):
        count = (ranges >= abs(means[i] - means[j]) * (1 - 100 * np.finfo(float).eps)).sum()
        assert result.p_values[i, j] == result.p_values[j, i] == (count + 1) / 501
    assert result.critical_range == pytest.approx(ranges[int(np.ceil(501 * 0.95)) - 1], rel=1e-12)
    np.testing.assert_allclose(result.differences, means[None, :] - means[:, None], atol=1e-15)


def test_clear_winner_gets_its_own_letter_and_rank():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.6, size=200)
    values = np.column_stack([base, base + rng.normal(0, 0.01, 200), base + 0.2])
    result = randomized_tukey_hsd(values, ["a", "a2", "best"], n_permutations=2_000, seed=1)
    assert result.letters == {"best": "a", "a2": "b", "a": "b"}
    assert result.rank_low.tolist() == [2, 2, 1] and result.rank_high.tolist() == [3, 3, 1]
    assert result.significant[0, 2] and not result.significant[0, 1]
    assert result.p_value_mc_errors[0, 2] == pytest.approx(np.sqrt(result.p_values[0, 2] * (1 - result.p_values[0, 2]) / 2_000))


def test_many_models_use_sorted_keys_and_groups_share_a_permutation():
    rng = np.random.default_rng(2)
    values = rng.uniform(size=(40, TABLE_MODELS + 2))
    values[:, -1] += 0.5
    result = randomized_tukey_hsd(values, [f"m{i}" for i in range(values.shape[1])], n_permutations=1_000)
    assert result.letters[f"m{values.shape[1] - 1}"] == "a" and result.rank_high[-1] == 1
    grouped = randomized_tukey_hsd(values[:, :3], ["x", "y", "z"], n_permutations=1_000, groups=np.arange(40) // 4)
    assert grouped.n_units == 10 and grouped.n_queries == 40


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="n_models >= 2"):
        randomized_tukey_hsd(np.zeros((3, 1)), ["a"])
    with pytest.raises(ValueError, match="name each of the 2 columns once"):
        randomized_tukey_hsd(np.zeros((3, 2)), ["a", "a"])
