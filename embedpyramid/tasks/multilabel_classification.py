"""Multi-label classification: is each text's *set* of labels recoverable from its vector?

Under MTEB's protocol (``AbsTaskMultilabelClassification``, mteb 2.26; the only protocol of this
family): ``n_experiments`` times, a training set is drawn from the train split — its row indices
shuffled by one ``numpy.random.default_rng(seed)`` (the same generator across experiments), an
item kept when one of its labels has fewer than ``samples_per_label`` items so far — and a
``KNeighborsClassifier(n_neighbors)`` (Euclidean, on the vectors as the card produced them) is
fitted on the label sets binarized over the eval split's labels (``MultiLabelBinarizer``; a
training label the eval split lacks is ignored). On the eval split, per experiment:

* ``accuracy``: subset accuracy, the share of items whose predicted set equals the gold set
  (MTEB's main score; ``KNeighborsClassifier.score``);
* ``lrap``: label ranking average precision (scikit-learn) of the 0/1 predictions;
* ``f1``: macro F1 over the labels (scikit-learn, ``zero_division`` default);
* ``hamming``: MTEB's ``hamming_score``, the mean over items of |gold ∩ predicted| / |gold ∪
  predicted| (1 when both are empty);

each averaged over the experiments. Per item: the share of experiments whose predicted set equals
its gold set (``accuracy``), whose mean over items is the mean accuracy. MTEB cuts an eval split
above ``max_eval_samples`` by iterative stratification; that cut is not reproduced, so such a
split is refused rather than scored differently.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl
from sklearn import metrics as skm
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import MultiLabelBinarizer
from threadpoolctl import threadpool_limits

from embedpyramid.config.tasks import MTEB_VERSION, MultilabelClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.tasks.common import (
    ALL,
    PER_SEED_SCHEMA,
    STATISTIC_COMPARISON_SCHEMA,
    TaskResult,
    per_item_frame,
    protocol_noise,
    summarize_seeds,
)
from embedpyramid.vectors import TextVectors

SYSTEM = "knn"
METRICS = ("accuracy", "lrap", "f1", "hamming")


def mteb_multilabel_undersample(labels: list[list[Any]], samples_per_label: int,
                                rng: np.random.Generator) -> list[int]:
    """One experiment's training rows, as MTEB's ``_undersample_data_indices`` draws them: the
    row indices shuffled by ``rng`` (whose state carries over to the next experiment), each row
    kept when one of its labels has fewer than ``samples_per_label`` rows so far."""
    order = list(np.arange(len(labels)))
    rng.shuffle(order)
    counts: dict[Any, int] = defaultdict(int)
    selected = []
    for row in order:
        if any(counts[label] < samples_per_label for label in labels[row]):
            selected.append(int(row))
            for label in labels[row]:
                counts[label] += 1
    return selected


def hamming_score(gold: np.ndarray, predicted: np.ndarray) -> float:
    """MTEB's Hamming score: mean over items of |gold ∩ predicted| / |gold ∪ predicted|, 1 for an
    item whose gold and predicted sets are both empty."""
    gold, predicted = gold.astype(bool), predicted.astype(bool)
    both, either = (gold & predicted).sum(axis=1), (gold | predicted).sum(axis=1)
    return float(np.where(either == 0, 1.0, both / np.maximum(either, 1)).mean())


def multilabel_scores(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """One experiment's scores as MTEB's ``_calculate_scores`` computes them for a kNN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return {"accuracy": float(skm.accuracy_score(gold, predicted)),
                "lrap": float(skm.label_ranking_average_precision_score(gold, predicted)),
                "f1": float(skm.f1_score(gold, predicted, average="macro")),
                "hamming": hamming_score(gold, predicted)}


