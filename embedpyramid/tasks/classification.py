"""Classification on frozen embeddings: do the classes separate?

Protocol (repeated stratified k-fold cross-validation, every step seeded): for each seed the
items are split into ``folds`` stratified folds (scikit-learn ``StratifiedKFold``, shuffled with
the seed), and every item is predicted once per seed, from a model fitted on the other folds:

* **kNN**: ``KNeighborsClassifier(k, metric="cosine")`` — majority vote of the ``k`` most
  cosine-similar training items (vote ties go to the label sorted first, scikit-learn's rule);
* **linear probe**: multinomial logistic regression on the unit vectors, ``C`` chosen from
  ``c_grid`` by ``inner_folds``-fold stratified cross-validation *on the training folds only*
  (``LogisticRegressionCV``, accuracy, inner folds shuffled with the same seed), then refit on
  all training folds. The chosen C of every (seed, fold) is recorded.

Per seed: accuracy and macro-F1 (scikit-learn ``accuracy_score``, ``f1_score(average="macro")``
over the labels present) of the out-of-fold predictions; the summary gives mean ± sd over
seeds. Classes with fewer than ``folds`` items cannot be stratified and are dropped (listed in
the settings). This follows SentEval's (Conneau & Kiela 2018) linear probe with C searched by
inner cross-validation, and MTEB's kNN/logistic-regression classification (Muennighoff et al.
2023), with k-fold instead of a fixed split because the embedded sets have none.

Per-item rows: the share of seeds in which each item was classified correctly (``accuracy``,
per system); its mean over items equals the mean over seeds of the accuracy. Macro-F1 is
compared with the paired statistic bootstrap (its resample kernel :func:`macro_f1_rows`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import polars as pl
from sklearn import metrics as skm
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from embedpyramid.config.tasks import ClassificationSettings
from embedpyramid.stats.statistic import StatisticComparison, paired_statistic_bootstrap
from embedpyramid.tasks.common import (
    ALL,
    PER_SEED_SCHEMA,
    TaskError,
    TaskResult,
    comparison_frame,
    paired_predictions,
    per_item_frame,
    summarize_seeds,
)
from embedpyramid.tasks.sizes import stratified_items
from embedpyramid.vectors import TextVectors

SYSTEMS = ("knn", "probe")
SPLIT = "cv"
"""``split`` of every classification row: out-of-fold predictions of the cross-validation."""


def macro_f1_rows(gold: np.ndarray, predicted: np.ndarray, n_classes: int) -> np.ndarray:
    """Macro-F1 of each row of (rows, n) integer class codes in ``[0, n_classes)``.

    Per class ``c``: ``F1_c = 2 tp_c / (n_gold_c + n_predicted_c)``; the macro average runs over
    the classes present in the row's gold or predicted labels — scikit-learn's
    ``f1_score(average="macro")`` with its default labels.
    """
    rows = gold.shape[0]
    cells = (gold + (np.arange(rows) * n_classes)[:, None]).ravel()
    predicted_cells = (predicted + (np.arange(rows) * n_classes)[:, None]).ravel()
    size = rows * n_classes
    true_positive = np.bincount(cells, weights=(gold == predicted).ravel(), minlength=size).reshape(rows, n_classes)
    support = (np.bincount(cells, minlength=size) + np.bincount(predicted_cells, minlength=size)).reshape(rows, n_classes)
    present = support > 0
    f1 = np.divide(2.0 * true_positive, support, out=np.zeros(support.shape), where=present)
    return f1.sum(axis=1) / present.sum(axis=1)


def seed_mean_macro_f1(n_classes: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The statistic compared over items: macro-F1 averaged over seeds, from (rows, n) gold
    codes and (rows, n, seeds) predicted codes."""

    def statistic(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        rows, n, seeds = predicted.shape
        flat_gold = np.repeat(gold[:, None, :], seeds, axis=1).reshape(rows * seeds, n)
        flat_predicted = predicted.transpose(0, 2, 1).reshape(rows * seeds, n)
        return macro_f1_rows(flat_gold, flat_predicted, n_classes).reshape(rows, seeds).mean(axis=1)

    return statistic


def evaluate_classification(texts: pl.DataFrame, vectors: TextVectors, settings: ClassificationSettings, *,
                            dataset: str, model: str) -> TaskResult:
    """kNN and the linear probe over every seed's stratified folds; ``texts`` holds
    ``text_id, label``."""
    kept, dropped = stratified_items(texts, settings, f"datasets.{dataset}")
    labels = sorted(kept["label"].unique().to_list())
    item_ids = kept["text_id"].to_list()
    features = vectors.unit_rows(item_ids)
    codes = kept["label"].replace_strict(labels, list(range(len(labels))), return_dtype=pl.Int64).to_numpy()
    predicted = {system: np.empty((len(item_ids), len(settings.seeds)), np.int64) for system in SYSTEMS}
    chosen_c: dict[str, list[float]] = {}
    convergence_warnings = 0
    with threadpool_limits(limits=settings.threads):
        for column, seed in enumerate(settings.seeds):
            chosen_c[str(seed)] = []
            folds = StratifiedKFold(settings.folds, shuffle=True, random_state=seed)
            for train, test in folds.split(features, codes):
                knn = KNeighborsClassifier(n_neighbors=settings.k, metric="cosine",
                                           algorithm="brute")
                predicted["knn"][test, column] = knn.fit(features[train], codes[train]).predict(features[test])
                probe = LogisticRegressionCV(
                    Cs=settings.c_grid, cv=StratifiedKFold(settings.inner_folds, shuffle=True, random_state=seed),
                    scoring="accuracy", max_iter=settings.max_iter,
                )
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    probe.fit(features[train], codes[train])
                convergence_warnings += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
                chosen_c[str(seed)].append(float(np.ravel(probe.C_)[0]))
                predicted["probe"][test, column] = probe.predict(features[test])

    seed_rows, per_item, prediction_frames = [], [], []
    for system in SYSTEMS:
        correct = predicted[system] == codes[:, None]
        per_item.append(per_item_frame(dataset, model, system, item_ids, "accuracy", correct.mean(axis=1)))
        for column, seed in enumerate(settings.seeds):
            labels_predicted = predicted[system][:, column]
            seed_rows += [
                {"system": system, "seed": seed, "metric": "accuracy",
                 "value": float(skm.accuracy_score(codes, labels_predicted))},
                {"system": system, "seed": seed, "metric": "macro_f1",
                 "value": float(skm.f1_score(codes, labels_predicted, average="macro"))},
            ]
            prediction_frames.append(pl.DataFrame({
                "item_id": item_ids, "seed": [seed] * len(item_ids), "gold": kept["label"],
                "predicted": [labels[code] for code in labels_predicted],
            }).with_columns(pl.lit(system).alias("system")))
    per_seed = pl.DataFrame(seed_rows).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), "system", pl.lit(ALL).alias("subset"),
        "seed", "metric", "value").cast(PER_SEED_SCHEMA)
    predictions = pl.concat(prediction_frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), "system", pl.lit(ALL).alias("subset"),
        "item_id", pl.col("seed").cast(pl.Int64), "gold", "predicted")
    result_settings = {
        "task": "classification", **settings.model_dump(), "labels": labels, "dropped_classes": dropped,
        "dropped_items": texts.height - kept.height, "features": "L2-normalized vectors",
        "knn": "KNeighborsClassifier(metric='cosine', algorithm='brute'), majority vote",
        "probe": "LogisticRegressionCV(lbfgs, multinomial) with C from c_grid by inner stratified CV on train folds",
        "chosen_c": chosen_c, "convergence_warnings": convergence_warnings,
        "per_item_metric": "share of seeds in which the item was classified correctly",
    }
    return TaskResult("classification", pl.concat(per_item), predictions,
                      summarize_seeds(per_seed, len(item_ids), SPLIT), per_seed, result_settings)


