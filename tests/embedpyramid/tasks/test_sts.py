import numpy as np
import pytest
from scipy import stats
from task_vectors import pair_vectors, pairs_frame

from embedpyramid.tasks.sts import average_ranks, compare_sts, correlations, evaluate_sts, rank_codes


def test_spearman_and_pearson_of_cosines_against_human_scores():
    # Cosines 0, 0.5, 0.8, 1 against scores 1..4: the order agrees (rho = 1); by hand,
    # r = 1.65 / sqrt(0.5675 * 5) = 0.97952.
    vectors = pair_vectors([0.0, 0.5, 0.8, 1.0])
    result = evaluate_sts(pairs_frame([1, 2, 3, 4]), vectors, dataset="d", model="m")
    values = dict(zip(result.summary["metric"], result.summary["value"], strict=True))
    assert values["spearman"] == pytest.approx(1.0)
    assert values["pearson"] == pytest.approx(1.65 / np.sqrt(0.5675 * 5), abs=1e-7)  # float32 vectors
    np.testing.assert_allclose(result.predictions["score"].to_numpy(), [0.0, 0.5, 0.8, 1.0], atol=1e-7)
    assert result.per_item.height == 0  # a correlation is not a mean of per-pair values
    assert set(result.summary["n_items"]) == {4} and result.summary["sd"].null_count() == 2


def test_resample_kernel_matches_scipy_row_by_row():
    # Rows are resamples of 25 items: duplicated items and tied human scores both make ties.
    rng = np.random.default_rng(0)
    gold_items, score_items = rng.integers(0, 5, 25).astype(float), rng.random(25)
    rows = rng.integers(0, 25, size=(30, 25))
    gold, score = gold_items[rows], score_items[rows]
    got = correlations(rank_codes(gold_items)[rows], gold, rank_codes(score_items)[rows], score)
    for row in range(30):
        assert got[row, 0] == pytest.approx(stats.spearmanr(gold[row], score[row]).statistic, abs=1e-12)
        assert got[row, 1] == pytest.approx(stats.pearsonr(gold[row], score[row]).statistic, abs=1e-12)
    np.testing.assert_array_equal(average_ranks(np.array([[2, 0, 2, 1]])), [[3.5, 1.0, 3.5, 2.0]])
    constant = np.zeros((1, 5), dtype=np.int64)
    assert np.isnan(correlations(constant, np.ones((1, 5)), constant, np.ones((1, 5)))).all()


def test_comparison_of_a_model_with_itself_is_zero_and_a_better_model_wins():
    pairs = pairs_frame([1, 2, 3, 4, 5, 6, 7, 8])
    good = evaluate_sts(pairs, pair_vectors([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]), dataset="d", model="good")
    noisy = evaluate_sts(pairs, pair_vectors([0.5, 0.1, 0.4, 0.2, 0.8, 0.3, 0.7, 0.6]), dataset="d", model="noisy")
    same = compare_sts(good.predictions, good.predictions, n_resamples=200)
    assert same["delta"].to_list() == [0.0, 0.0] and same["ci_low"].to_list() == [0.0, 0.0]
    assert same["ci_high"].to_list() == [0.0, 0.0]
    better = compare_sts(noisy.predictions, good.predictions, n_resamples=400, seed=1)
    assert better["metric"].to_list() == ["spearman", "pearson"]
    assert (better["model_a"][0], better["model_b"][0]) == ("noisy", "good")
    spearman = better.row(0, named=True)
    expected = 1.0 - stats.spearmanr(range(8), [0.5, 0.1, 0.4, 0.2, 0.8, 0.3, 0.7, 0.6]).statistic
    assert spearman["delta"] == pytest.approx(expected)
    assert spearman["ci_low"] <= spearman["delta"] <= spearman["ci_high"]
