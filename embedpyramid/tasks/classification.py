"""Classification on frozen embeddings: do the classes separate?

Protocol (repeated stratified k-fold cross-validation, every step seeded): for each seed the
items are split into ``folds`` stratified folds (scikit-learn ``StratifiedKFold``, shuffled with
the seed), and every item is predicted once per seed, from a model fitted on the other folds:

* **kNN**: ``KNeighborsClassifier(k)`` — majority vote of the ``k`` most similar training
  items under the card's similarity (vote ties go to the label sorted first, scikit-learn's rule);
* **linear probe**: multinomial logistic regression on the unit vectors, ``C`` chosen from
  ``c_grid`` by ``inner_folds``-fold stratified cross-validation *on the training folds only*
  (``LogisticRegressionCV``, accuracy, inner folds shuffled with the same seed), then refit on
  all training folds. The chosen C of every (seed, fold) is recorded.

Per seed: accuracy and macro-F1 (scikit-learn ``accuracy_score``, ``f1_score(average="macro")``
over the labels present) of the out-of-fold predictions; the summary gives mean ± sd over
seeds. Classes with fewer than ``folds`` items cannot be stratified and are dropped (listed in
the settings). This follows SentEval's (Conneau & Kiela 2018) linear probe with C searched by
inner cross-validation, and MTEB's kNN/logistic-regression classification (Muennighoff et al.
2023), with k-fold instead of a fixed split because the embedded sets have none — so its numbers are
*not* MTEB's. ``protocol: mteb`` (:func:`evaluate_mteb_classification`) reproduces MTEB v2:
``LogisticRegression(max_iter=100)`` on undersampled training sets over several experiments, no C
search and no kNN.

The kNN neighbours follow the card's similarity (cosine, inner product or Euclidean); the probe's
C grid is widened when the optimum sits on an edge, and a C still on the edge is reported.

Per-item rows: the share of seeds in which each item was classified correctly (``accuracy``,
per system); its mean over items equals the mean over seeds of the accuracy. Macro-F1 is
compared with the paired statistic bootstrap (its resample kernel :func:`macro_f1_rows`).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl
from sklearn import metrics as skm
from sklearn.exceptions import ConvergenceWarning, UndefinedMetricWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from embedpyramid.config.tasks import MTEB_VERSION, ClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.data.task_sizes import stratified_items
from embedpyramid.stats.statistic import StatisticComparison, paired_statistic_bootstrap
from embedpyramid.tasks.common import (
    ALL,
    PER_SEED_SCHEMA,
    TaskResult,
    comparison_frame,
    paired_predictions,
    per_item_frame,
    protocol_noise,
    summarize_seeds,
)
from embedpyramid.vectors import TextVectors

SYSTEMS = ("knn", "probe")
MTEB_SYSTEM = "logreg"
MTEB_METRICS = ("accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall", "recall_weighted")
"""MTEB's classification scores per experiment (``f1``, ``precision``, ``recall``: macro); the main
score it publishes is ``accuracy``, averaged over experiments."""
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


def knn_predict(train: np.ndarray, train_codes: np.ndarray, test: np.ndarray, k: int, similarity: str) -> np.ndarray:
    """Majority vote of the ``k`` most similar training items under the card's similarity:
    cosine (``metric="cosine"`` on the vectors), ``l2`` (Euclidean) or ``inner_product`` (a
    precomputed distance ``max(q·x) − q·x``, which orders each query's neighbours as ``q·x``)."""
    if similarity == "inner_product":
        dot_train, dot_test = train @ train.T, test @ train.T
        shift = max(float(dot_train.max()), float(dot_test.max()))
        knn = KNeighborsClassifier(n_neighbors=k, metric="precomputed", algorithm="brute")
        return knn.fit(shift - dot_train, train_codes).predict(shift - dot_test)
    metric = "euclidean" if similarity == "l2" else "cosine"
    return KNeighborsClassifier(n_neighbors=k, metric=metric, algorithm="brute").fit(train, train_codes).predict(test)


def fit_probe(features: np.ndarray, codes: np.ndarray, settings: ClassificationSettings,
              seed: int) -> tuple[LogisticRegressionCV, list[float], int, int]:
    """The probe fitted with C from the grid by inner cross-validation; a C on an edge of the grid
    widens it by a decade on that side (at most ``c_widenings`` times). Returns the probe, the
    final grid, the widenings used and the convergence warnings."""
    grid = sorted(settings.c_grid)
    widenings = warnings_seen = 0
    while True:
        probe = LogisticRegressionCV(
            Cs=grid, cv=StratifiedKFold(settings.inner_folds, shuffle=True, random_state=seed),
            scoring="accuracy", max_iter=settings.max_iter,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            probe.fit(features, codes)
        warnings_seen += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        chosen = float(np.ravel(probe.C_)[0])
        if widenings >= settings.c_widenings or len(grid) < 2 or grid[0] < chosen < grid[-1]:
            return probe, grid, widenings, warnings_seen
        grid = [*grid, grid[-1] * 10.0] if chosen >= grid[-1] else [grid[0] / 10.0, *grid]
        widenings += 1


def evaluate_classification(texts: pl.DataFrame, vectors: TextVectors, settings: ClassificationSettings, *,
                            dataset: str, model: str, similarity: str = "cosine") -> TaskResult:
    """kNN and the linear probe over every seed's stratified folds; ``texts`` holds
    ``text_id, label`` (the project protocol; ``settings.protocol == "mteb"`` runs
    :func:`evaluate_mteb_classification`)."""
    if settings.protocol == "mteb":
        return evaluate_mteb_classification(texts, vectors, settings, dataset=dataset, model=model,
                                            similarity=similarity)
    kept, dropped = stratified_items(texts, settings, f"datasets.{dataset}")
    labels = sorted(kept["label"].unique().to_list())
    item_ids = kept["text_id"].to_list()
    features = vectors.unit_rows(item_ids) if similarity == "cosine" else vectors.rows(item_ids)
    codes = kept["label"].replace_strict(labels, list(range(len(labels))), return_dtype=pl.Int64).to_numpy()
    predicted = {system: np.empty((len(item_ids), len(settings.seeds)), np.int64) for system in SYSTEMS}
    chosen_c: dict[str, list[float]] = {}
    on_edge: list[dict[str, Any]] = []
    widened = 0
    convergence_warnings = 0
    with threadpool_limits(limits=settings.threads):
        for column, seed in enumerate(settings.seeds):
            chosen_c[str(seed)] = []
            folds = StratifiedKFold(settings.folds, shuffle=True, random_state=seed)
            for fold, (train, test) in enumerate(folds.split(features, codes)):
                predicted["knn"][test, column] = knn_predict(features[train], codes[train], features[test],
                                                             settings.k, similarity)
                probe, grid, widenings, caught = fit_probe(features[train], codes[train], settings, seed)
                convergence_warnings += caught
                widened += widenings
                chosen = float(np.ravel(probe.C_)[0])
                chosen_c[str(seed)].append(chosen)
                if chosen in (grid[0], grid[-1]) and len(grid) > 1:
                    on_edge.append({"seed": seed, "fold": fold, "c": chosen, "grid": grid})
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
        "dropped_items": texts.height - kept.height, "similarity": similarity,
        "features": "L2-normalized vectors" if similarity == "cosine" else "the vectors as produced",
        "knn": f"KNeighborsClassifier(algorithm='brute') under the card's similarity ({similarity}), majority vote",
        "probe": "LogisticRegressionCV(lbfgs, multinomial) with C from c_grid by inner stratified CV on train folds, "
                 "the grid widened by a decade on the side of an edge optimum (at most c_widenings times)",
        "chosen_c": chosen_c, "c_widenings_used": widened, "c_on_edge": on_edge,
        "c_warning": (f"the chosen C sits on an edge of the (widened) grid in {len(on_edge)} of "
                      f"{sum(map(len, chosen_c.values()))} folds: widen c_grid" if on_edge else None),
        "convergence_warnings": convergence_warnings,
        "per_item_metric": "share of seeds in which the item was classified correctly",
    }
    return TaskResult("classification", pl.concat(per_item), predictions,
                      summarize_seeds(per_seed, len(item_ids), SPLIT), per_seed, result_settings)


def mteb_undersample(labels: Sequence[Any], samples_per_label: int, seed: int,
                     order: list[int] | None = None) -> tuple[list[int], list[int]]:
    """MTEB's ``_undersample_data``: ``order`` (``range(len(labels))`` when None) shuffled in place
    by a fresh ``numpy.random.RandomState(seed)``, then the first ``samples_per_label`` items of
    each label in that order. Returns (the selected indices, the shuffled order, which MTEB
    passes to the next experiment to be shuffled again)."""
    order = list(range(len(labels))) if order is None else order
    np.random.RandomState(seed).shuffle(order)
    counts: dict[Any, int] = defaultdict(int)
    selected = []
    for index in order:
        if counts[labels[index]] < samples_per_label:
            selected.append(index)
            counts[labels[index]] += 1
    return selected, order


def mteb_scores(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """One experiment's scores as MTEB's ``_calculate_scores`` computes them (scikit-learn defaults)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return {
            "accuracy": float(skm.accuracy_score(gold, predicted)),
            "f1": float(skm.f1_score(gold, predicted, average="macro")),
            "f1_weighted": float(skm.f1_score(gold, predicted, average="weighted")),
            "precision": float(skm.precision_score(gold, predicted, average="macro")),
            "precision_weighted": float(skm.precision_score(gold, predicted, average="weighted")),
            "recall": float(skm.recall_score(gold, predicted, average="macro")),
            "recall_weighted": float(skm.recall_score(gold, predicted, average="weighted")),
        }


def mteb_labels(labels: list[str]) -> np.ndarray:
    """The labels as MTEB's datasets hold them: integers when every label is one (the order
    scikit-learn sorts classes in then matches), else the strings."""
    try:
        return np.array([int(label) for label in labels], dtype=np.int64)
    except ValueError:
        return np.array(labels, dtype=object)


def evaluate_mteb_classification(texts: pl.DataFrame, vectors: TextVectors, settings: ClassificationSettings, *,
                                 dataset: str, model: str, similarity: str = "cosine") -> TaskResult:
    """MTEB's classification protocol (``AbsTaskClassification``, mteb 2.26), on the vectors as the
    card produced them (MTEB's classifier sees the raw embeddings whatever the similarity).

    With a ``split`` column holding ``settings.mteb.train_split`` and ``eval_split``: for each of
    ``n_experiments`` experiments an undersampled training set (:func:`mteb_undersample`, the
    shuffled order carried from one experiment to the next, as MTEB does), a fresh
    ``LogisticRegression(max_iter, random_state=seed)`` fitted on it and scored on the whole eval
    split. Without one, MTEB's cross-validation: ``KFold(n_splits, shuffle=True,
    random_state=seed)`` over the items in text-id order, each fold's training part undersampled
    the same way. Scores (:func:`mteb_scores`) are averaged over experiments (folds); ``accuracy``
    is the main score. Items are in text-id order, the row order MTEB would see.
    """
    mteb = settings.mteb
    ordered = texts.sort("text_id")
    item_ids = ordered["text_id"].to_list()
    labels = mteb_labels(ordered["label"].to_list())
    original = dict(zip(labels.tolist(), ordered["label"].to_list(), strict=True))
    features = vectors.rows(item_ids)
    splits = set(ordered["split"].to_list()) if "split" in ordered.columns else set()
    experiments: list[tuple[np.ndarray, np.ndarray]] = []
    if {mteb.train_split, mteb.eval_split} <= splits:
        split = mteb.eval_split
        train_rows = np.flatnonzero((ordered["split"] == mteb.train_split).to_numpy())
        test_rows = np.flatnonzero((ordered["split"] == mteb.eval_split).to_numpy())
        order = None
        for _ in range(mteb.n_experiments):
            selected, order = mteb_undersample(labels[train_rows], mteb.samples_per_label, mteb.seed, order)
            experiments.append((train_rows[selected], test_rows))
        design = f"{mteb.n_experiments} undersampled experiments, train split {mteb.train_split!r}"
    else:
        split = "cv"
        order = None
        for train_rows, test_rows in KFold(mteb.n_splits, shuffle=True, random_state=mteb.seed).split(item_ids):
            selected, order = mteb_undersample(labels[train_rows], mteb.samples_per_label, mteb.seed, order)
            experiments.append((train_rows[selected], test_rows))
        design = f"MTEB cross-validation: KFold({mteb.n_splits}, shuffle=True), one undersampled experiment per fold"
    seed_rows, frames = [], []
    convergence_warnings = 0
    predicted_share: dict[str, list[bool]] = defaultdict(list)
    with threadpool_limits(limits=settings.threads):
        for experiment, (train_rows, test_rows) in enumerate(experiments):
            classifier = LogisticRegression(max_iter=mteb.max_iter, random_state=mteb.seed)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                classifier.fit(features[train_rows], labels[train_rows])
            convergence_warnings += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            predicted = classifier.predict(features[test_rows])
            seed_rows += [{"seed": experiment, "metric": metric, "value": value}
                          for metric, value in mteb_scores(labels[test_rows], predicted).items()]
            test_ids = [item_ids[row] for row in test_rows]
            for item, gold, guess in zip(test_ids, labels[test_rows].tolist(), predicted.tolist(), strict=True):
                predicted_share[item].append(gold == guess)
            frames.append(pl.DataFrame({
                "item_id": test_ids, "seed": [0 if split == "cv" else experiment] * len(test_ids),
                "gold": [original[g] for g in labels[test_rows].tolist()],
                "predicted": [original[p] for p in predicted.tolist()],
            }))
    per_seed = pl.DataFrame(seed_rows).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(MTEB_SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("seed").cast(pl.Int64), "metric", "value").cast(PER_SEED_SCHEMA)
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(MTEB_SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), "item_id", pl.col("seed").cast(pl.Int64), "gold", "predicted")
    scored = sorted(predicted_share)
    per_item = per_item_frame(dataset, model, MTEB_SYSTEM, scored, "accuracy",
                              np.array([np.mean(predicted_share[item]) for item in scored]))
    n_evaluated = len(experiments[0][1]) if split != "cv" else len(item_ids)
    result_settings = {
        "task": "classification", **settings.model_dump(), "similarity": similarity, "mteb_version": MTEB_VERSION,
        "design": design, "features": "the vectors as produced (MTEB)",
        "classifier": f"LogisticRegression(max_iter={mteb.max_iter}, random_state={mteb.seed}), no C search",
        "main_score": {"system": MTEB_SYSTEM, "metric": "accuracy", "mteb_key": "accuracy"},
        "training_sizes": [len(train) for train, _ in experiments], "convergence_warnings": convergence_warnings,
        "per_item_metric": "share of experiments in which the item was classified correctly",
    }
    summary = summarize_seeds(per_seed, n_evaluated, split)
    if mteb.noise_seeds:
        def rerun(seed: int) -> pl.DataFrame:
            again = settings.model_copy(update={"mteb": mteb.model_copy(update={"seed": seed, "noise_seeds": 0})})
            return evaluate_mteb_classification(texts, vectors, again, dataset=dataset, model=model,
                                                similarity=similarity).summary

        result_settings["noise"] = protocol_noise(mteb.seed, summary, rerun, mteb.noise_seeds, system=MTEB_SYSTEM,
                                                  metrics=("accuracy", "f1"))
    return TaskResult("classification", per_item, predictions, summary, per_seed, result_settings)


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
