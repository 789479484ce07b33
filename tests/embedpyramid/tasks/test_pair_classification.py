import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm
from task_vectors import merge, pair_vectors, pairs_frame

from embedpyramid.config import PairClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.tasks.pair_classification import (
    average_precision_rows,
    binary_metrics_rows,
    choose_threshold,
    compare_pair_classification,
    evaluate_pair_classification,
)

DEV = ([0.9, 0.8, 0.6, 0.4], [1, 1, 0, 0])
TEST = ([0.75, 0.65, 0.72, 0.3], [1, 1, 0, 0])


def split_data(test_cosines=TEST[0]):
    vectors = merge(pair_vectors(DEV[0], "dev-"), pair_vectors(test_cosines, "test-"))
    pairs = pl.concat([pairs_frame(DEV[1], ["dev"] * 4, "dev-"), pairs_frame(TEST[1], ["test"] * 4, "test-")])
    return pairs, vectors


def test_the_threshold_chosen_on_dev_is_applied_unchanged_to_test():
    # Dev: F1 is 1 at "cosine >= 0.8" (next lower dev cosine 0.6), so the threshold is 0.7.
    # On test (0.75+, 0.65+, 0.72-, 0.3-) that predicts 1, 0, 1, 0: tp = fp = fn = 1, F1 = 0.5.
    # Re-tuning on test would reach F1 = 0.8 at 0.65; it must not happen.
    pairs, vectors = split_data()
    result = evaluate_pair_classification(pairs, vectors, PairClassificationSettings(), dataset="d", model="m")
    assert result.settings["threshold"]["value"] == pytest.approx(0.7)
    assert result.settings["threshold"]["chosen_on"] == "dev"
    test = {row["metric"]: row["value"] for row in result.summary.filter(pl.col("split") == "test").iter_rows(named=True)}
    assert test["threshold"] == pytest.approx(0.7)
    assert (test["f1"], test["accuracy"], test["precision"], test["recall"]) == pytest.approx((0.5, 0.5, 0.5, 0.5))
    # AP of (0.75+, 0.72-, 0.65+, 0.3-) = 1/2 * 1 + 1/2 * 2/3.
    assert test["ap"] == pytest.approx(0.5 + 1 / 3)
    dev = {row["metric"]: row["value"] for row in result.summary.filter(pl.col("split") == "dev").iter_rows(named=True)}
    assert dev["f1"] == 1.0 and dev["threshold"] == test["threshold"]
    # Per-item rows: test pairs only, 1 when the prediction at the dev threshold is right.
    assert result.per_item["query_id"].to_list() == ["test-p0", "test-p1", "test-p2", "test-p3"]
    assert result.per_item["value"].to_list() == [1.0, 0.0, 0.0, 1.0]


def test_threshold_candidates_ties_and_accuracy_objective():
    # Candidates 0.9(+), 0.5(+ and -, tied), 0.1(-): F1 is 2/3 at >= 0.9, 4/5 at >= 0.5 and
    # 2/3 at >= 0.1, so >= 0.5 wins and the threshold is the midpoint (0.5 + 0.1) / 2.
    chosen = choose_threshold(np.array([0.9, 0.5, 0.5, 0.1]), np.array([1, 1, 0, 0]))
    assert chosen.value == pytest.approx(0.3) and chosen.dev_value == pytest.approx(0.8)
    # Accuracy ties between >= 0.9 (3/4) and >= 0.5 (3/4): the highest candidate wins.
    by_accuracy = choose_threshold(np.array([0.9, 0.5, 0.5, 0.1]), np.array([1, 1, 0, 0]), "accuracy")
    assert by_accuracy.value == pytest.approx(0.7) and by_accuracy.dev_value == pytest.approx(0.75)
    with pytest.raises(TaskError, match="needs positive and negative pairs"):
        choose_threshold(np.array([0.2, 0.4]), np.array([1, 1]))


def test_missing_dev_split_is_refused():
    with pytest.raises(TaskError, match="needs dev and test pairs"):
        evaluate_pair_classification(pairs_frame([1, 0]), pair_vectors([0.9, 0.1]), PairClassificationSettings(),
                                     dataset="d", model="m")


def test_vectorized_kernels_match_scikit_learn():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, size=(50, 30))
    gold[:, 0] = 1  # at least one positive per row
    score = np.round(rng.random((50, 30)), 1)  # many ties
    predicted = rng.integers(0, 2, size=(50, 30))
    ap = average_precision_rows(gold, score)
    binary = binary_metrics_rows(gold, predicted)
    for row in range(50):
        assert ap[row] == pytest.approx(skm.average_precision_score(gold[row], score[row]), abs=1e-12)
        expected = [skm.f1_score(gold[row], predicted[row], zero_division=0),
                    skm.precision_score(gold[row], predicted[row], zero_division=0),
                    skm.recall_score(gold[row], predicted[row], zero_division=0)]
        np.testing.assert_allclose(binary[row], expected, atol=1e-12)
    assert np.isnan(average_precision_rows(np.zeros((1, 3)), np.ones((1, 3))))[0]


def test_comparison_runs_on_test_pairs_at_each_models_own_threshold():
    pairs, vectors = split_data()
    _, better_vectors = split_data([0.75, 0.71, 0.5, 0.3])
    settings = PairClassificationSettings()
    a = evaluate_pair_classification(pairs, vectors, settings, dataset="d", model="a")
    b = evaluate_pair_classification(pairs, better_vectors, settings, dataset="d", model="b")
    same = compare_pair_classification(a.predictions, a.predictions, n_resamples=100)
    assert same["metric"].to_list() == ["ap", "f1", "precision", "recall"]
    assert same["ci_low"].to_list() == [0.0] * 4 and same["ci_high"].to_list() == [0.0] * 4
    compared = compare_pair_classification(a.predictions, b.predictions, n_resamples=100)
    row = compared.filter(pl.col("metric") == "f1").row(0, named=True)
    assert (row["value_a"], row["value_b"]) == pytest.approx((0.5, 1.0)) and row["n"] == 4
