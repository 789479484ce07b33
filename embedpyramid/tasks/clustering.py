"""Clustering: do groups form without labels?

k-means (scikit-learn ``KMeans``, Lloyd, k-means++ seeding, ``n_init`` initializations) on the
unit vectors, with **k = the number of gold classes** (the evaluation knows it; the model does
not), once per seed. Each clustering is scored against the gold classes with

* **V-measure** (Rosenberg & Hirschberg 2007): the harmonic mean of homogeneity
  ``h = I(C;K) / H(C)`` and completeness ``c = I(C;K) / H(K)``;
* **ARI**, the adjusted Rand index (Hubert & Arabie 1985): pair-counting agreement corrected
  for chance, ``2 (tp·tn − fn·fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn))``;
* **AMI**, adjusted mutual information (Vinh, Epps & Bailey 2010), arithmetic normalization:
  ``(I − E[I]) / (mean(H(C), H(K)) − E[I])``, ``E[I]`` under the hypergeometric model;

all from scikit-learn (``v_measure_score``, ``adjusted_rand_score``,
``adjusted_mutual_info_score``; natural logarithms), reported as mean ± sd over the seeds. A
perfect clustering scores 1 on all three whatever the cluster numbering. This is MTEB v1's
clustering protocol (Muennighoff et al. 2023) with the seeds made explicit, *not* MTEB v2's:
``protocol: mteb`` (:func:`evaluate_mteb_clustering`) reproduces v2, which bootstraps the
V-measure of ``MiniBatchKMeans`` over samples of 16,384 draws.

None of the three is a mean of per-item values, so two models are compared with the paired
bootstrap over items of the seed-mean scores; :func:`clustering_scores_rows` recomputes the
three from each resample's contingency table (the same formulas as scikit-learn, checked against
it in the tests) so that 10,000 resamples take seconds.
"""

from __future__ import annotations

import random

import numpy as np
import polars as pl
from scipy.special import gammaln
from sklearn import metrics as skm
from sklearn.cluster import KMeans, MiniBatchKMeans
from threadpoolctl import threadpool_limits

from embedpyramid.config.tasks import MTEB_VERSION, ClusteringSettings
from embedpyramid.data import TaskError
from embedpyramid.stats.statistic import paired_statistic_bootstrap
from embedpyramid.tasks.common import (
    ALL,
    PER_SEED_SCHEMA,
    TaskResult,
    comparison_frame,
    empty_per_item,
    paired_predictions,
    protocol_noise,
    seed_mean_noise,
    summarize_seeds,
)
from embedpyramid.vectors import TextVectors

SYSTEM = "kmeans"
MTEB_SYSTEM = "minibatch_kmeans"
MTEB_METRICS = ("v_measure", "ami")
SPLIT = "all"
"""``split`` of every clustering row: the clustering sees (and is scored on) every item."""
METRICS = ("v_measure", "ari", "ami")
_EPS = np.finfo(np.float64).eps
_EMI_TERMS_PER_CHUNK = 1 << 22
_DENSE_KEYS = 1 << 24


