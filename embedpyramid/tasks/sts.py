"""STS: does the model order sentence similarity as people do?

Each pair is scored by the card's similarity of its two texts' vectors (cosine of the
L2-normalized vectors by default; the inner product or the negative Euclidean distance when the
card says ``inner_product`` or ``l2``), and the scores are correlated with the human scores over all pairs: Spearman's rank correlation ``rho`` (primary:
the scale of a cosine means nothing, its order does) and Pearson's ``r`` — both from scipy
(``scipy.stats.spearmanr``, ``scipy.stats.pearsonr``; Spearman is Pearson of the average ranks,
ties sharing their mean rank). With cosine this is the number SentEval and MTEB report (Conneau &
Kiela 2018; Muennighoff et al. 2023); ``protocol: mteb`` (:func:`evaluate_mteb_sts`) computes
every score MTEB's STS evaluator reports, its main score being cosine Spearman whatever the
card's similarity.

A correlation is not a mean of per-pair values, so two models are compared with the paired
bootstrap of the correlation difference over pairs
(:func:`embedpyramid.stats.paired_statistic_bootstrap`): every resample draws the same pairs for
both models. Per-pair cosines are kept in ``predictions`` for that.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats
from sklearn.metrics import pairwise

from embedpyramid.config.tasks import MTEB_VERSION, StsSettings
from embedpyramid.stats.statistic import paired_statistic_bootstrap
from embedpyramid.tasks.common import (
    ALL,
    SCORE_RULE,
    TaskResult,
    compared_system,
    comparison_frame,
    empty_per_item,
    empty_per_seed,
    mteb_pair_similarity,
    paired_predictions,
    summary_frame,
    system_name,
)
from embedpyramid.vectors import TextVectors, pair_similarities

METRICS = ("spearman", "pearson")


def rank_codes(values: np.ndarray) -> np.ndarray:
    """Dense integer codes of ``values`` in increasing order (equal values share a code): all a
    resample needs to rank its items, since resampling never reorders values."""
    return np.unique(values, return_inverse=True)[1].reshape(values.shape)


def average_ranks(codes: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties sharing their mean rank, as ``scipy.stats.rankdata``) of each
    row of (rows, n) dense codes, from the count of each code: ``rank = #below + (#equal + 1) / 2``."""
    rows, n_codes = codes.shape[0], int(codes.max()) + 1
    offsets = (np.arange(rows) * n_codes)[:, None]
    counts = np.bincount((codes + offsets).ravel(), minlength=rows * n_codes).reshape(rows, n_codes)
    rank_of_code = np.cumsum(counts, axis=1) - counts + (counts + 1) / 2.0
    return np.take_along_axis(rank_of_code, codes, axis=1)


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of (rows, n) arrays; NaN for a row with a constant side."""
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (x * y).sum(axis=1) / denominator, np.nan)


def correlations(gold_codes: np.ndarray, gold: np.ndarray, score_codes: np.ndarray, score: np.ndarray) -> np.ndarray:
    """``[spearman, pearson]`` of each row of (rows, n) resampled items: the resample kernel of
    :func:`compare_sts` (Spearman = Pearson of average ranks, from :func:`rank_codes` codes),
    checked against ``scipy.stats.spearmanr`` / ``pearsonr`` in the tests."""
    spearman = pearson_rows(average_ranks(gold_codes), average_ranks(score_codes))
    return np.stack([spearman, pearson_rows(gold, score)], axis=-1)


def evaluate_sts(pairs: pl.DataFrame, vectors: TextVectors, settings: StsSettings | None = None, *, dataset: str,
                 model: str, similarity: str = "cosine") -> TaskResult:
    """The card's similarity of every pair against its human score; Spearman and Pearson per split
    (the project protocol; ``settings.protocol == "mteb"`` runs :func:`evaluate_mteb_sts`).

    ``pairs`` holds ``pair_id, text_id_1, text_id_2, gold, split`` (a frozen ``pairs`` table).
    """
    settings = settings or StsSettings()
    if settings.protocol == "mteb":
        return evaluate_mteb_sts(pairs, vectors, settings, dataset=dataset, model=model, similarity=similarity)
    score = pair_similarities(vectors, pairs["text_id_1"].to_list(), pairs["text_id_2"].to_list(), similarity)
    system = system_name(similarity)
    predictions = _predictions(pairs, score, dataset=dataset, model=model, system=system)
    rows = []
    for (split,), group in predictions.group_by("split", maintain_order=True):
        gold, values = group["gold"].to_numpy(), group["score"].to_numpy()
        found = {"spearman": stats.spearmanr(gold, values).statistic, "pearson": stats.pearsonr(gold, values).statistic}
        rows += [{"dataset": dataset, "model": model, "system": system, "subset": ALL, "split": split,
                  "metric": metric, "value": float(found[metric]), "n_items": group.height} for metric in METRICS]
    result_settings = {"task": "sts", **settings.model_dump(), "similarity": similarity,
                       "score": SCORE_RULE[similarity], "metrics": list(METRICS),
                       "primary_metric": "spearman", "correlations": "scipy.stats spearmanr / pearsonr",
                       "n_pairs": pairs.height}
    return TaskResult("sts", empty_per_item(), predictions, summary_frame(rows), empty_per_seed(), result_settings)


def evaluate_mteb_sts(pairs: pl.DataFrame, vectors: TextVectors, settings: StsSettings, *, dataset: str, model: str,
                      similarity: str = "cosine") -> TaskResult:
    """MTEB's STS protocol (``AbsTaskSTS`` / ``AnySTSEvaluator``, mteb 2.26), per split.

    On the vectors as the card produced them: ``cosine = 1 − paired_cosine_distances``,
    ``manhattan = −paired_manhattan_distances``, ``euclidean = −paired_euclidean_distances``
    (scikit-learn, as MTEB computes them) and ``similarity``, the card's own similarity (MTEB's
    ``model.similarity_pairwise``: cosine, inner product; for ``l2`` the negative Euclidean
    distance); Pearson and Spearman of each against the gold scores (scipy; MTEB rescales the
    gold to [0, 1] first, which changes neither). The main score is ``cosine`` Spearman
    (``cosine_spearman``) whatever the card's similarity — the number MTEB publishes.
    """
    first, second = vectors.rows(pairs["text_id_1"].to_list()), vectors.rows(pairs["text_id_2"].to_list())
    scores = {
        "cosine": 1.0 - pairwise.paired_cosine_distances(first, second),
        "manhattan": -pairwise.paired_manhattan_distances(first, second),
        "euclidean": -pairwise.paired_euclidean_distances(first, second),
    }
    scores["similarity"] = mteb_pair_similarity(first, second, similarity)
    predictions = _predictions(pairs, np.asarray(scores["cosine"], np.float64), dataset=dataset, model=model,
                               system="cosine")
    rows = []
    for split in predictions["split"].unique(maintain_order=True).to_list():
        where = (pairs["split"] == split).to_numpy()
        gold = pairs["gold"].to_numpy()[where]
        for system, values in scores.items():
            part = np.asarray(values)[where]
            found = {"pearson": float(stats.pearsonr(gold, part)[0]), "spearman": float(stats.spearmanr(gold, part)[0])}
            rows += [{"dataset": dataset, "model": model, "system": system, "subset": ALL, "split": split,
                      "metric": metric, "value": found[metric], "n_items": int(where.sum())} for metric in METRICS]
    result_settings = {
        "task": "sts", **settings.model_dump(), "similarity": similarity, "mteb_version": MTEB_VERSION,
        "score": "on the vectors as produced: cosine, manhattan, euclidean (sklearn paired distances) and the card's "
                 "similarity", "main_score": {"system": "cosine", "metric": "spearman", "mteb_key": "cosine_spearman"},
        "metrics": list(METRICS), "primary_metric": "spearman", "n_pairs": pairs.height,
    }
    return TaskResult("sts", empty_per_item(), predictions, summary_frame(rows), empty_per_seed(), result_settings)


def _predictions(pairs: pl.DataFrame, score: np.ndarray, *, dataset: str, model: str, system: str) -> pl.DataFrame:
    return pairs.select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(system).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("pair_id").alias("item_id"), "split", "gold",
    ).with_columns(pl.Series("score", score))


def compare_sts(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                confidence: float = 0.95, seed: int = 42, groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired bootstrap of the Spearman and Pearson differences (b − a) over pairs, per split.

    ``groups`` maps a pair id to its resampling group (whole groups are drawn) when given.
    """
    key = ["dataset", "subset", "split", "item_id"]
    joined = paired_predictions(predictions_a.select(*key, "gold", "model", "system", "score"),
                                predictions_b.select(*key, "model", "system", "score"), key, "compare_sts")
    frames = []
    for (dataset, split), group in joined.group_by("dataset", "split", maintain_order=True):
        gold, score_a, score_b = (group[column].to_numpy() for column in ("gold", "score", "score_b"))
        comparison = paired_statistic_bootstrap(
            correlations, (rank_codes(gold), gold, rank_codes(score_a), score_a),
            (rank_codes(gold), gold, rank_codes(score_b), score_b), vectorized=True,
            n_resamples=n_resamples, confidence=confidence, seed=seed,
            groups=None if groups is None else [groups[item] for item in group["item_id"]],
        )
        frames.append(comparison_frame(comparison, METRICS, dataset=dataset, system=compared_system(group), subset=ALL,
                                       split=split,
                                       model_a=group["model"][0], model_b=group["model_b"][0]))
    return pl.concat(frames)