def compare_classification(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                           confidence: float = 0.95, seed: int = 42,
                           groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired bootstrap over items of the seed-mean macro-F1 difference (b − a), per system."""
    key = ["dataset", "system", "subset", "item_id", "seed"]
    joined = paired_predictions(predictions_a.select(*key, "gold", "model", "predicted"),
                                predictions_b.select(*key, "model", "predicted"), key, "compare_classification")
    frames = []
    for (dataset, system), group in joined.group_by("dataset", "system", maintain_order=True):
        comparison = compare_labels(group, n_resamples=n_resamples, confidence=confidence, seed=seed, groups=groups)
        frames.append(comparison_frame(comparison, ("macro_f1",), dataset=dataset, system=system, subset=ALL,
                                       split=SPLIT, model_a=group["model"][0], model_b=group["model_b"][0]))
    return pl.concat(frames)


def compare_labels(joined: pl.DataFrame, *, n_resamples: int, confidence: float, seed: int,
                   groups: dict[str, str] | None) -> StatisticComparison:
    """Paired bootstrap over items of the seed-mean macro-F1 of two models' label predictions.

    ``joined`` holds ``item_id, seed, gold, predicted, predicted_b`` with one row per item and
    seed (the same seeds for every item).
    """
    labels = sorted(set(joined["gold"]) | set(joined["predicted"]) | set(joined["predicted_b"]))
    index = {label: code for code, label in enumerate(labels)}
    wide = joined.sort("item_id", "seed")
    item_ids = wide["item_id"].unique(maintain_order=True).to_list()
    n_seeds = wide["seed"].n_unique()
    if wide.height != len(item_ids) * n_seeds:
        raise TaskError(f"every item needs a prediction for each of the {n_seeds} seeds; "
                        f"got {wide.height} rows for {len(item_ids)} items")

    def codes(column: str) -> np.ndarray:
        return np.array([index[label] for label in wide[column]], np.int64).reshape(len(item_ids), n_seeds)

    gold = codes("gold")[:, 0]
    return paired_statistic_bootstrap(
        seed_mean_macro_f1(len(labels)), (gold, codes("predicted")), (gold, codes("predicted_b")), vectorized=True,
        n_resamples=n_resamples, confidence=confidence, seed=seed,
        groups=None if groups is None else [groups[item] for item in item_ids],
    )