def clustering_scores_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """``[v_measure, ari, ami]`` of each row of (rows, n) integer labels (codes ``>= 0``).

    Computed from the row's contingency table ``n_ij`` with class sizes ``a_i`` and cluster
    sizes ``b_j`` exactly as scikit-learn does, including its conventions for degenerate
    labellings (a single class or cluster): ``h = 1`` when ``H(C) = 0``, ``c = 1`` when
    ``H(K) = 0``, ARI = 1 when no pair disagrees, AMI = 1 when both have one label.
    """
    rows, n = gold.shape
    n_classes, n_clusters = int(gold.max()) + 1, int(predicted.max()) + 1
    cells = (np.arange(rows)[:, None] * n_classes * n_clusters + gold * n_clusters + predicted).ravel()
    table = np.bincount(cells, minlength=rows * n_classes * n_clusters).reshape(rows, n_classes, n_clusters)
    table = table.astype(np.float64)
    a, b = table.sum(axis=2), table.sum(axis=1)

    def entropy(sizes: np.ndarray) -> np.ndarray:
        p = sizes / n
        return -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1)

    h_true, h_pred = entropy(a), entropy(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(n) + np.log(table) - np.log(a)[:, :, None] - np.log(b)[:, None, :]
        mutual_information = np.clip(np.where(table > 0, table / n * log_ratio, 0.0).sum(axis=(1, 2)), 0.0, None)

    homogeneity = np.divide(mutual_information, h_true, out=np.ones(rows), where=h_true != 0)
    completeness = np.divide(mutual_information, h_pred, out=np.ones(rows), where=h_pred != 0)
    total = homogeneity + completeness
    v_measure = np.divide(2 * homogeneity * completeness, total, out=np.zeros(rows), where=total != 0)

    squares = (table**2).sum(axis=(1, 2))
    tp = squares - n
    fp = (b**2).sum(axis=1) - squares
    fn = (a**2).sum(axis=1) - squares
    tn = float(n) ** 2 - fp - fn - squares
    denominator = (tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)
    agree = (fn == 0) & (fp == 0)
    ari = np.divide(2.0 * (tp * tn - fn * fp), denominator, out=np.ones(rows), where=~agree)

    emi = expected_mutual_information(a, b, n)
    ami_denominator = (h_true + h_pred) / 2 - emi
    ami_denominator = np.where(ami_denominator < 0, np.minimum(ami_denominator, -_EPS), np.maximum(ami_denominator, _EPS))
    single = ((a > 0).sum(axis=1) == 1) & ((b > 0).sum(axis=1) == 1)
    ami = np.where(single, 1.0, (mutual_information - emi) / ami_denominator)
    return np.stack([v_measure, ari, ami], axis=1)


def expected_mutual_information(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """``E[I]`` of each row's class sizes ``a`` (rows, G) and cluster sizes ``b`` (rows, K)
    under the hypergeometric model of random labellings with those sizes (Vinh et al. 2010, eq. 24):
    ``sum_ij sum_nij (nij/N) log(N nij / (a_i b_j)) P(nij)``, ``P`` the hypergeometric pmf,
    ``nij`` from ``max(1, a_i + b_j - N)`` to ``min(a_i, b_j)``. Each distinct ``(a_i, b_j)``
    pair is summed once (they repeat across resamples)."""
    rows = a.shape[0]
    sizes_a = np.broadcast_to(a[:, :, None], (rows, a.shape[1], b.shape[1])).ravel().astype(np.int64)
    sizes_b = np.broadcast_to(b[:, None, :], (rows, a.shape[1], b.shape[1])).ravel().astype(np.int64)
    row_of = np.repeat(np.arange(rows), a.shape[1] * b.shape[1])
    used = (sizes_a > 0) & (sizes_b > 0)
    keys, inverse = _distinct(sizes_a[used] * (n + 1) + sizes_b[used], (n + 1) ** 2)
    pair_a, pair_b = keys // (n + 1), keys % (n + 1)
    terms = np.zeros(keys.shape[0])
    low = np.maximum(1, pair_a + pair_b - n)
    lengths = np.minimum(pair_a, pair_b) - low + 1
    ends = np.cumsum(lengths)
    start = 0
    while start < keys.shape[0]:
        # Chunks of whole pairs holding about _EMI_TERMS_PER_CHUNK terms bound the memory.
        budget = ends[start] - lengths[start] + _EMI_TERMS_PER_CHUNK
        end = max(start + 1, int(np.searchsorted(ends, budget, side="right")))
        part = slice(start, end)
        owner = np.repeat(np.arange(end - start), lengths[part])
        offsets = np.arange(owner.shape[0]) - np.repeat(ends[part] - lengths[part] - (ends[start] - lengths[start]),
                                                        lengths[part])
        nij = (low[part][owner] + offsets).astype(np.float64)
        ai, bj = pair_a[part][owner].astype(np.float64), pair_b[part][owner].astype(np.float64)
        log_pmf = (gammaln(ai + 1) + gammaln(bj + 1) + gammaln(n - ai + 1) + gammaln(n - bj + 1) - gammaln(n + 1)
                   - gammaln(nij + 1) - gammaln(ai - nij + 1) - gammaln(bj - nij + 1) - gammaln(n - ai - bj + nij + 1))
        values = nij / n * (np.log(n) + np.log(nij) - np.log(ai) - np.log(bj)) * np.exp(log_pmf)
        terms[start:end] = np.bincount(owner, weights=values, minlength=end - start)
        start = end
    return np.bincount(row_of[used], weights=terms[inverse], minlength=rows)


def _distinct(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in ``[0, size)``; by marking a dense table
    when it is small (no sort: several times faster on the millions of keys of a bootstrap)."""
    if size > _DENSE_KEYS:
        return np.unique(keys, return_inverse=True)
    seen = np.zeros(size, dtype=bool)
    seen[keys] = True
    rank = np.cumsum(seen) - 1
    return np.flatnonzero(seen), rank[keys]


def seed_mean_scores(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(rows, 3) seed-mean ``[v_measure, ari, ami]`` from (rows, n) gold codes and (rows, n, seeds)
    cluster codes: the statistic the paired bootstrap compares."""
    rows, n, seeds = predicted.shape
    flat_gold = np.repeat(gold[:, None, :], seeds, axis=1).reshape(rows * seeds, n)
    flat_predicted = predicted.transpose(0, 2, 1).reshape(rows * seeds, n)
    return clustering_scores_rows(flat_gold, flat_predicted).reshape(rows, seeds, len(METRICS)).mean(axis=1)


def evaluate_clustering(texts: pl.DataFrame, vectors: TextVectors, settings: ClusteringSettings, *,
                        dataset: str, model: str, similarity: str = "cosine") -> TaskResult:
    """k-means with k = the number of gold classes, once per seed; ``texts`` holds ``text_id, label``
    (the project protocol; ``settings.protocol == "mteb"`` runs :func:`evaluate_mteb_clustering`).
    k-means is Euclidean: unit vectors under a cosine card, the vectors as produced under an
    ``inner_product`` or ``l2`` card (recorded)."""
    if settings.protocol == "mteb":
        return evaluate_mteb_clustering(texts, vectors, settings, dataset=dataset, model=model,
                                        similarity=similarity)
    ordered = texts.sort("text_id")
    labels = sorted(ordered["label"].unique().to_list())
    if len(labels) < 2 or len(labels) > ordered.height:
        raise TaskError(f"{dataset}: clustering needs at least two gold classes and no more classes than items; "
                        f"got {len(labels)} classes over {ordered.height} items")
    item_ids = ordered["text_id"].to_list()
    features = vectors.unit_rows(item_ids) if similarity == "cosine" else vectors.rows(item_ids)
    gold = ordered["label"].to_list()
    seed_rows, frames = [], []
    for seed in settings.seeds:
        with threadpool_limits(limits=settings.threads):
            clusters = KMeans(n_clusters=len(labels), n_init=settings.n_init, random_state=seed).fit_predict(features)
        scores = {"v_measure": skm.v_measure_score(gold, clusters), "ari": skm.adjusted_rand_score(gold, clusters),
                  "ami": skm.adjusted_mutual_info_score(gold, clusters)}
        seed_rows += [{"seed": seed, "metric": metric, "value": float(scores[metric])} for metric in METRICS]
        frames.append(pl.DataFrame({"item_id": item_ids, "seed": [seed] * len(item_ids), "gold": gold,
                                    "cluster": clusters.astype(np.int64)}))
    per_seed = pl.DataFrame(seed_rows).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), "seed", "metric", "value").cast(PER_SEED_SCHEMA)
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), "item_id", pl.col("seed").cast(pl.Int64), "gold", "cluster")
    result_settings = {
        "task": "clustering", **settings.model_dump(), "k": len(labels), "k_rule": "the number of gold classes",
        "similarity": similarity,
        "features": "L2-normalized vectors" if similarity == "cosine" else "the vectors as produced (k-means is Euclidean)",
        "algorithm": "sklearn KMeans (lloyd, k-means++ init)",
        "metrics": "sklearn v_measure_score, adjusted_rand_score, adjusted_mutual_info_score (arithmetic)",
        "noise": seed_mean_noise(per_seed, system=SYSTEM, metrics=METRICS),
    }
    return TaskResult("clustering", empty_per_item(), predictions, summarize_seeds(per_seed, len(item_ids), SPLIT),
                      per_seed, result_settings)


