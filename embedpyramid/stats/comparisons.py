"""The comparisons table: every pair of models on every tested metric and slice of the queries.

For each pair (:mod:`embedpyramid.stats.pairing`) and each slice of the queries (all of them, each
value of each slice column, each query-length bucket, and the ``truncated`` slice when token
counts are given; :mod:`embedpyramid.stats.slicing`) the metrics are summarised jointly: one
paired bootstrap (:func:`embedpyramid.stats.paired_bootstrap`), one sign-flip test, one t-test
over the (queries x pairs·metrics) delta matrix, so every metric and pair of a dataset sees the
same resamples and sign patterns. Each row then states its test family, adjusted p-value and
decision (:mod:`embedpyramid.stats.families`).

Metrics identical by construction under the dataset's qrels (``aliases``: e.g. P@1, Hit@1 and
MRR@1 always; nDCG@1 with binary grades; Recall@1 and MAP@1) are tested once: the row of the
canonical metric lists its aliases, and the alias gets no row of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping

import numpy as np
import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats.bootstrap import paired_bootstrap
from embedpyramid.stats.effect_size import cohens_dz, delta_sd
from embedpyramid.stats.families import FAMILY_SCHEMA, with_families
from embedpyramid.stats.paired import win_tie_loss
from embedpyramid.stats.pairing import PAIR_KEYS, dataset_queries, query_deltas, validated_per_query
from embedpyramid.stats.power import minimum_detectable_effect
from embedpyramid.stats.randomization import paired_sign_flip_test, sign_flip_mc_error
from embedpyramid.stats.slicing import query_labels, query_slices
from embedpyramid.stats.t_test import paired_t_test

COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(),
    "system": pl.String(),
    "metric": pl.String(),
    "aliases": pl.List(pl.String()),
    "model_a": pl.String(),
    "model_b": pl.String(),
    "slice_column": pl.String(),
    "slice_value": pl.String(),
    "n": pl.Int64(),
    "n_units": pl.Int64(),
    "mean_a": pl.Float64(),
    "mean_b": pl.Float64(),
    "mean_delta": pl.Float64(),
    "sd_delta": pl.Float64(),
    "d_z": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "ci_low_mc_error": pl.Float64(),
    "ci_high_mc_error": pl.Float64(),
    "boot_median": pl.Float64(),
    "share_above_zero": pl.Float64(),
    "p_value": pl.Float64(),
    "p_value_mc_error": pl.Float64(),
    "t_p_value": pl.Float64(),
    **FAMILY_SCHEMA,
    "mde": pl.Float64(),
    "wins": pl.Int64(),
    "ties": pl.Int64(),
    "losses": pl.Int64(),
    "small_slice": pl.Boolean(),
    "confidence": pl.Float64(),
    "interval": pl.String(),
    "n_resamples": pl.Int64(),
    "n_permutations": pl.Int64(),
    "seed": pl.Int64(),
    "resampling": pl.String(),
}


def compare_models(
    per_query: pl.DataFrame,
    queries: pl.DataFrame,
    settings: ComparisonSettings,
    *,
    aliases: Mapping[str, str] | None = None,
    truncated: Mapping[str, Collection[str]] | None = None,
) -> pl.DataFrame:
    """The comparisons table: one row per dataset x system x tested metric x model pair x slice.

    ``queries`` holds ``query_id``, ``text`` and the slice (and group) columns; with a
    ``dataset`` column it may cover several datasets, without one ``per_query`` must hold a
    single dataset. ``aliases`` maps an alias metric to its canonical metric (identical per-query
    values by construction, as :func:`embedpyramid.retrieval.metrics.evaluate_run` reports
    them; checked here) and applies to every dataset of ``per_query``. ``truncated`` maps a
    model to the query ids truncated under its card; a pair's ``truncated`` slice holds the
    queries truncated under either model (``yes``) and the others (``no``), when both occur.

    Columns are those of :data:`COMPARISON_SCHEMA`: the pair's means, the mean delta (of the
    deltas with ties set to 0, :func:`query_deltas`: within ``tie_epsilon`` of
    ``mean_b - mean_a`` per tie) with its standard deviation, Cohen's d_z, the bootstrap interval with the Monte-Carlo errors of its
    ends and the method that made it (``interval``: ``t`` or ``studentized``, the hybrid's
    choice for the row, or the configured method; ``bca`` where a studentized interval would be
    unbounded), the bootstrap median and share of resamples above zero,
    the sign-flip ``p_value`` with its Monte-Carlo error, the paired t-test ``t_p_value``, the
    family and its adjusted p-value and decision, the minimum detectable effect ``mde`` at this
    n (power ``settings.power``), win/tie/loss counts, and ``small_slice`` when
    ``n < min_slice_n`` (any row, the all-queries one included; flagged, never dropped). Metrics keep their order of first
    appearance; slices run ``all``, then each slice column's sorted values, then the
    query-length buckets, then ``truncated``.
    """
    per_query = validated_per_query(per_query, settings.value_range)
    first_seen = per_query["metric"].unique(maintain_order=True)
    metric_order = {metric: index for index, metric in enumerate(first_seen)}
    listed = alias_groups(per_query, aliases or {}, settings.report_metric)
    deltas = query_deltas(per_query.filter(pl.col("metric").is_in(list(listed))), settings)
    datasets = per_query["dataset"].unique().sort().to_list()
    columns: dict[str, list] = {name: [] for name in (*PAIR_KEYS, "metric", "slice_column", "slice_value", "_order")}
    statistics: dict[str, list[np.ndarray]] = {}
    for block_index, ((dataset, system), block) in enumerate(
        deltas.partition_by(["dataset", "system"], as_dict=True, maintain_order=True).items()
    ):
        pairs = block.select("model_a", "model_b").unique(maintain_order=True).rows()
        query_ids, metrics, cube = _pair_cube(block, pairs, metric_order, dataset, system)
        labels = query_labels(query_ids, dataset_queries(queries, dataset, datasets), settings)
        groups = None if settings.group_column is None else labels[settings.group_column]
        slices = query_slices(labels, query_ids, settings, pairs, truncated or {})
        for slice_index, (slice_column, slice_value, mask, pair_indices) in enumerate(slices):
            computed = _slice_statistics(
                cube, mask, pair_indices, None if groups is None else groups[mask], settings
            )
            for name, values in computed.items():
                statistics.setdefault(name, []).append(values.ravel())
            for pair_index, metric in itertools.product(pair_indices, metrics):
                model_a, model_b = pairs[pair_index]
                for name, value in zip(PAIR_KEYS, (dataset, system, model_a, model_b), strict=True):
                    columns[name].append(value)
                columns["metric"].append(metric)
                columns["slice_column"].append(slice_column)
                columns["slice_value"].append(slice_value)
                columns["_order"].append((block_index, pair_index, metric_order[metric], slice_index))

    schema = {name: COMPARISON_SCHEMA[name] for name in (*PAIR_KEYS, "metric", "slice_column", "slice_value")}
    table = pl.DataFrame(
        {name: columns[name] for name in schema}, schema=schema
    ).with_columns(
        pl.Series("_order", columns["_order"], dtype=pl.List(pl.Int64())),
        *(
            pl.Series(name, np.concatenate(parts) if parts else [], dtype=COMPARISON_SCHEMA[name])
            for name, parts in statistics.items()
        ),
    )
    if not statistics:
        table = table.with_columns(
            pl.lit(None, dtype=COMPARISON_SCHEMA[name]).alias(name)
            for name in COMPARISON_SCHEMA
            if name not in table.columns
        )
    table = table.sort("_order").drop("_order").with_columns(
        pl.col("metric").replace_strict(listed, default=[], return_dtype=COMPARISON_SCHEMA["aliases"]).alias("aliases"),
        pl.lit(settings.confidence).alias("confidence"),
        pl.lit(settings.n_resamples, dtype=pl.Int64()).alias("n_resamples"),
        pl.lit(settings.n_permutations, dtype=pl.Int64()).alias("n_permutations"),
        pl.lit(settings.seed, dtype=pl.Int64()).alias("seed"),
        pl.lit(settings.resampling).alias("resampling"),
    )
    return with_families(table, settings).select(list(COMPARISON_SCHEMA)).cast(COMPARISON_SCHEMA)


def alias_groups(
    per_query: pl.DataFrame, aliases: Mapping[str, str], report_metric: str | None = None
) -> dict[str, list[str]]:
    """The metrics to test, each with the aliases it stands for (in order of first appearance).

    ``aliases`` maps an alias to its canonical metric; a metric absent from ``per_query`` is
    ignored. When ``report_metric`` belongs to a group it stands for the group. Raises when an
    alias's per-query values differ from its canonical metric's anywhere.
    """
    present = per_query["metric"].unique(maintain_order=True).to_list()
    members: dict[str, list[str]] = {metric: [metric] for metric in present}
    for alias, canonical in aliases.items():
        if alias in members and canonical in members and alias != canonical:
            members[canonical] += members.pop(alias)
    groups: dict[str, list[str]] = {}
    for canonical, group in members.items():
        representative = report_metric if report_metric in group else canonical
        ordered = sorted(group, key=present.index)
        groups[representative] = [metric for metric in ordered if metric != representative]
        _require_identical(per_query, representative, groups[representative])
    return dict(sorted(groups.items(), key=lambda item: present.index(item[0])))


def _require_identical(per_query: pl.DataFrame, metric: str, aliases: list[str]) -> None:
    if not aliases:
        return
    key = ["dataset", "model", "system", "query_id"]
    reference = per_query.filter(pl.col("metric") == metric).select(*key, reference=pl.col("value"))
    joined = per_query.filter(pl.col("metric").is_in(aliases)).join(reference, on=key, how="left")
    differing = joined.filter(pl.col("reference").is_null() | (pl.col("value") != pl.col("reference")))
    if differing.height:
        first = differing.row(0, named=True)
        raise ValueError(
            f"metric {first['metric']!r} is listed as an alias of {metric!r} but differs from it for "
            f"model {first['model']!r}, query {first['query_id']!r} ({first['value']} vs {first['reference']}); "
            "aliases must be identical by construction: drop the alias or fix the metrics"
        )


def _pair_cube(
    block: pl.DataFrame,
    pairs: list[tuple[str, str]],
    metric_order: dict[str, int],
    dataset: str,
    system: str,
) -> tuple[pl.Series, list[str], dict[str, np.ndarray]]:
    """Sorted query ids, the metrics, and (queries x pairs x metrics) delta/value cubes."""
    metrics = sorted(block["metric"].unique().to_list(), key=metric_order.__getitem__)
    query_ids = block["query_id"].unique().sort()
    shape = (query_ids.len(), len(pairs), len(metrics))
    if block.height != shape[0] * shape[1] * shape[2]:
        raise ValueError(
            f"dataset {dataset!r}, system {system!r}: the compared pairs hold {block.height} "
            f"(pair, query, metric) values for {shape[1]} pairs x {shape[0]} queries x "
            f"{shape[2]} metrics; every scored query needs every metric for every model"
        )
    pair_index = pl.DataFrame(
        {"model_a": [a for a, _ in pairs], "model_b": [b for _, b in pairs], "_pair": range(len(pairs))},
        schema={"model_a": pl.String, "model_b": pl.String, "_pair": pl.Int64},
    )
    ordered = block.join(pair_index, on=["model_a", "model_b"]).with_columns(
        pl.col("metric").replace_strict(metric_order, return_dtype=pl.Int64).alias("_metric"),
    ).sort("query_id", "_pair", "_metric")
    cube = {
        column: ordered[column].to_numpy().reshape(shape) for column in ("delta", "value_a", "value_b")
    }
    return query_ids, metrics, cube


def _slice_statistics(
    cube: dict[str, np.ndarray],
    mask: np.ndarray,
    pair_indices: list[int],
    groups: np.ndarray | None,
    settings: ComparisonSettings,
) -> dict[str, np.ndarray]:
    """Per (pair, metric) statistics of one slice: every column resampled and sign-flipped jointly."""
    n = int(mask.sum())
    shape = (len(pair_indices), cube["delta"].shape[2])

    def select(name: str) -> np.ndarray:
        return cube[name][mask][:, pair_indices, :].reshape(n, -1)

    deltas = select("delta")
    boot = paired_bootstrap(
        deltas, n_resamples=settings.n_resamples, confidence=settings.confidence, seed=settings.seed,
        groups=groups, method=settings.interval, bounds=settings.delta_bounds,
    )
    p_value = paired_sign_flip_test(
        deltas, n_permutations=settings.n_permutations, seed=settings.seed, groups=groups
    )
    wins, ties, losses = win_tie_loss(deltas, settings.tie_epsilon)
    sd = delta_sd(deltas)
    computed = {
        "n": np.full(deltas.shape[1], n),
        "n_units": np.full(deltas.shape[1], boot.n_units),
        "mean_a": select("value_a").mean(axis=0),
        "mean_b": select("value_b").mean(axis=0),
        "mean_delta": boot.mean,
        "sd_delta": sd,
        "d_z": cohens_dz(deltas),
        "ci_low": boot.ci_low,
        "ci_high": boot.ci_high,
        "ci_low_mc_error": boot.ci_low_mc_error,
        "ci_high_mc_error": boot.ci_high_mc_error,
        "interval": boot.methods,
        "boot_median": boot.median,
        "share_above_zero": boot.share_above_zero,
        "p_value": p_value,
        "p_value_mc_error": sign_flip_mc_error(
            p_value, n_units=boot.n_units, n_permutations=settings.n_permutations
        ),
        "t_p_value": paired_t_test(deltas, groups=groups).p_value,
        "mde": minimum_detectable_effect(sd, n, alpha=settings.alpha, power=settings.power),
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "small_slice": np.full(deltas.shape[1], n < settings.min_slice_n),
    }
    return {name: np.asarray(values).reshape(shape) for name, values in computed.items()}
