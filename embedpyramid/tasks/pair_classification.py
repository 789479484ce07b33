"""Pair classification: does the model find duplicates?

A pair is scored by the card's similarity of its two texts (cosine by default; inner product or
negative Euclidean distance) and predicted positive when the score is at least a threshold.

* **Average precision** (threshold-free) of the cosines against the gold labels:
  ``AP = sum_t (R_t - R_{t-1}) P_t`` over the distinct scores ``t`` in decreasing order, with
  ``P_t``/``R_t`` the precision/recall of ``score >= t`` — scikit-learn's
  ``average_precision_score`` (no interpolation; tied scores form one step).
* **F1, accuracy, precision, recall at a threshold chosen on dev**: every distinct dev cosine
  ``s`` is a candidate (``score >= s`` is positive); the candidate that maximizes
  ``threshold_metric`` (F1 or accuracy) on dev wins, ties going to the highest (most
  conservative) candidate; the threshold applied is the midpoint between the winner and the
  next lower distinct dev cosine, so it predicts exactly the same dev pairs. It is then applied
  **unchanged** to test — never re-tuned there — and the summary names the split that chose it
  (the dev values at that threshold are optimistic by construction and reported as such).
  Metrics from scikit-learn (``f1_score``, ``accuracy_score``, ``precision_score``,
  ``recall_score``; ``zero_division=0``). This is MTEB's pair-classification protocol
  (Muennighoff et al. 2023) with the threshold moved off the test split.

Per-item rows: each test pair's correctness at the dev threshold (``accuracy``), for the paired
per-item machinery. AP, F1, precision and recall are compared with the paired bootstrap of the
statistic over test pairs, using the vectorized kernels below (checked against scikit-learn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from sklearn import metrics as skm
from sklearn.metrics import pairwise

from embedpyramid.config.tasks import MTEB_VERSION, PairClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.stats.statistic import paired_statistic_bootstrap
from embedpyramid.tasks.common import (
    ALL,
    SCORE_RULE,
    TaskResult,
    compared_system,
    comparison_frame,
    empty_per_seed,
    mteb_pair_similarity,
    paired_predictions,
    per_item_frame,
    summary_frame,
    system_name,
)
from embedpyramid.vectors import TextVectors, pair_similarities

MIN_DEV_PAIRS = 100
MIN_DEV_POSITIVES = 10
"""Below either, a dev split is too small to choose a threshold reliably: flagged in the result."""
MTEB_SCORINGS = ("similarity", "cosine", "manhattan", "euclidean", "dot")
"""MTEB's pair scorings (``AbsTaskPairClassification._compute_metrics``), in its order."""
MTEB_METRICS = ("accuracy", "f1", "precision", "recall", "ap")
COMPARED = ("ap", "f1", "precision", "recall")
"""Statistics compared by the paired statistic bootstrap (accuracy is a per-item mean)."""


@dataclass(frozen=True)
class Threshold:
    """The dev-chosen threshold (``cosine >= value`` is positive), the metric it maximized and
    that metric's value on dev."""

    value: float
    metric: str
    dev_value: float


def choose_threshold(scores: np.ndarray, gold: np.ndarray, metric: str = "f1") -> Threshold:
    """The threshold maximizing ``metric`` (``f1`` or ``accuracy``) on these (dev) pairs; see the
    module docstring for the candidates, ties and the midpoint."""
    if metric not in ("f1", "accuracy"):
        raise TaskError(f"threshold metric {metric!r} is not supported; allowed: f1, accuracy")
    gold = np.asarray(gold).astype(bool)
    positives, negatives = int(gold.sum()), int((~gold).sum())
    if positives == 0 or negatives == 0:
        raise TaskError(f"the dev split needs positive and negative pairs to choose a threshold; "
                        f"it has {positives} positive and {negatives} negative")
    fpr, tpr, candidates = skm.roc_curve(gold, scores, drop_intermediate=False)
    # roc_curve starts at +inf (nothing predicted positive); a threshold must predict something.
    tp, fp = np.rint(tpr[1:] * positives), np.rint(fpr[1:] * negatives)
    candidates = candidates[1:]
    if metric == "f1":
        objective = 2 * tp / (2 * tp + fp + (positives - tp))
    else:
        objective = (tp + negatives - fp) / (positives + negatives)
    best = int(np.argmax(objective))  # candidates decrease: the first maximum is the highest
    value = candidates[best] if best + 1 == len(candidates) else (candidates[best] + candidates[best + 1]) / 2
    return Threshold(float(value), metric, float(objective[best]))