def evaluate_mteb_clustering(texts: pl.DataFrame, vectors: TextVectors, settings: ClusteringSettings, *,
                             dataset: str, model: str, similarity: str = "cosine") -> TaskResult:
    """MTEB v2's clustering protocol (``AbsTaskClustering``, mteb 2.26) on the vectors as the card
    produced them, items in text-id order: one ``random.Random(seed)`` first keeps the items to
    embed (``max_documents_to_embed`` / ``max_fraction_to_embed``, ``rng.sample``), then draws each
    of ``n_draws`` bootstrap samples of ``sample_size`` items with replacement (``rng.choices``);
    each sample is clustered by one ``MiniBatchKMeans(n_clusters = the number of gold labels,
    batch_size, init="k-means++", n_init=1, random_state=seed)`` refitted per draw and scored by
    V-measure (MTEB's main score) and AMI, averaged over the draws (sd over draws with ddof = 1
    here; MTEB's ``v_measure_std`` uses ddof = 0). Single-level labels (MTEB's level 0)."""
    mteb = settings.mteb
    ordered = texts.sort("text_id")
    item_ids = ordered["text_id"].to_list()
    labels = np.array(ordered["label"].to_list())
    features = vectors.rows(item_ids)
    rng = random.Random(mteb.seed)
    limit = (mteb.max_documents_to_embed if mteb.max_documents_to_embed is not None else
             int(mteb.max_fraction_to_embed * len(item_ids)) if mteb.max_fraction_to_embed is not None else None)
    kept = list(range(len(item_ids))) if limit is None else rng.sample(range(len(item_ids)), k=min(len(item_ids), limit))
    features, labels, kept_ids = features[kept], labels[kept], [item_ids[i] for i in kept]
    n_clusters = int(np.unique(labels).size)
    if n_clusters < 2:
        raise TaskError(f"{dataset}: clustering needs at least two gold classes; got {n_clusters}")
    estimator = MiniBatchKMeans(n_clusters=n_clusters, batch_size=mteb.batch_size, init="k-means++", n_init=1,
                                random_state=mteb.seed)
    seed_rows, frames = [], []
    with threadpool_limits(limits=settings.threads):
        for draw in range(mteb.n_draws):
            drawn = rng.choices(range(len(kept_ids)), k=mteb.sample_size)
            assignment = estimator.fit_predict(features[drawn])
            gold = labels[drawn]
            scores = {"v_measure": float(skm.v_measure_score(gold, assignment)),
                      "ami": float(skm.adjusted_mutual_info_score(gold, assignment))}
            seed_rows += [{"seed": draw, "metric": metric, "value": scores[metric]} for metric in MTEB_METRICS]
            frames.append(pl.DataFrame({"draw": [draw] * len(drawn), "position": np.arange(len(drawn)),
                                        "item_id": [kept_ids[i] for i in drawn], "gold": gold.tolist(),
                                        "cluster": assignment.astype(np.int64)}))
    per_seed = pl.DataFrame(seed_rows).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(MTEB_SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("seed").cast(pl.Int64), "metric", "value").cast(PER_SEED_SCHEMA)
    predictions = pl.concat(frames).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(MTEB_SYSTEM).alias("system"),
        pl.lit(ALL).alias("subset"), pl.col("draw").cast(pl.Int64), pl.col("position").cast(pl.Int64), "item_id",
        "gold", "cluster")
    result_settings = {
        "task": "clustering", **settings.model_dump(), "similarity": similarity, "mteb_version": MTEB_VERSION,
        "k": n_clusters, "k_rule": "the number of gold labels", "features": "the vectors as produced (MTEB)",
        "embedded_items": len(kept_ids), "seed_column": "the bootstrap draw",
        "algorithm": "sklearn MiniBatchKMeans per bootstrap draw (MTEB v2)",
        "main_score": {"system": MTEB_SYSTEM, "metric": "v_measure", "mteb_key": "v_measure"},
    }
    summary = summarize_seeds(per_seed, len(kept_ids), SPLIT)
    if mteb.noise_seeds:
        def rerun(seed: int) -> pl.DataFrame:
            again = settings.model_copy(update={"mteb": mteb.model_copy(update={"seed": seed, "noise_seeds": 0})})
            return evaluate_mteb_clustering(texts, vectors, again, dataset=dataset, model=model,
                                            similarity=similarity).summary

        result_settings["noise"] = protocol_noise(mteb.seed, summary, rerun, mteb.noise_seeds, system=MTEB_SYSTEM,
                                                  metrics=MTEB_METRICS)
    return TaskResult("clustering", empty_per_item(), predictions, summary, per_seed, result_settings)


