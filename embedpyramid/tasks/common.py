"""What the L2 task families share: vectors by text id, the result tables and their schemas.

Every family returns a :class:`TaskResult` for one (model, dataset):

* ``per_item`` — the project's long format ``dataset, model, system, query_id, metric, value``
  for the metrics that are means of per-item values (a test pair classified correctly at the
  dev threshold, an item classified correctly, a source sentence matched to its translation);
  ``query_id`` is the item id. The existing paired comparisons (bootstrap, sign-flip, Holm,
  slices) apply to it unchanged.
* ``predictions`` — each item's raw outcome (cosine, predicted label or cluster, per seed), from
  which the statistics that are not means (Spearman, AP, F1, V-measure…) are computed and
  compared with :func:`embedpyramid.stats.paired_statistic_bootstrap`.
* ``summary`` — ``dataset, model, system, subset, split, metric, value, sd, n_seeds, n_items``:
  ``value`` is the mean over seeds where a step is stochastic (``sd`` the sample standard
  deviation over seeds, ddof = 1; null with one seed or nothing stochastic).
* ``per_seed`` — ``dataset, model, system, subset, seed, metric, value``.
* ``settings`` — everything the numbers depend on, seeds included.

Vectors are compared by the card's similarity (``cosine`` of L2-normalized vectors, zero vectors
staying zero; ``inner_product`` or ``l2`` of the vectors as produced), through
:class:`embedpyramid.vectors.TextVectors`; the similarity is recorded in every result's settings.
Under ``protocol: mteb`` each family follows MTEB's evaluator instead (its module says how).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from embedpyramid.data.frozen import TaskError
from embedpyramid.store import PER_QUERY_SCHEMA

if TYPE_CHECKING:
    from embedpyramid.stats.statistic import StatisticComparison

ALL = "all"
"""``subset`` of rows that cover the whole dataset (bitext rows name their language pair)."""

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "system": pl.String(), "subset": pl.String(),
    "split": pl.String(), "metric": pl.String(), "value": pl.Float64(), "sd": pl.Float64(),
    "n_seeds": pl.Int64(), "n_items": pl.Int64(),
}
PER_SEED_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "system": pl.String(), "subset": pl.String(),
    "seed": pl.Int64(), "metric": pl.String(), "value": pl.Float64(),
}
STATISTIC_COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "system": pl.String(), "subset": pl.String(), "split": pl.String(),
    "metric": pl.String(), "model_a": pl.String(), "model_b": pl.String(), "n": pl.Int64(), "n_units": pl.Int64(),
    "value_a": pl.Float64(), "value_b": pl.Float64(), "delta": pl.Float64(),
    "ci_low": pl.Float64(), "ci_high": pl.Float64(), "boot_median": pl.Float64(),
    "share_above_zero": pl.Float64(), "p_value": pl.Float64(), "n_valid": pl.Int64(), "confidence": pl.Float64(),
    "n_resamples": pl.Int64(), "seed": pl.Int64(), "resampling": pl.String(),
}


SCORE_RULE: dict[str, str] = {
    "cosine": "cosine of L2-normalized vectors",
    "inner_product": "inner product of the vectors as produced",
    "l2": "negative Euclidean distance of the vectors as produced",
}
"""How a pair is scored under each card similarity (recorded in the settings)."""


def system_name(similarity: str) -> str:
    """The ``system`` of a family's rows scored by ``similarity`` (``cosine`` keeps its old name)."""
    if similarity not in SCORE_RULE:
        raise TaskError(f"unknown similarity {similarity!r}; allowed: {', '.join(SCORE_RULE)}")
    return similarity


def compared_system(joined: pl.DataFrame) -> str:
    """The ``system`` of a comparison of two models' joined predictions: theirs when they agree,
    ``a|b`` when the two cards score with different similarities."""
    a, b = joined["system"][0], joined["system_b"][0]
    return a if a == b else f"{a}|{b}"


