"""The Tukey HSD tables of a per-query table: every model on one metric over all queries, per
dataset and system with at least three models, as one row per model (mean, comparison interval,
letters, rank interval) and one row per pair (delta, simultaneous interval, HSD p-value). The
randomized HSD itself is :func:`embedpyramid.stats.randomized_tukey_hsd`."""

from __future__ import annotations

import itertools

import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats.effect_size import cohens_dz, delta_sd
from embedpyramid.stats.hsd import randomized_tukey_hsd
from embedpyramid.stats.pairing import PAIR_KEYS, dataset_queries, validated_per_query
from embedpyramid.stats.slicing import query_labels

HSD_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(),
    "system": pl.String(),
    "metric": pl.String(),
    "model": pl.String(),
    "n": pl.Int64(),
    "mean": pl.Float64(),
    "interval_low": pl.Float64(),
    "interval_high": pl.Float64(),
    "letters": pl.String(),
    "rank_low": pl.Int64(),
    "rank_high": pl.Int64(),
    "critical_range": pl.Float64(),
    "confidence": pl.Float64(),
    "n_permutations": pl.Int64(),
    "seed": pl.Int64(),
}
"""One row per model: mean, the HSD comparison interval ``mean -+ q/2`` (two models differ
exactly when their intervals do not overlap), letters and rank interval."""

HSD_PAIR_SCHEMA: dict[str, pl.DataType] = {
    **{key: pl.String() for key in PAIR_KEYS[:2]},
    "metric": pl.String(),
    **{key: pl.String() for key in PAIR_KEYS[2:]},
    "mean_delta": pl.Float64(),
    "sd_delta": pl.Float64(),
    "d_z": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "p_value_mc_error": pl.Float64(),
    "significant": pl.Boolean(),
}
"""One row per pair of models (B − A with the per-query deltas' sd and d_z, the simultaneous
interval ``delta -+ q``, the HSD p-value)."""


def tukey_hsd_tables(
    per_query: pl.DataFrame, queries: pl.DataFrame, settings: ComparisonSettings, metric: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The randomized Tukey HSD of every model on ``metric`` over all queries, per dataset and
    system with at least three models: (one row per model, :data:`HSD_SCHEMA`; one row per
    pair, :data:`HSD_PAIR_SCHEMA`). Models run baseline first, then sorted; model rows by mean,
    best first. ``queries`` is used for the group column, as in :func:`compare_models`."""
    per_query = validated_per_query(per_query, settings.value_range)
    available = per_query["metric"].unique(maintain_order=True).to_list()
    if metric not in available:
        raise ValueError(f"metric {metric!r} is not in per_query; available: {available}")
    datasets = per_query["dataset"].unique().sort().to_list()
    model_rows, pair_rows = [], []
    for (dataset, system), frame in per_query.filter(pl.col("metric") == metric).partition_by(
        ["dataset", "system"], as_dict=True, maintain_order=True
    ).items():
        models = frame["model"].unique().sort().to_list()
        if len(models) < 3:
            continue
        if settings.baseline in models:
            models = [settings.baseline, *(m for m in models if m != settings.baseline)]
        wide = frame.pivot(on="model", index="query_id", values="value").sort("query_id")
        incomplete = wide.filter(pl.any_horizontal(pl.col(models).is_null()))
        if incomplete.height:
            raise ValueError(
                f"dataset {dataset!r}, system {system!r}: {incomplete.height} queries lack a {metric} value for "
                f"some model, e.g. {incomplete['query_id'][0]!r}; the HSD needs every model on every query"
            )
        groups = None
        if settings.group_column is not None:
            labels = query_labels(wide["query_id"], dataset_queries(queries, dataset, datasets), settings)
            groups = labels[settings.group_column]
        matrix = wide.select(models).to_numpy()
        hsd = randomized_tukey_hsd(
            matrix, models, n_permutations=settings.n_permutations,
            seed=settings.seed, confidence=settings.confidence, groups=groups,
        )
        half = hsd.critical_range / 2.0
        for index in sorted(range(len(models)), key=lambda i: (-hsd.means[i], i)):
            model_rows.append({
                "dataset": dataset, "system": system, "metric": metric, "model": models[index],
                "n": hsd.n_queries, "mean": hsd.means[index], "interval_low": hsd.means[index] - half,
                "interval_high": hsd.means[index] + half, "letters": hsd.letters[models[index]],
                "rank_low": int(hsd.rank_low[index]), "rank_high": int(hsd.rank_high[index]),
                "critical_range": hsd.critical_range, "confidence": settings.confidence,
                "n_permutations": settings.n_permutations, "seed": settings.seed,
            })
        for i, j in itertools.combinations(range(len(models)), 2):
            difference = hsd.differences[i, j]
            deltas = matrix[:, [j]] - matrix[:, [i]]
            pair_rows.append({
                "dataset": dataset, "system": system, "metric": metric, "model_a": models[i], "model_b": models[j],
                "mean_delta": difference, "sd_delta": float(delta_sd(deltas)[0]), "d_z": float(cohens_dz(deltas)[0]),
                "ci_low": difference - hsd.critical_range,
                "ci_high": difference + hsd.critical_range, "p_value": hsd.p_values[i, j],
                "p_value_mc_error": hsd.p_value_mc_errors[i, j], "significant": bool(hsd.significant[i, j]),
            })
    return pl.DataFrame(model_rows, schema=HSD_SCHEMA), pl.DataFrame(pair_rows, schema=HSD_PAIR_SCHEMA)