def threshold_metrics(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """F1, accuracy, precision and recall of fixed 0/1 predictions (scikit-learn, zero_division=0)."""
    return {
        "f1": float(skm.f1_score(gold, predicted, zero_division=0)),
        "accuracy": float(skm.accuracy_score(gold, predicted)),
        "precision": float(skm.precision_score(gold, predicted, zero_division=0)),
        "recall": float(skm.recall_score(gold, predicted, zero_division=0)),
    }


def average_precision_rows(gold: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Average precision of each row of (rows, n) 0/1 ``gold`` and ``score``, as scikit-learn's
    ``average_precision_score`` computes it (tied scores are one step); NaN for a row without
    positives."""
    order = np.argsort(-score, axis=-1, kind="stable")
    sorted_score = np.take_along_axis(score, order, axis=-1)
    hits = np.take_along_axis(gold, order, axis=-1).astype(np.float64)
    cumulative_hits = np.cumsum(hits, axis=-1)
    n = score.shape[-1]
    # A step ends where the next score differs (or at the last item).
    step_end = np.ones(score.shape, dtype=bool)
    step_end[..., :-1] = sorted_score[..., :-1] != sorted_score[..., 1:]
    at_ends = np.where(step_end, cumulative_hits, 0.0)
    previous = np.zeros(score.shape)
    previous[..., 1:] = np.maximum.accumulate(at_ends, axis=-1)[..., :-1]
    precision = cumulative_hits / np.arange(1, n + 1)
    total = cumulative_hits[..., -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(step_end, (cumulative_hits - previous) * precision, 0.0).sum(axis=-1) / np.where(
            total > 0, total, np.nan)


def binary_metrics_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """``[f1, precision, recall]`` of each row of (rows, n) 0/1 arrays, zero_division=0 as in
    scikit-learn: ``f1 = 2tp / (2tp + fp + fn)``, ``precision = tp / (tp + fp)``,
    ``recall = tp / (tp + fn)``."""
    gold, predicted = gold.astype(bool), predicted.astype(bool)
    tp = np.count_nonzero(gold & predicted, axis=-1).astype(np.float64)
    fp = np.count_nonzero(~gold & predicted, axis=-1)
    fn = np.count_nonzero(gold & ~predicted, axis=-1)

    def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
        return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)

    return np.stack([ratio(2 * tp, 2 * tp + fp + fn), ratio(tp, tp + fp), ratio(tp, tp + fn)], axis=-1)


def compared_statistics(gold: np.ndarray, score: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """``[ap, f1, precision, recall]`` per row of (rows, n) arrays (the :data:`COMPARED` kernel)."""
    return np.concatenate([average_precision_rows(gold, score)[..., None], binary_metrics_rows(gold, predicted)],
                          axis=-1)


def dev_warning(gold: np.ndarray) -> str | None:
    """Why a dev split is too small to choose a threshold (fewer than :data:`MIN_DEV_PAIRS` pairs or
    :data:`MIN_DEV_POSITIVES` positives), or None."""
    positives = int(np.asarray(gold).astype(bool).sum())
    if len(gold) >= MIN_DEV_PAIRS and positives >= MIN_DEV_POSITIVES:
        return None
    return (f"the dev split has {len(gold)} pairs ({positives} positive): below {MIN_DEV_PAIRS} pairs or "
            f"{MIN_DEV_POSITIVES} positives the chosen threshold is unreliable; the test F1, accuracy, "
            "precision and recall at it are too")


def evaluate_pair_classification(pairs: pl.DataFrame, vectors: TextVectors, settings: PairClassificationSettings,
                                 *, dataset: str, model: str, similarity: str = "cosine") -> TaskResult:
    """Choose the threshold on the dev pairs, apply it unchanged to the test pairs (the project
    protocol; ``settings.protocol == "mteb"`` runs :func:`evaluate_mteb_pair_classification`).

    ``pairs`` holds ``pair_id, text_id_1, text_id_2, gold (1/0), split (dev/test)``.
    """
    if settings.protocol == "mteb":
        return evaluate_mteb_pair_classification(pairs, vectors, settings, dataset=dataset, model=model,
                                                 similarity=similarity)
    splits = set(pairs["split"].unique())
    if not {"dev", "test"} <= splits:
        raise TaskError(f"{dataset}: pair classification needs dev and test pairs; the splits are {sorted(splits)}")
    system = system_name(similarity)
    score = pair_similarities(vectors, pairs["text_id_1"].to_list(), pairs["text_id_2"].to_list(), similarity)
    scored = pairs.select("pair_id", "split", "gold").with_columns(pl.Series("score", score))
    dev = scored.filter(pl.col("split") == "dev")
    threshold = choose_threshold(dev["score"].to_numpy(), dev["gold"].to_numpy(), settings.threshold_metric)
    warning = dev_warning(dev["gold"].to_numpy())
    predictions = scored.select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(system).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("pair_id").alias("item_id"), "split",
        pl.col("gold").cast(pl.Int64), "score", (pl.col("score") >= threshold.value).cast(pl.Int64).alias("predicted"),
    )
    rows = []
    for split in ("dev", "test"):
        part = predictions.filter(pl.col("split") == split)
        gold, predicted = part["gold"].to_numpy(), part["predicted"].to_numpy()
        values = {"ap": float(skm.average_precision_score(gold, part["score"].to_numpy())),
                  **threshold_metrics(gold, predicted), "threshold": threshold.value}
        rows += [{"dataset": dataset, "model": model, "system": system, "subset": ALL, "split": split,
                  "metric": metric, "value": value, "n_items": part.height} for metric, value in values.items()]
    test = predictions.filter(pl.col("split") == "test")
    per_item = per_item_frame(dataset, model, system, test["item_id"].to_list(), "accuracy",
                              (test["gold"] == test["predicted"]).to_numpy())
    result_settings = {
        "task": "pair_classification", **settings.model_dump(), "similarity": similarity,
        "score": SCORE_RULE[similarity], "dev_warning": warning,
        "threshold": {"value": threshold.value, "chosen_on": "dev", "applied_to": "test", "metric": threshold.metric,
                      "dev_value": threshold.dev_value, "rule": "score >= threshold is positive; midpoint between "
                      "the best dev score and the next lower one; ties go to the highest candidate"},
        "metrics": "scikit-learn average_precision_score, f1/accuracy/precision/recall (zero_division=0)",
        "per_item_metric": "accuracy of each test pair at the dev threshold",
        "n_pairs": {split: int((pairs["split"] == split).sum()) for split in ("dev", "test")},
    }
    return TaskResult("pair_classification", per_item, predictions, summary_frame(rows), empty_per_seed(),
                      result_settings)


def mteb_best_accuracy(scores: np.ndarray, gold: np.ndarray, high_score_more_similar: bool) -> float:
    """MTEB's ``_find_best_acc_and_threshold``: the rows sorted by score (decreasing when higher is
    more similar), every cut between two *distinct* consecutive scores a candidate (never after
    the last row), the first best accuracy kept (0 when no cut exists)."""
    order = np.argsort(-scores if high_score_more_similar else scores, kind="stable")
    ranked, hits = scores[order], gold[order].astype(np.int64)
    cut = ranked[:-1] != ranked[1:]
    positives = np.cumsum(hits)[:-1]
    remaining_negatives = int((gold == 0).sum()) - np.cumsum(1 - hits)[:-1]
    accuracy = (positives + remaining_negatives) / len(gold)
    candidates = accuracy[cut]
    return float(candidates.max()) if candidates.size and candidates.max() > 0 else 0.0


def mteb_best_f1(scores: np.ndarray, gold: np.ndarray, high_score_more_similar: bool) -> tuple[float, float, float, float]:
    """MTEB's ``_find_best_f1_and_threshold``: ``(f1, precision, recall, threshold)`` at the first
    best cut between distinct consecutive scores with at least one positive above it; the
    threshold is the midpoint of the two scores (0 and zeros when no cut has a positive)."""
    order = np.argsort(-scores if high_score_more_similar else scores, kind="stable")
    ranked, hits = scores[order], gold[order].astype(np.int64)
    correct = np.cumsum(hits)[:-1].astype(np.float64)
    counted = np.arange(1, len(gold), dtype=np.float64)
    valid = (ranked[:-1] != ranked[1:]) & (correct > 0)
    total = float(gold.sum())
    if not valid.any() or total == 0:
        return 0.0, 0.0, 0.0, 0.0
    precision, recall = correct / counted, correct / total
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(valid, 2 * precision * recall / (precision + recall), -np.inf)
    best = int(np.argmax(f1))
    if f1[best] <= 0:
        return 0.0, 0.0, 0.0, 0.0
    return float(f1[best]), float(precision[best]), float(recall[best]), float((ranked[best] + ranked[best + 1]) / 2)


def mteb_scores(first: np.ndarray, second: np.ndarray, similarity: str) -> dict[str, tuple[np.ndarray, bool]]:
    """Each MTEB scoring of the pairs, as ``(scores, high_score_more_similar)``: the card's
    similarity, cosine (``1 − paired_cosine_distances``), Manhattan and Euclidean distances
    (lower is more similar) and the dot product — on the vectors as the card produced them."""
    dot = np.asarray([np.dot(first[i], second[i]) for i in range(len(first))])
    similar = mteb_pair_similarity(first, second, similarity)
    return {
        "similarity": (similar, True),
        "cosine": (1 - pairwise.paired_cosine_distances(first, second), True),
        "manhattan": (pairwise.paired_manhattan_distances(first, second), False),
        "euclidean": (pairwise.paired_euclidean_distances(first, second), False),
        "dot": (dot, True),
    }


def mteb_split_metrics(scores: dict[str, tuple[np.ndarray, bool]], gold: np.ndarray) -> dict[str, dict[str, float]]:
    """``{scoring: {accuracy, f1, precision, recall, ap}}`` and ``max`` (the maximum over the
    scorings of each metric), as MTEB's ``_compute_metrics`` reports them on one split."""
    found: dict[str, dict[str, float]] = {}
    for name, (values, higher) in scores.items():
        f1, precision, recall, _ = mteb_best_f1(values, gold, higher)
        found[name] = {"accuracy": mteb_best_accuracy(values, gold, higher), "f1": f1, "precision": precision,
                       "recall": recall,
                       "ap": float(skm.average_precision_score(gold, values * (1 if higher else -1)))}
    found["max"] = {metric: max(found[name][metric] for name in scores) for metric in MTEB_METRICS}
    return found


def evaluate_mteb_pair_classification(pairs: pl.DataFrame, vectors: TextVectors,
                                      settings: PairClassificationSettings, *, dataset: str, model: str,
                                      similarity: str = "cosine") -> TaskResult:
    """MTEB's pair-classification protocol (``AbsTaskPairClassification``, mteb 2.26), each split
    on its own: five scorings (:func:`mteb_scores`), for each the best accuracy and the best F1
    (with its precision and recall) over the thresholds *of that split* and the average
    precision; ``max`` of each metric over the scorings. The main score MTEB publishes is
    ``max_ap`` (``system: max, metric: ap`` here). Reported on every split, dev included, as
    MTEB would — none of these is a held-out number.

    Predictions (for the paired comparisons) are the cosine scores, predicted positive above the
    split's best-F1 cosine threshold; per-item rows are each test pair's correctness there.
    """
    first, second = vectors.rows(pairs["text_id_1"].to_list()), vectors.rows(pairs["text_id_2"].to_list())
    scores = mteb_scores(first, second, similarity)
    gold_all = pairs["gold"].to_numpy().astype(np.int64)
    rows, frames = [], []
    for split in pairs["split"].unique(maintain_order=True).to_list():
        where = (pairs["split"] == split).to_numpy()
        gold = gold_all[where]
        split_scores = {name: (values[where], higher) for name, (values, higher) in scores.items()}
        for system, values in mteb_split_metrics(split_scores, gold).items():
            rows += [{"dataset": dataset, "model": model, "system": system, "subset": ALL, "split": split,
                      "metric": metric, "value": value, "n_items": int(where.sum())} for metric, value in values.items()]
        cosine = split_scores["cosine"][0]
        threshold = mteb_best_f1(cosine, gold, True)[3]
        frames.append(pl.DataFrame({"item_id": pairs["pair_id"].filter(pl.Series(where)), "split": split,
                                    "gold": gold, "score": np.asarray(cosine, np.float64),
                                    "predicted": (cosine > threshold).astype(np.int64)}))
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit("cosine").alias("system"),
        pl.lit(ALL).alias("subset"), "item_id", "split", "gold", "score", "predicted")
    test = predictions.filter(pl.col("split") == "test")
    per_item = per_item_frame(dataset, model, "cosine", test["item_id"].to_list(), "accuracy",
                              (test["gold"] == test["predicted"]).to_numpy())
    result_settings = {
        "task": "pair_classification", **settings.model_dump(), "similarity": similarity, "mteb_version": MTEB_VERSION,
        "score": "similarity (the card's), cosine, manhattan, euclidean, dot on the vectors as produced",
        "threshold": "the best of each split on that split (MTEB): optimistic, not held out",
        "main_score": {"system": "max", "metric": "ap", "mteb_key": "max_ap"},
        "n_pairs": {split: int((pairs["split"] == split).sum()) for split in pairs["split"].unique().sort()},
    }
    return TaskResult("pair_classification", per_item, predictions, summary_frame(rows), empty_per_seed(),
                      result_settings)


def compare_pair_classification(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *,
                                n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 42,
                                groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired bootstrap over test pairs of the AP, F1, precision and recall differences (b − a),
    each model at its own dev threshold."""
    key = ["dataset", "subset", "split", "item_id"]
    columns = ["model", "system", "score", "predicted"]
    test_a, test_b = (frame.filter(pl.col("split") == "test") for frame in (predictions_a, predictions_b))
    joined = paired_predictions(test_a.select(*key, "gold", *columns), test_b.select(*key, *columns), key,
                                "compare_pair_classification")
    gold = joined["gold"].to_numpy()
    comparison = paired_statistic_bootstrap(
        compared_statistics,
        (gold, joined["score"].to_numpy(), joined["predicted"].to_numpy()),
        (gold, joined["score_b"].to_numpy(), joined["predicted_b"].to_numpy()),
        vectorized=True, n_resamples=n_resamples, confidence=confidence, seed=seed,
        groups=None if groups is None else [groups[item] for item in joined["item_id"]],
    )
    return comparison_frame(comparison, COMPARED, dataset=joined["dataset"][0], system=compared_system(joined),
                            subset=ALL,
                            split="test", model_a=joined["model"][0], model_b=joined["model_b"][0])