def mteb_pair_similarity(first: np.ndarray, second: np.ndarray, similarity: str) -> np.ndarray:
    """MTEB's ``similarity_pairwise`` of the card's similarity on raw vectors: cosine (float32, as
    sentence-transformers' ``pairwise_cos_sim``), inner product, or for ``l2`` the negative
    Euclidean distance (MTEB's encoders have no pairwise l2: its euclidean score)."""
    a, b = np.asarray(first, np.float32), np.asarray(second, np.float32)
    if similarity == "cosine":
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        return np.einsum("ij,ij->i", a, b) / np.maximum(norms, 1e-12)
    if similarity == "inner_product":
        return np.einsum("ij,ij->i", a, b)
    if similarity == "l2":
        return -np.linalg.norm(a - b, axis=1)
    raise TaskError(f"unknown similarity {similarity!r}; allowed: {', '.join(SCORE_RULE)}")


@dataclass(frozen=True, eq=False)
class TaskResult:
    """One (model, dataset) evaluation of a task family; see the module docstring."""

    task: str
    per_item: pl.DataFrame
    predictions: pl.DataFrame
    summary: pl.DataFrame
    per_seed: pl.DataFrame
    settings: dict[str, Any]


def per_item_frame(dataset: str, model: str, system: str, item_ids: Sequence[str], metric: str,
                   values: np.ndarray) -> pl.DataFrame:
    """Per-item values in the long format of :data:`~embedpyramid.store.PER_QUERY_SCHEMA`."""
    return pl.DataFrame({
        "dataset": [dataset] * len(item_ids), "model": [model] * len(item_ids), "system": [system] * len(item_ids),
        "query_id": list(item_ids), "metric": [metric] * len(item_ids), "value": np.asarray(values, np.float64),
    }, schema=PER_QUERY_SCHEMA)


def empty_per_item() -> pl.DataFrame:
    return pl.DataFrame(schema=PER_QUERY_SCHEMA)


def empty_per_seed() -> pl.DataFrame:
    return pl.DataFrame(schema=PER_SEED_SCHEMA)


def summarize_seeds(per_seed: pl.DataFrame, n_items: int, split: str) -> pl.DataFrame:
    """Mean and sample sd (ddof = 1; null for one seed) over seeds of each system/subset/metric."""
    return (
        per_seed.group_by("dataset", "model", "system", "subset", "metric", maintain_order=True)
        .agg(pl.col("value").mean().alias("value"), pl.col("value").std(ddof=1).alias("sd"),
             pl.col("seed").n_unique().cast(pl.Int64).alias("n_seeds"))
        .with_columns(pl.lit(split).alias("split"), pl.lit(n_items, pl.Int64).alias("n_items"))
        .select(list(SUMMARY_SCHEMA)).cast(SUMMARY_SCHEMA)
    )


def protocol_noise(main_seed: int, main: pl.DataFrame, rerun: Callable[[int], pl.DataFrame], n_extra: int, *,
                   system: str, metrics: Sequence[str]) -> dict[str, Any]:
    """How far a stochastic protocol's seeds alone move its whole-set statistics: the protocol run
    again (``rerun(seed)``, its summary) at seeds ``main_seed + 1 … main_seed + n_extra``, beside
    the measured run (``main``, at ``main_seed``). ``spread`` of each metric of ``system`` is the
    sample standard deviation (ddof = 1) of its values over all the runs: how far one run of the
    protocol, such as the one a published score came from, is expected to fall from another (the
    reproduction check's noise rule)."""
    seeds = [main_seed + offset for offset in range(1, n_extra + 1)]
    summaries = [main, *(rerun(seed) for seed in seeds)]
    values = {metric: [summary_value(summary, system, metric) for summary in summaries] for metric in metrics}
    spread = {metric: float(np.std(found, ddof=1)) if len(found) > 1 else None for metric, found in values.items()}
    return {"seeds": [main_seed, *seeds], "values": values, "spread": spread,
            "spread_rule": "sd over the protocol's runs at these seeds (ddof = 1)"}