def draw_means(v_measure: np.ndarray, ami: np.ndarray) -> np.ndarray:
    """(rows, 2) means over the resampled draws of the per-draw V-measure and AMI."""
    return np.stack([v_measure.mean(axis=-1), ami.mean(axis=-1)], axis=-1)


def compare_mteb_clustering(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int,
                            confidence: float, seed: int) -> pl.DataFrame:
    """Paired bootstrap over MTEB's draws (the same items for both models: the draws depend only on
    the seed and the item count) of the mean V-measure and AMI differences (b − a)."""
    def per_draw(predictions: pl.DataFrame) -> pl.DataFrame:
        rows = [{"draw": draw, "items": group["item_id"].to_list(),
                 "v_measure": float(skm.v_measure_score(group["gold"].to_list(), group["cluster"].to_list())),
                 "ami": float(skm.adjusted_mutual_info_score(group["gold"].to_list(), group["cluster"].to_list()))}
                for (draw,), group in predictions.sort("draw", "position").group_by("draw", maintain_order=True)]
        return pl.DataFrame(rows)

    a, b = per_draw(predictions_a), per_draw(predictions_b)
    if a.height != b.height or a["items"].to_list() != b["items"].to_list():
        raise TaskError("compare_clustering: the two models' MTEB draws hold different items; evaluate both with the "
                        "same mteb settings on the same frozen dataset")
    comparison = paired_statistic_bootstrap(
        draw_means, (a["v_measure"].to_numpy(), a["ami"].to_numpy()), (b["v_measure"].to_numpy(), b["ami"].to_numpy()),
        vectorized=True, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return comparison_frame(comparison, MTEB_METRICS, dataset=predictions_a["dataset"][0], system=MTEB_SYSTEM,
                            subset=ALL, split=SPLIT, model_a=predictions_a["model"][0],
                            model_b=predictions_b["model"][0])


def compare_clustering(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                       confidence: float = 0.95, seed: int = 42, groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired bootstrap over items of the seed-mean V-measure, ARI and AMI differences (b − a).

    The clusterings are those of each model's seeds, held fixed; a resample re-scores them on the
    drawn items. MTEB-protocol predictions (with a ``draw`` column) are compared over the draws
    (:func:`compare_mteb_clustering`)."""
    if "draw" in predictions_a.columns or "draw" in predictions_b.columns:
        if not ("draw" in predictions_a.columns and "draw" in predictions_b.columns):
            raise TaskError("compare_clustering: one model was evaluated under protocol mteb and the other not")
        return compare_mteb_clustering(predictions_a, predictions_b, n_resamples=n_resamples, confidence=confidence,
                                       seed=seed)
    key = ["dataset", "system", "subset", "item_id", "seed"]
    joined = paired_predictions(predictions_a.select(*key, "gold", "model", "cluster"),
                                predictions_b.select(*key, "model", "cluster"), key, "compare_clustering").sort(
        "item_id", "seed")
    item_ids = joined["item_id"].unique(maintain_order=True).to_list()
    n_seeds = joined["seed"].n_unique()
    if joined.height != len(item_ids) * n_seeds:
        raise TaskError("compare_clustering: every item needs a cluster for every seed of both models")
    labels = sorted(joined["gold"].unique().to_list())
    gold = joined["gold"].replace_strict(labels, list(range(len(labels))), return_dtype=pl.Int64).to_numpy()
    gold = gold.reshape(len(item_ids), n_seeds)[:, 0]
    clusters_a = joined["cluster"].to_numpy().reshape(len(item_ids), n_seeds)
    clusters_b = joined["cluster_b"].to_numpy().reshape(len(item_ids), n_seeds)
    comparison = paired_statistic_bootstrap(
        seed_mean_scores, (gold, clusters_a), (gold, clusters_b), vectorized=True, n_resamples=n_resamples,
        confidence=confidence, seed=seed, groups=None if groups is None else [groups[item] for item in item_ids],
    )
    return comparison_frame(comparison, METRICS, dataset=joined["dataset"][0], system=SYSTEM, subset=ALL,
                            split=SPLIT, model_a=joined["model"][0], model_b=joined["model_b"][0])
