"""Bitext mining: does the model find translations?

For each language pair, every source sentence looks for its translation among *all* target
sentences of that pair (the gold is its own translation); the best-scoring target is the match
(ties go to the target with the smaller id). Three scorings of a source ``x`` and a target ``y``,
from the cosines of unit vectors:

* ``nearest``: ``cos(x, y)``;
* ``margin`` — the ratio margin of Artetxe & Schwenk (2019, ACL, eq. 3):
  ``cos(x, y) / ((r_T(x) + r_S(y)) / 2)``;
* ``csls`` — cross-domain similarity local scaling (Conneau et al. 2018, ICLR, eq. 6):
  ``2 cos(x, y) - r_T(x) - r_S(y)``;

where ``r_T(x)`` is the mean cosine of ``x`` to its ``k`` nearest targets and ``r_S(y)`` the
mean cosine of ``y`` to its ``k`` nearest sources (``k`` clipped to the number of sentences).
Both penalize *hubs*, targets that are near everything and steal other sources' matches.

Per scoring and language pair: accuracy (share of sources matched to their translation) and
macro-averaged F1, precision and recall with the distinct target texts as classes
(scikit-learn, ``zero_division=0``) — a hub predicted for many sources is a class with low
precision. This is *not* the F1 MTEB publishes, which is weighted and keeps duplicate target
rows apart: ``protocol: mteb`` (:func:`evaluate_mteb_bitext`) reproduces it. Hubness of each scoring: the k-occurrence
``N_k(y)``, the number of sources whose top ``hubness_k`` targets include ``y``; its skewness
(Radovanović, Nanopoulos & Ivanović 2010, JMLR; ``scipy.stats.skew``), the share of targets
that are in no source's top ``hubness_k`` (anti-hubs) and the largest ``N_k``.

Per-item rows: each source's match (``accuracy``, 1 or 0) per scoring (``system``), keyed by the
pair id, for the paired per-item machinery; the items' ``language_pair`` is their slice. Macro-F1
is compared with the paired statistic bootstrap per language pair.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats
from sklearn import metrics as skm

from embedpyramid.config.tasks import MTEB_VERSION, BitextSettings
from embedpyramid.data import TaskError
from embedpyramid.tasks.classification import compare_labels
from embedpyramid.tasks.common import (
    ALL,
    SCORE_RULE,
    TaskResult,
    comparison_frame,
    empty_per_seed,
    paired_predictions,
    per_item_frame,
    summary_frame,
)
from embedpyramid.vectors import TextVectors, similarity_matrix

SPLIT = "test"


def neighbourhood_means(cosine: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r_T, r_S)``: each source's mean cosine to its ``k`` nearest targets (rows) and each
    target's mean cosine to its ``k`` nearest sources (columns); ``k`` is clipped to the sizes."""
    k_targets, k_sources = min(k, cosine.shape[1]), min(k, cosine.shape[0])
    r_targets = -np.partition(-cosine, k_targets - 1, axis=1)[:, :k_targets].mean(axis=1)
    r_sources = -np.partition(-cosine, k_sources - 1, axis=0)[:k_sources, :].mean(axis=0)
    return r_targets, r_sources


def mining_scores(cosine: np.ndarray, scoring: str, k: int) -> np.ndarray:
    """(sources, targets) scores of ``scoring`` (``nearest``, ``margin`` or ``csls``) from cosines."""
    if scoring == "nearest":
        return cosine
    r_targets, r_sources = neighbourhood_means(cosine, k)
    if scoring == "margin":
        return cosine / ((r_targets[:, None] + r_sources[None, :]) / 2.0)
    if scoring == "csls":
        return 2.0 * cosine - r_targets[:, None] - r_sources[None, :]
    raise TaskError(f"unknown bitext scoring {scoring!r}; allowed: nearest, margin, csls")