def seed_mean_noise(per_seed: pl.DataFrame, *, system: str, metrics: Sequence[str]) -> dict[str, Any]:
    """The noise of a statistic that is already a mean over seeds (the project protocols): its
    values per seed, and as ``spread`` their standard error, sd (ddof = 1) / √seeds — how far
    the seed mean of one set of seeds falls from another's."""
    rows = per_seed.filter(pl.col("system") == system).sort("seed")
    values = {metric: rows.filter(pl.col("metric") == metric)["value"].to_list() for metric in metrics}
    spread = {metric: float(np.std(found, ddof=1) / np.sqrt(len(found))) if len(found) > 1 else None
              for metric, found in values.items()}
    return {"seeds": rows["seed"].unique(maintain_order=True).to_list(), "values": values, "spread": spread,
            "spread_rule": "standard error of the seed mean: sd over seeds (ddof = 1) / sqrt(seeds)"}


def summary_value(summary: pl.DataFrame, system: str, metric: str) -> float:
    """The one value of ``metric`` for ``system`` in a summary (the whole dataset)."""
    rows = summary.filter((pl.col("system") == system) & (pl.col("metric") == metric) & (pl.col("subset") == ALL))
    if rows.height != 1:
        raise TaskError(f"the summary holds {rows.height} rows of {system} {metric}, expected one")
    return float(rows["value"][0])


def summary_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Summary rows (missing ``sd``/``n_seeds`` are null) in :data:`SUMMARY_SCHEMA`."""
    return pl.DataFrame([{"sd": None, "n_seeds": None, **row} for row in rows], schema=SUMMARY_SCHEMA)


def comparison_frame(comparison: StatisticComparison, metrics: Sequence[str], *, dataset: str, system: str,
                     subset: str, split: str, model_a: str, model_b: str) -> pl.DataFrame:
    """One row per metric of a :class:`StatisticComparison`, in :data:`STATISTIC_COMPARISON_SCHEMA`."""
    def column(values: np.ndarray) -> list[float]:
        return np.asarray(values, np.float64).reshape(-1).tolist()

    n = len(metrics)
    return pl.DataFrame({
        "dataset": [dataset] * n, "system": [system] * n, "subset": [subset] * n, "split": [split] * n,
        "metric": list(metrics),
        "model_a": [model_a] * n, "model_b": [model_b] * n, "n": [comparison.n_items] * n,
        "n_units": [comparison.n_units] * n, "value_a": column(comparison.value_a),
        "value_b": column(comparison.value_b), "delta": column(comparison.delta),
        "ci_low": column(comparison.ci_low), "ci_high": column(comparison.ci_high),
        "boot_median": column(comparison.median), "share_above_zero": column(comparison.share_above_zero),
        "p_value": column(comparison.p_value),
        "n_valid": np.asarray(comparison.n_valid).reshape(-1).tolist(), "confidence": [comparison.confidence] * n,
        "n_resamples": [comparison.n_resamples] * n, "seed": [comparison.seed] * n,
        "resampling": [comparison.resampling] * n,
    }, schema=STATISTIC_COMPARISON_SCHEMA)


def paired_predictions(a: pl.DataFrame, b: pl.DataFrame, key: Sequence[str], where: str) -> pl.DataFrame:
    """Join two models' predictions on ``key``; both must cover exactly the same items."""
    joined = a.join(b, on=list(key), how="full", suffix="_b", coalesce=True)
    unmatched = joined.filter(pl.any_horizontal(pl.col(c).is_null() for c in joined.columns if c not in key))
    if unmatched.height:
        raise TaskError(f"{where}: the two models' predictions differ on {unmatched.height} items "
                        f"(e.g. {unmatched.row(0, named=True)}); evaluate both on the same frozen dataset")
    return joined.sort(list(key))
