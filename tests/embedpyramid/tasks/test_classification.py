import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm

from embedpyramid.config import ClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.tasks.classification import compare_classification, evaluate_classification, macro_f1_rows
from embedpyramid.vectors import TextVectors

SMALL = ClassificationSettings(k=1, folds=3, inner_folds=2, seeds=[0, 1], c_grid=[1.0, 10.0])


def test_separable_classes_are_classified_perfectly_by_both_systems(blobs):
    texts, vectors = blobs
    result = evaluate_classification(texts, vectors, SMALL, dataset="d", model="m")
    summary = result.summary
    assert set(summary["system"]) == {"knn", "probe"} and set(summary["metric"]) == {"accuracy", "macro_f1"}
    assert summary["value"].to_list() == [1.0] * 4 and summary["sd"].to_list() == [0.0] * 4
    assert set(summary["n_seeds"]) == {2} and set(summary["split"]) == {"cv"}
    assert result.per_item["value"].to_list() == [1.0] * 24
    assert result.per_seed.height == 2 * 2 * 2
    assert set(result.settings["chosen_c"]) == {"0", "1"} and all(len(c) == 3 for c in result.settings["chosen_c"].values())


def test_small_classes_are_dropped_and_listed(blobs):
    texts, vectors = blobs
    extra = TextVectors([*vectors.ids, "odd-0", "odd-1"], np.vstack([vectors.vectors, [[5, 5, 0], [5, 5, 1]]]))
    with_small = pl.concat([texts, pl.DataFrame({"text_id": ["odd-0", "odd-1"], "label": ["odd", "odd"]})])
    result = evaluate_classification(with_small, extra, SMALL, dataset="d", model="m")
    assert result.settings["dropped_classes"] == ["odd"] and result.settings["dropped_items"] == 2
    assert "odd-0" not in result.per_item["query_id"].to_list()
    with pytest.raises(TaskError, match="at least two classes"):
        evaluate_classification(texts.head(4), vectors, SMALL, dataset="d", model="m")


def test_per_item_mean_equals_the_seed_mean_accuracy():
    # Overlapping classes, so there are mistakes; each item is predicted once per seed.
    rng = np.random.default_rng(3)
    ids = [f"t{i}" for i in range(40)]
    labels = ["a" if i % 2 else "b" for i in range(40)]
    vectors = TextVectors(ids, rng.normal(size=(40, 4)) + np.array([[0.6, 0, 0, 0] if i % 2 else [0, 0.6, 0, 0]
                                                                     for i in range(40)]))
    result = evaluate_classification(pl.DataFrame({"text_id": ids, "label": labels}), vectors, SMALL,
                                     dataset="d", model="m")
    for system in ("knn", "probe"):
        accuracy = result.summary.filter((pl.col("system") == system) & (pl.col("metric") == "accuracy"))["value"][0]
        assert result.per_item.filter(pl.col("system") == system)["value"].mean() == pytest.approx(accuracy)
    assert 0.0 < accuracy < 1.0


def test_macro_f1_kernel_matches_scikit_learn():
    rng = np.random.default_rng(0)
    gold, predicted = rng.integers(0, 6, size=(40, 25)), rng.integers(0, 6, size=(40, 25))
    gold[0], predicted[0] = 2, 2  # one class only
    got = macro_f1_rows(gold, predicted, 6)
    expected = [skm.f1_score(g, p, average="macro") for g, p in zip(gold, predicted, strict=True)]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_comparison_of_seed_mean_macro_f1(blobs):
    texts, vectors = blobs
    noisy = TextVectors(vectors.ids, vectors.vectors + np.random.default_rng(1).normal(scale=8.0, size=(12, 3)))
    a = evaluate_classification(texts, noisy, SMALL, dataset="d", model="noisy")
    b = evaluate_classification(texts, vectors, SMALL, dataset="d", model="clean")
    compared = compare_classification(a.predictions, b.predictions, n_resamples=200)
    assert compared["system"].to_list() == ["knn", "probe"] and set(compared["metric"]) == {"macro_f1"}
    for row in compared.iter_rows(named=True):
        expected = a.summary.filter((pl.col("system") == row["system"]) & (pl.col("metric") == "macro_f1"))
        assert row["value_a"] == pytest.approx(expected["value"][0]) and row["value_b"] == pytest.approx(1.0)
    same = compare_classification(b.predictions, b.predictions, n_resamples=100)
    assert same["ci_low"].to_list() == [0.0, 0.0] and same["ci_high"].to_list() == [0.0, 0.0]