def k_occurrence(scores: np.ndarray, k: int) -> np.ndarray:
    """``N_k(y)`` for each target: how many sources have ``y`` among their top ``k`` targets."""
    k = min(k, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.bincount(top.ravel(), minlength=scores.shape[1])


def hubness(scores: np.ndarray, k: int) -> dict[str, float]:
    """Skewness of the k-occurrence, the share of anti-hubs (``N_k = 0``) and the largest ``N_k``."""
    occurrence = k_occurrence(scores, k)
    skew = float(stats.skew(occurrence)) if occurrence.std() > 0 else 0.0
    return {"hubness_skew": skew, "antihub_share": float(np.mean(occurrence == 0)),
            "max_k_occurrence": float(occurrence.max())}


def evaluate_bitext(pairs: pl.DataFrame, vectors: TextVectors, settings: BitextSettings, *, dataset: str,
                    model: str, similarity: str = "cosine") -> TaskResult:
    """Mine every source's translation with each scoring, per language pair (the project protocol;
    ``settings.protocol == "mteb"`` runs :func:`evaluate_mteb_bitext`). The scorings start from
    the card's similarity in place of the cosine (margin and CSLS assume a cosine-like scale).

    ``pairs`` holds ``pair_id, text_id_1`` (source), ``text_id_2`` (its translation) and
    ``language_pair``.
    """
    if settings.protocol == "mteb":
        return evaluate_mteb_bitext(pairs, vectors, settings, dataset=dataset, model=model, similarity=similarity)
    if "language_pair" not in pairs.columns:
        raise TaskError(f"{dataset}: bitext pairs need a language_pair column")
    summary_rows, per_item, frames = [], [], []
    correct_all: dict[str, list[np.ndarray]] = {scoring: [] for scoring in settings.scorings}
    for (language_pair,), group in pairs.sort("pair_id").group_by("language_pair", maintain_order=True):
        sources = group["text_id_1"].to_list()
        if len(set(sources)) != len(sources):
            raise TaskError(f"{dataset} {language_pair}: a source sentence appears in several pairs; "
                            "each source needs exactly one translation")
        targets = sorted(set(group["text_id_2"]))
        target_index = {target: index for index, target in enumerate(targets)}
        gold = np.array([target_index[target] for target in group["text_id_2"]])
        cosine = similarity_matrix(vectors, sources, targets, similarity)
        for scoring in settings.scorings:
            scores = mining_scores(cosine, scoring, settings.k)
            predicted = np.argmax(scores, axis=1)
            correct = predicted == gold
            correct_all[scoring].append(correct)
            per_item.append(per_item_frame(dataset, model, scoring, group["pair_id"].to_list(), "accuracy", correct))
            frames.append(pl.DataFrame({
                "system": scoring, "subset": language_pair, "item_id": group["pair_id"],
                "gold": group["text_id_2"], "predicted": [targets[index] for index in predicted],
                "score": scores[np.arange(len(sources)), predicted],
            }))
            values = {
                "accuracy": float(skm.accuracy_score(gold, predicted)),
                "f1": float(skm.f1_score(gold, predicted, average="macro", zero_division=0)),
                "precision": float(skm.precision_score(gold, predicted, average="macro", zero_division=0)),
                "recall": float(skm.recall_score(gold, predicted, average="macro", zero_division=0)),
                **hubness(scores, settings.hubness_k),
            }
            summary_rows += [{"dataset": dataset, "model": model, "system": scoring, "subset": language_pair,
                              "split": SPLIT, "metric": metric, "value": value, "n_items": len(sources)}
                             for metric, value in values.items()]
    for scoring, parts in correct_all.items():
        correct = np.concatenate(parts)
        summary_rows.append({"dataset": dataset, "model": model, "system": scoring, "subset": ALL, "split": SPLIT,
                             "metric": "accuracy", "value": float(correct.mean()), "n_items": int(correct.size)})
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), "system", "subset", "item_id", "gold",
        "predicted", "score")
    result_settings = {
        "task": "bitext", **settings.model_dump(), "direction": "source (text_id_1) -> target (text_id_2)",
        "candidates": "every target sentence of the language pair", "ties": "the target with the smaller id",
        "similarity": similarity, "score": SCORE_RULE[similarity],
        "f1": "macro over distinct target texts as classes, zero_division=0 (MTEB's is weighted over target rows: "
              "protocol mteb)",
        "hubness": "k-occurrence over each scoring's top hubness_k targets per source",
        "per_item_metric": "accuracy: the source's best target is its translation",
        "language_pairs": sorted(pairs["language_pair"].unique().to_list()),
    }
    return TaskResult("bitext", pl.concat(per_item), predictions, summary_frame(summary_rows), empty_per_seed(),
                      result_settings)