def evaluate_multilabel_classification(texts: pl.DataFrame, vectors: TextVectors,
                                       settings: MultilabelClassificationSettings, *, dataset: str, model: str,
                                       similarity: str = "cosine") -> TaskResult:
    """MTEB's multi-label classification (see the module docstring) over ``texts``: ``text_id``,
    ``label`` (a JSON list of labels) and ``split`` (the train and eval splits of
    ``settings.mteb``), items in text-id order (MTEB's row order)."""
    mteb = settings.mteb
    if "split" not in texts.columns or not {mteb.train_split, mteb.eval_split} <= set(texts["split"].to_list()):
        found = sorted(set(texts["split"].to_list())) if "split" in texts.columns else []
        raise TaskError(f"{dataset}: multi-label classification trains on split {mteb.train_split!r} and scores split "
                        f"{mteb.eval_split!r}; the dataset has {', '.join(found) or 'no splits'} — set "
                        "multilabel_classification.mteb.train_split / eval_split")
    ordered = texts.sort("text_id")
    train = ordered.filter(pl.col("split") == mteb.train_split)
    test = ordered.filter(pl.col("split") == mteb.eval_split)
    if mteb.max_eval_samples is not None and test.height > mteb.max_eval_samples:
        raise TaskError(f"{dataset}: the eval split has {test.height} items, above max_eval_samples "
                        f"({mteb.max_eval_samples}): MTEB cuts it by iterative stratification, which is not reproduced "
                        "here; set multilabel_classification.mteb.max_eval_samples: null to score the whole split "
                        "(not MTEB's number)")
    train_labels = [json.loads(value) for value in train["label"]]
    test_labels = [json.loads(value) for value in test["label"]]
    binarizer = MultiLabelBinarizer()
    gold = binarizer.fit_transform(test_labels)
    train_features, test_features = vectors.rows(train["text_id"].to_list()), vectors.rows(test["text_id"].to_list())
    rng = np.random.default_rng(mteb.seed)
    test_ids = test["text_id"].to_list()
    seed_rows, frames = [], []
    correct = np.zeros(len(test_ids))
    sizes = []
    with threadpool_limits(limits=settings.threads), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="unknown class", category=UserWarning)
        for experiment in range(mteb.n_experiments):
            rows = mteb_multilabel_undersample(train_labels, mteb.samples_per_label, rng)
            sizes.append(len(rows))
            classifier = KNeighborsClassifier(n_neighbors=mteb.n_neighbors)
            classifier.fit(train_features[rows], binarizer.transform([train_labels[row] for row in rows]))
            predicted = np.asarray(classifier.predict(test_features))
            seed_rows += [{"seed": experiment, "metric": metric, "value": value}
                          for metric, value in multilabel_scores(gold, predicted).items()]
            correct += (predicted == gold).all(axis=1)
            frames.append(pl.DataFrame({
                "item_id": test_ids, "seed": [experiment] * len(test_ids), "gold": list(test["label"]),
                "predicted": [json.dumps(binarizer.classes_[np.flatnonzero(row)].tolist()) for row in predicted],
            }))
    per_seed = pl.DataFrame(seed_rows).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("seed").cast(pl.Int64), "metric", "value").cast(PER_SEED_SCHEMA)
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), "item_id", pl.col("seed").cast(pl.Int64), "gold", "predicted")
    per_item = per_item_frame(dataset, model, SYSTEM, test_ids, "accuracy", correct / mteb.n_experiments)
    summary = summarize_seeds(per_seed, len(test_ids), mteb.eval_split)
    result_settings: dict[str, Any] = {
        "task": "multilabel_classification", **settings.model_dump(), "similarity": similarity,
        "mteb_version": MTEB_VERSION, "features": "the vectors as produced (MTEB)",
        "classifier": f"KNeighborsClassifier(n_neighbors={mteb.n_neighbors}) on MultiLabelBinarizer label sets",
        "main_score": {"system": SYSTEM, "metric": "accuracy", "mteb_key": "accuracy"},
        "labels": len(binarizer.classes_), "training_sizes": sizes,
        "per_item_metric": "share of experiments whose predicted label set equals the item's",
    }
    if mteb.noise_seeds:
        def rerun(seed: int) -> pl.DataFrame:
            again = settings.model_copy(update={"mteb": mteb.model_copy(update={"seed": seed, "noise_seeds": 0})})
            return evaluate_multilabel_classification(texts, vectors, again, dataset=dataset, model=model,
                                                      similarity=similarity).summary

        result_settings["noise"] = protocol_noise(mteb.seed, summary, rerun, mteb.noise_seeds, system=SYSTEM,
                                                  metrics=METRICS)
    return TaskResult("multilabel_classification", per_item, predictions, summary, per_seed, result_settings)


def compare_multilabel_classification(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *,
                                      n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 42,
                                      groups: dict[str, str] | None = None) -> pl.DataFrame:
    """No statistic comparison: the main score, subset accuracy, is a mean of the per-item rows,
    which the paired comparisons of the task summary compare (as retrieval's per-query values)."""
    return pl.DataFrame(schema=STATISTIC_COMPARISON_SCHEMA)