def evaluate_mteb_bitext(pairs: pl.DataFrame, vectors: TextVectors, settings: BitextSettings, *, dataset: str,
                         model: str, similarity: str = "cosine") -> TaskResult:
    """MTEB's bitext-mining protocol (``AbsTaskBitextMining`` / ``BitextMiningEvaluator``, mteb
    2.26), per language pair: every row is its own target — a target text that appears in several
    pairs stays several rows, as in MTEB's datasets — and each source's match is the row of
    highest similarity under the card's similarity (MTEB's ``model.similarity``: cosine or inner
    product of the vectors as produced; ``l2``: negative distance), ties to the first row.
    Accuracy and the *weighted* F1, precision and recall (``average="weighted"``,
    ``zero_division=0``) with the rows as classes; F1 is MTEB's main score. Rows are in pair-id
    order, the row order of the dataset.
    """
    if "language_pair" not in pairs.columns:
        raise TaskError(f"{dataset}: bitext pairs need a language_pair column")
    summary_rows, per_item, frames = [], [], []
    for (language_pair,), group in pairs.sort("pair_id").group_by("language_pair", maintain_order=True):
        sources, targets = group["text_id_1"].to_list(), group["text_id_2"].to_list()
        scores = mteb_similarity(vectors.rows(sources), vectors.rows(targets), similarity)
        predicted = np.argmax(scores, axis=1)
        gold = np.arange(len(sources))
        pair_ids = group["pair_id"].to_list()
        correct = predicted == gold
        per_item.append(per_item_frame(dataset, model, "nearest", pair_ids, "accuracy", correct))
        frames.append(pl.DataFrame({"subset": language_pair, "item_id": pair_ids, "gold": pair_ids,
                                    "predicted": [pair_ids[index] for index in predicted],
                                    "score": scores[gold, predicted].astype(np.float64)}))
        values = {
            "accuracy": float(skm.accuracy_score(gold, predicted)),
            "f1": float(skm.f1_score(gold, predicted, average="weighted", zero_division=0)),
            "precision": float(skm.precision_score(gold, predicted, average="weighted", zero_division=0)),
            "recall": float(skm.recall_score(gold, predicted, average="weighted", zero_division=0)),
        }
        summary_rows += [{"dataset": dataset, "model": model, "system": "nearest", "subset": language_pair,
                          "split": SPLIT, "metric": metric, "value": value, "n_items": len(sources)}
                         for metric, value in values.items()]
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit("nearest").alias("system"), "subset",
        "item_id", "gold", "predicted", "score")
    result_settings = {
        "task": "bitext", **settings.model_dump(), "similarity": similarity, "mteb_version": MTEB_VERSION,
        "candidates": "every target row of the language pair, duplicates kept (MTEB)", "ties": "the first row",
        "f1": "weighted over target rows as classes (MTEB), zero_division=0",
        "main_score": {"system": "nearest", "metric": "f1", "mteb_key": "f1"},
        "language_pairs": sorted(pairs["language_pair"].unique().to_list()),
    }
    return TaskResult("bitext", pl.concat(per_item), predictions, summary_frame(summary_rows), empty_per_seed(),
                      result_settings)


def mteb_similarity(sources: np.ndarray, targets: np.ndarray, similarity: str) -> np.ndarray:
    """MTEB's ``model.similarity`` in float32: cosine (``cos_sim``: rows normalized, then the
    product), inner product (``dot_score``), or the negative Euclidean distance."""
    a, b = np.asarray(sources, np.float32), np.asarray(targets, np.float32)
    if similarity == "cosine":
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return a @ b.T
    if similarity == "inner_product":
        return a @ b.T
    if similarity == "l2":
        return -np.sqrt(np.clip((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * (a @ b.T), 0, None))
    raise TaskError(f"unknown similarity {similarity!r}; allowed: {', '.join(SCORE_RULE)}")


def compare_bitext(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                   confidence: float = 0.95, seed: int = 42, groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired bootstrap over source sentences of the macro-F1 difference (b − a), per scoring and
    language pair."""
    key = ["dataset", "system", "subset", "item_id"]
    joined = paired_predictions(predictions_a.select(*key, "gold", "model", "predicted"),
                                predictions_b.select(*key, "model", "predicted"), key, "compare_bitext")
    frames = []
    for (dataset, system, subset), group in joined.group_by("dataset", "system", "subset", maintain_order=True):
        comparison = compare_labels(group.with_columns(pl.lit(0).alias("seed")), n_resamples=n_resamples,
                                    confidence=confidence, seed=seed, groups=groups)
        frames.append(comparison_frame(comparison, ("f1",), dataset=dataset, system=system, subset=subset,
                                       split=SPLIT, model_a=group["model"][0], model_b=group["model_b"][0]))
    return pl.concat(frames)
