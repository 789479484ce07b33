"""Paired comparisons of models on per-query metrics: the comparisons table, its two test
families, the Tukey HSD tables and the regression lists.

Every number here is derived from the long per-query table
``dataset, model, system, query_id, metric, value``. Two models are paired on ``query_id``
within one dataset and system; the per-query delta is ``value_b - value_a`` with ``model_a``
the baseline (or, for all pairs, the earlier model). For each pair and each slice of the queries
(all of them, each value of each slice column, each query-length bucket, and the ``truncated``
slice when token counts are given) the metrics are summarised jointly: one paired bootstrap
(:func:`embedpyramid.stats.paired_bootstrap`), one sign-flip test, one t-test over the
(queries x pairs·metrics) delta matrix, so every metric and pair of a dataset sees the same
resamples and sign patterns.

Two test families per dataset, stated in every row (``family``, ``adjustment``,
``family_size``, ``p_adjusted``):

* ``confirmatory``: the report metric over all queries, each model against the baseline — the
  question the evaluation was run to answer; Holm across those tests only, so the family-wise
  error rate is controlled and adding a metric or a slice cannot move its p-values;
* ``exploratory``: every other metric, every slice and every non-baseline pair;
  Benjamini–Hochberg within the dataset (false discovery rate), labelled as such.

Metrics identical by construction under the dataset's qrels (``aliases``: e.g. P@1, Hit@1 and
MRR@1 always; nDCG@1 with binary grades; Recall@1 and MAP@1) are tested once: the row of the
canonical metric lists its aliases, and the alias gets no row of its own. ``decision`` reads the
adjusted p-value at ``alpha = 1 - confidence``: ``better`` or ``worse`` (model B against A) or
``not significant``.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from embedpyramid.stats.bootstrap import INTERVAL_METHODS, IntervalMethod, paired_bootstrap, percentile_rank
from embedpyramid.stats.effect_size import cohens_dz, delta_sd
from embedpyramid.stats.hsd import randomized_tukey_hsd
from embedpyramid.stats.multiple import benjamini_hochberg_adjust, holm_adjust
from embedpyramid.stats.paired import win_tie_loss
from embedpyramid.stats.power import minimum_detectable_effect
from embedpyramid.stats.randomization import paired_sign_flip_test, sign_flip_mc_error
from embedpyramid.stats.slices import ALL_QUERIES, MISSING_SLICE_VALUE, QUERY_LENGTH, TRUNCATED
from embedpyramid.stats.t_test import paired_t_test

if TYPE_CHECKING:
    from embedpyramid.config import ProjectConfig

CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
DECISIONS = ("better", "worse", "not significant")

PER_QUERY_COLUMNS = ("dataset", "model", "system", "query_id", "metric", "value")
PAIR_KEYS = ("dataset", "system", "model_a", "model_b")

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
    "family": pl.String(),
    "adjustment": pl.String(),
    "family_size": pl.Int64(),
    "p_adjusted": pl.Float64(),
    "decision": pl.String(),
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
_FAMILY_COLUMNS = ("family", "adjustment", "family_size", "p_adjusted", "decision")

DELTA_SCHEMA: dict[str, pl.DataType] = {
    **{key: pl.String() for key in PAIR_KEYS},
    "metric": pl.String(),
    "query_id": pl.String(),
    "value_a": pl.Float64(),
    "value_b": pl.Float64(),
    "delta": pl.Float64(),
}

# The columns of :func:`regressions` when it is given a corpus.
REGRESSION_SCHEMA: dict[str, pl.DataType] = {
    **{key: pl.String() for key in PAIR_KEYS[:2]},
    "metric": pl.String(),
    **{key: pl.String() for key in PAIR_KEYS[2:]},
    "direction": pl.String(),
    "rank": pl.Int64(),
    "query_id": pl.String(),
    "text": pl.String(),
    "value_a": pl.Float64(),
    "value_b": pl.Float64(),
    "delta": pl.Float64(),
    "n_direction": pl.Int64(),
    "n_tied": pl.Int64(),
    "gold_doc_ids": pl.List(pl.String()),
    "top1_a": pl.String(),
    "top1_b": pl.String(),
    "top1_a_text": pl.String(),
    "top1_b_text": pl.String(),
}

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


@dataclass(frozen=True)
class ComparisonSettings:
    """How models are paired, resampled, tested and sliced.

    ``baseline`` is ``model_a`` of every comparison (``all_pairs`` adds every other pair, the
    earlier model in sorted order as ``model_a``). ``n_resamples`` bootstrap resamples and
    ``n_permutations`` sign patterns (and HSD permutations), all seeded by ``seed``;
    ``confidence`` is the intervals' level and ``1 - confidence`` the tests' alpha;
    ``interval`` the interval of a mean delta (``hybrid``, the default: ``t`` where half the
    deltas or more tie at 0, ``studentized`` otherwise; or ``t``, ``studentized``, ``bca``,
    ``percentile`` for every row; see :mod:`embedpyramid.stats.bootstrap` for the evidence).
    ``report_metric`` is the confirmatory metric (None: every test is exploratory).
    ``value_range`` is the range every per-query value must lie in (metrics in [0, 1]); the
    intervals of a mean delta are clipped to ``[low - high, high - low]``; None turns both off.
    ``power`` is the power of the minimum detectable effect (``mde``). ``tie_epsilon``:
    ``|delta| <= tie_epsilon`` is a tie, and its delta is exactly 0 in every statistic. Comparisons
    and slices with fewer than ``min_slice_n`` queries (default 30: below it an interval's coverage
    depends on the shape of the deltas; at n = 10 none of the candidates holds 92% on tied or
    skewed ones) are flagged ``small_slice``. ``worst_n`` regressions and improvements are listed per pair.
    ``group_column`` (a queries column such as a session or source document) makes whole groups
    the resampling unit. ``slice_columns`` are queries columns to slice by, used where the
    dataset has them. ``length_buckets`` are inclusive upper word-count edges of the computed
    ``query_length`` slice: ``(4, 8, 16)`` gives ``<=4``, ``5-8``, ``9-16`` and ``>16`` words;
    ``()`` turns that slice off.
    """

    baseline: str
    all_pairs: bool = False
    n_resamples: int = 10_000
    n_permutations: int = 10_000
    seed: int = 42
    confidence: float = 0.95
    interval: IntervalMethod = "hybrid"
    report_metric: str | None = None
    value_range: tuple[float, float] | None = (0.0, 1.0)
    power: float = 0.8
    tie_epsilon: float = 1e-9
    min_slice_n: int = 30
    worst_n: int = 10
    group_column: str | None = None
    slice_columns: tuple[str, ...] = ("category",)
    length_buckets: tuple[int, ...] = (4, 8, 16)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "length_buckets", tuple(self.length_buckets))
        if self.value_range is not None:
            object.__setattr__(self, "value_range", tuple(self.value_range))
        if not self.baseline:
            raise ValueError("baseline must name the model every other model is compared with")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1; got {self.confidence}")
        if not 0.0 < self.power < 1.0:
            raise ValueError(f"power must lie strictly between 0 and 1; got {self.power}")
        if self.interval not in INTERVAL_METHODS:
            raise ValueError(f"interval must be one of {', '.join(INTERVAL_METHODS)}; got {self.interval!r}")
        if self.value_range is not None and not self.value_range[0] < self.value_range[1]:
            raise ValueError(f"value_range must be (low, high) with low < high; got {self.value_range}")
        percentile_rank(self.n_resamples, self.confidence)
        for name in ("n_permutations", "min_slice_n", "worst_n"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}")
        if not self.tie_epsilon >= 0.0:
            raise ValueError(f"tie_epsilon must be a non-negative number; got {self.tie_epsilon}")
        edges = self.length_buckets
        if any(edge < 1 for edge in edges) or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ValueError(
                f"length_buckets must be strictly increasing positive word counts; got {edges}"
            )
        reserved = {ALL_QUERIES, QUERY_LENGTH, TRUNCATED, "query_id", "text"}
        clashing = sorted(reserved.intersection(self.slice_columns))
        if clashing:
            raise ValueError(
                f"slice_columns may not use the reserved names {clashing}; "
                f"the {QUERY_LENGTH!r} slice is configured through length_buckets"
            )

    @property
    def resampling(self) -> str:
        """``"query"``, or ``"group:<group_column>"`` for the cluster bootstrap."""
        return "query" if self.group_column is None else f"group:{self.group_column}"

    @property
    def alpha(self) -> float:
        """The tests' level, ``1 - confidence``."""
        return 1.0 - self.confidence

    @property
    def delta_bounds(self) -> tuple[float, float] | None:
        """The range a mean delta can take, from ``value_range``."""
        if self.value_range is None:
            return None
        width = self.value_range[1] - self.value_range[0]
        return (-width, width)


def comparison_settings(config: ProjectConfig, dataset: str) -> ComparisonSettings:
    """The paired-comparison settings of one dataset of a config, retrieval or task: the
    protocol's comparison with the dataset's slices and resampling groups."""
    spec = config.task_dataset(dataset) if dataset in config.task_datasets else config.dataset(dataset)
    comparison = config.protocol.comparison
    return ComparisonSettings(
        baseline=config.baseline.key, all_pairs=comparison.all_pairs, n_resamples=comparison.n_resamples,
        n_permutations=comparison.n_permutations, seed=comparison.seed, confidence=comparison.confidence,
        interval=comparison.interval, report_metric=comparison.report_metric, power=comparison.power,
        tie_epsilon=comparison.tie_epsilon, min_slice_n=comparison.min_slice_n, worst_n=comparison.worst_n,
        group_column=spec.group_column, slice_columns=tuple(spec.slices),
        length_buckets=tuple(comparison.length_buckets),
    )


def length_bucket_names(edges: Sequence[int]) -> list[str]:
    """Names of the query-length buckets for inclusive upper word-count ``edges``, in order."""
    names = []
    lower = 1
    for edge in edges:
        names.append(f"<={edge} words" if lower == 1 else _word_range(lower, edge))
        lower = edge + 1
    names.append(f">{edges[-1]} words")
    return names


def query_deltas(per_query: pl.DataFrame, settings: ComparisonSettings) -> pl.DataFrame:
    """Per-query paired values of every compared pair, one row per query and metric.

    Columns: dataset, system, model_a, model_b, metric, query_id, value_a, value_b, delta
    (``value_b - value_a``, set to exactly 0 where ``|value_b - value_a| <= tie_epsilon``: a tie
    is a tie in every statistic computed from the deltas, so float dust never enters a
    resample, a test or an effect size). Pairs are formed within each (dataset, system). Raises when the
    baseline is absent, a (model, query, metric) appears twice, a value is not finite, or one
    model of a pair lacks a query or metric the other has.
    """
    per_query = _validated_per_query(per_query)
    frames = []
    for (dataset, system), frame in per_query.partition_by(
        ["dataset", "system"], as_dict=True, maintain_order=True
    ).items():
        models = frame["model"].unique().sort().to_list()
        for model_a, model_b in _model_pairs(models, settings, dataset=dataset, system=system):
            left = frame.filter(pl.col("model") == model_a).select(
                "query_id", "metric", value_a="value"
            )
            right = frame.filter(pl.col("model") == model_b).select(
                "query_id", "metric", value_b="value"
            )
            joined = left.join(right, on=["query_id", "metric"], how="full", coalesce=True)
            _require_same_coverage(joined, dataset, system, model_a, model_b)
            frames.append(
                joined.sort("query_id", maintain_order=True).select(
                    pl.lit(dataset).alias("dataset"),
                    pl.lit(system).alias("system"),
                    pl.lit(model_a).alias("model_a"),
                    pl.lit(model_b).alias("model_b"),
                    "metric",
                    "query_id",
                    "value_a",
                    "value_b",
                    _tied_to_zero(pl.col("value_b") - pl.col("value_a"), settings.tie_epsilon).alias("delta"),
                )
            )
    return pl.concat(frames) if frames else pl.DataFrame(schema=DELTA_SCHEMA)


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
    per_query = _validated_per_query(per_query, settings.value_range)
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
        labels = _query_labels(query_ids, _dataset_queries(queries, dataset, datasets), settings)
        groups = None if settings.group_column is None else labels[settings.group_column]
        slices = _slices(labels, query_ids, settings, pairs, truncated or {})
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
    return _with_families(table, settings).select(list(COMPARISON_SCHEMA)).cast(COMPARISON_SCHEMA)


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


def tukey_hsd_tables(
    per_query: pl.DataFrame, queries: pl.DataFrame, settings: ComparisonSettings, metric: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The randomized Tukey HSD of every model on ``metric`` over all queries, per dataset and
    system with at least three models: (one row per model, :data:`HSD_SCHEMA`; one row per
    pair, :data:`HSD_PAIR_SCHEMA`). Models run baseline first, then sorted; model rows by mean,
    best first. ``queries`` is used for the group column, as in :func:`compare_models`."""
    per_query = _validated_per_query(per_query, settings.value_range)
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
            labels = _query_labels(wide["query_id"], _dataset_queries(queries, dataset, datasets), settings)
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


def regressions(
    per_query: pl.DataFrame,
    queries: pl.DataFrame,
    qrels: pl.DataFrame,
    runs: Mapping[str, pl.DataFrame] | pl.DataFrame,
    settings: ComparisonSettings,
    metric: str,
    *,
    corpus: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The ``worst_n`` worst regressions and best improvements of each pair on ``metric``.

    ``per_query`` must hold one dataset and one system (qrels and runs carry neither).
    ``runs`` maps each model to its run (``query_id, rank, doc_id, score``) or is one frame
    with a ``model`` column. A regression is ``delta < -tie_epsilon`` (B worse than A), an
    improvement ``delta > tie_epsilon``; ties on delta are ordered by query_id and
    disclosed: ``n_direction`` counts the pair's regressions (or improvements), ``n_tied`` the
    queries of that direction with exactly this delta. Columns: dataset, system, metric,
    model_a, model_b, direction (``"regression"``/``"improvement"``), rank, query_id, text,
    value_a, value_b, delta, n_direction, n_tied, gold_doc_ids (relevance >= 1, most relevant
    first), top1_a, top1_b (each model's first-ranked doc_id, null when it retrieved nothing),
    and, with a ``corpus`` (``doc_id, text``), top1_a_text and top1_b_text.
    """
    per_query = _validated_per_query(per_query)
    for column in ("dataset", "system"):
        values = per_query[column].unique().sort().to_list()
        if len(values) != 1:
            raise ValueError(
                f"regressions needs per_query for one {column}; got {values}: filter it first "
                "(qrels and runs have no dataset or system column to match on)"
            )
    available = per_query["metric"].unique(maintain_order=True).to_list()
    if metric not in available:
        raise ValueError(f"metric {metric!r} is not in per_query; available: {available}")
    deltas = query_deltas(per_query.filter(pl.col("metric") == metric), settings)

    eps = settings.tie_epsilon
    listed = (
        deltas.with_columns(
            pl.struct(list(PAIR_KEYS)).rle_id().alias("_pair"),  # pairs are contiguous
            pl.when(pl.col("delta") < -eps)
            .then(pl.lit("regression"))
            .when(pl.col("delta") > eps)
            .then(pl.lit("improvement"))
            .alias("direction"),
        )
        .drop_nulls("direction")
        .sort(
            "_pair",
            "direction",
            pl.col("delta").abs(),
            "query_id",
            descending=[False, True, True, False],
        )
        .with_columns(
            (pl.int_range(pl.len()).over("_pair", "direction") + 1).alias("rank"),
            pl.len().over("_pair", "direction").cast(pl.Int64).alias("n_direction"),
            pl.len().over("_pair", "direction", "delta").cast(pl.Int64).alias("n_tied"),
        )
        .filter(pl.col("rank") <= settings.worst_n)
    )

    dataset = per_query["dataset"][0]
    texts = _dataset_queries(queries, dataset, [dataset]).select("query_id", "text")
    gold = (
        qrels.select(
            pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), "relevance"
        )
        .filter(pl.col("relevance") >= 1)
        .sort("query_id", "relevance", "doc_id", descending=[False, True, False])
        .group_by("query_id", maintain_order=True)
        .agg(pl.col("doc_id").alias("gold_doc_ids"))
    )
    top1 = _top_documents(runs, models=set(deltas["model_a"]) | set(deltas["model_b"]))
    result = (
        listed.join(texts, on="query_id", how="left")
        .join(gold, on="query_id", how="left")
        .join(
            top1.rename({"model": "model_a", "doc_id": "top1_a"}),
            on=["model_a", "query_id"],
            how="left",
        )
        .join(
            top1.rename({"model": "model_b", "doc_id": "top1_b"}),
            on=["model_b", "query_id"],
            how="left",
        )
    )
    columns = [
        *PAIR_KEYS[:2],
        "metric",
        *PAIR_KEYS[2:],
        "direction",
        "rank",
        "query_id",
        "text",
        "value_a",
        "value_b",
        "delta",
        "n_direction",
        "n_tied",
        "gold_doc_ids",
        "top1_a",
        "top1_b",
    ]
    if corpus is not None:
        documents = corpus.select(pl.col("doc_id").cast(pl.String), "text")
        for side in ("a", "b"):
            result = result.join(
                documents.rename({"doc_id": f"top1_{side}", "text": f"top1_{side}_text"}),
                on=f"top1_{side}",
                how="left",
            )
        columns += ["top1_a_text", "top1_b_text"]
    return result.select(columns)


def _tied_to_zero(delta: pl.Expr, tie_epsilon: float) -> pl.Expr:
    return pl.when(delta.abs() <= tie_epsilon).then(pl.lit(0.0)).otherwise(delta)


def _word_range(lower: int, upper: int) -> str:
    return f"{lower} words" if lower == upper else f"{lower}-{upper} words"


def _validated_per_query(
    per_query: pl.DataFrame, value_range: tuple[float, float] | None = None
) -> pl.DataFrame:
    missing = [column for column in PER_QUERY_COLUMNS if column not in per_query.columns]
    if missing:
        raise ValueError(f"per_query lacks columns {missing}; expected {list(PER_QUERY_COLUMNS)}")
    table = per_query.select(
        *(pl.col(c).cast(pl.String) for c in PER_QUERY_COLUMNS[:-1]),
        pl.col("value").cast(pl.Float64),
    )
    key = list(PER_QUERY_COLUMNS[:-1])
    duplicated = table.filter(pl.len().over(key) > 1)
    if duplicated.height:
        first = duplicated.row(0, named=True)
        raise ValueError(
            f"per_query holds {duplicated.height} rows that repeat a "
            f"(dataset, model, system, query_id, metric) key, e.g. {first}; "
            "each query has one value per metric"
        )
    invalid = table.filter(pl.col("value").is_null() | ~pl.col("value").is_finite())
    if invalid.height:
        first = invalid.row(0, named=True)
        raise ValueError(
            f"per_query holds {invalid.height} null or non-finite values, e.g. {first}"
        )
    if value_range is not None:
        outside = table.filter(~pl.col("value").is_between(*value_range))
        if outside.height:
            first = outside.row(0, named=True)
            raise ValueError(
                f"per_query holds {outside.height} values outside value_range {list(value_range)}, e.g. {first}; "
                "set value_range to the metrics' range (or None) in the comparison settings"
            )
    return table


def _model_pairs(
    models: list[str], settings: ComparisonSettings, *, dataset: str, system: str
) -> list[tuple[str, str]]:
    if settings.baseline not in models:
        raise ValueError(
            f"baseline model {settings.baseline!r} has no per-query metrics for "
            f"dataset {dataset!r}, system {system!r}; models there: {models}"
        )
    others = [model for model in models if model != settings.baseline]
    pairs = [(settings.baseline, model) for model in others]
    if settings.all_pairs:
        pairs += list(itertools.combinations(others, 2))
    return pairs


def _require_same_coverage(
    joined: pl.DataFrame, dataset: str, system: str, model_a: str, model_b: str
) -> None:
    for model, other, column in ((model_b, model_a, "value_b"), (model_a, model_b, "value_a")):
        lacking = joined.filter(pl.col(column).is_null())
        if not lacking.height:
            continue
        has_any = joined.filter(pl.col(column).is_not_null())["query_id"].unique()
        absent = lacking.filter(~pl.col("query_id").is_in(has_any.implode()))["query_id"]
        absent = absent.unique().sort()
        if absent.len():
            what = (
                f"has no rows for {absent.len()} queries that model {other!r} has, "
                f"e.g. {absent.head(5).to_list()}"
            )
        else:
            first = lacking.row(0, named=True)
            what = (
                f"lacks {lacking.height} (query, metric) values that model {other!r} has, "
                f"e.g. query {first['query_id']!r} / {first['metric']}"
            )
        raise ValueError(
            f"dataset {dataset!r}, system {system!r}: model {model!r} {what}. A paired "
            "comparison needs both models scored on the same queries and metrics; recompute "
            f"the per-query metrics of {model!r} on the same frozen dataset"
        )


def _dataset_queries(queries: pl.DataFrame, dataset: str, datasets: list[str]) -> pl.DataFrame:
    if "dataset" in queries.columns:
        selected = queries.filter(pl.col("dataset").cast(pl.String) == dataset)
    elif len(datasets) > 1:
        raise ValueError(
            f"queries has no dataset column but per_query holds several datasets {datasets}; "
            "add a dataset column to queries or compare one dataset at a time"
        )
    else:
        selected = queries
    if "query_id" not in selected.columns:
        raise ValueError(f"queries lacks the query_id column; columns: {queries.columns}")
    selected = selected.with_columns(pl.col("query_id").cast(pl.String))
    repeated = selected.filter(pl.col("query_id").is_duplicated())["query_id"].unique().sort()
    if repeated.len():
        raise ValueError(
            f"dataset {dataset!r}: queries repeats query ids {repeated.head(5).to_list()}"
        )
    return selected


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


def _slices(
    labels: dict[str, np.ndarray],
    query_ids: pl.Series,
    settings: ComparisonSettings,
    pairs: list[tuple[str, str]],
    truncated: Mapping[str, Collection[str]],
) -> list[tuple[str, str, np.ndarray, list[int]]]:
    """(slice_column, slice_value, mask, pair indices) for all queries, each slice value, each
    length bucket (every pair), then each pair's ``truncated`` split."""
    every_pair = list(range(len(pairs)))
    n_queries = query_ids.len()
    slices = [(ALL_QUERIES, ALL_QUERIES, np.ones(n_queries, dtype=bool), every_pair)]
    for column in (c for c in settings.slice_columns if c in labels):
        values = labels[column]
        present = sorted(set(values.tolist()) - {MISSING_SLICE_VALUE})
        if (values == MISSING_SLICE_VALUE).any():
            present.append(MISSING_SLICE_VALUE)
        slices += [(column, value, values == value, every_pair) for value in present]
    if QUERY_LENGTH in labels:
        buckets = labels[QUERY_LENGTH]
        slices += [
            (QUERY_LENGTH, name, buckets == name, every_pair)
            for name in length_bucket_names(settings.length_buckets)
            if (buckets == name).any()
        ]
    for index, (model_a, model_b) in enumerate(pairs):
        known = [set(truncated[m]) for m in (model_a, model_b) if truncated.get(m) is not None]
        if not known:
            continue
        flagged = query_ids.is_in(sorted(set().union(*known))).to_numpy()
        if 0 < flagged.sum() < n_queries:
            slices += [(TRUNCATED, "yes", flagged, [index]), (TRUNCATED, "no", ~flagged, [index])]
    return slices


def _with_families(table: pl.DataFrame, settings: ComparisonSettings) -> pl.DataFrame:
    """State each row's family, adjust its p-value within the family and the dataset, decide."""
    confirmatory = (
        (pl.col("metric") == (settings.report_metric or ""))
        & (pl.col("slice_column") == ALL_QUERIES)
        & (pl.col("model_a") == settings.baseline)
    )
    labelled = table.with_row_index("_row").with_columns(
        pl.when(confirmatory).then(pl.lit(CONFIRMATORY)).otherwise(pl.lit(EXPLORATORY)).alias("family")
    )
    parts = []
    for (_, family), part in labelled.partition_by(["dataset", "family"], as_dict=True).items():
        adjust, name = (holm_adjust, "holm") if family == CONFIRMATORY else (benjamini_hochberg_adjust, "bh")
        parts.append(part.with_columns(
            pl.lit(name).alias("adjustment"),
            pl.lit(part.height, dtype=pl.Int64()).alias("family_size"),
            pl.Series("p_adjusted", adjust(part["p_value"].to_numpy()), dtype=pl.Float64()),
        ))
    if not parts:
        return labelled.drop("_row").with_columns(
            pl.lit(None, dtype=COMPARISON_SCHEMA[name]).alias(name) for name in _FAMILY_COLUMNS if name != "family"
        )
    significant = pl.col("p_adjusted") <= settings.alpha
    return pl.concat(parts).sort("_row").drop("_row").with_columns(
        pl.when(significant & (pl.col("mean_delta") > 0)).then(pl.lit(DECISIONS[0]))
        .when(significant & (pl.col("mean_delta") < 0)).then(pl.lit(DECISIONS[1]))
        .otherwise(pl.lit(DECISIONS[2])).alias("decision")
    )


def _query_labels(
    query_ids: pl.Series, queries: pl.DataFrame, settings: ComparisonSettings
) -> dict[str, np.ndarray]:
    """Slice (and group) labels aligned with ``query_ids``, as string arrays."""
    wanted = [c for c in settings.slice_columns if c in queries.columns]
    if settings.group_column is not None:
        if settings.group_column not in queries.columns:
            raise ValueError(
                f"group_column {settings.group_column!r} is not a queries column; "
                f"columns: {queries.columns}"
            )
        wanted.append(settings.group_column)
    if settings.length_buckets:
        if "text" not in queries.columns:
            raise ValueError(
                "the query_length slice needs the queries' text column; "
                "set length_buckets=() to turn it off"
            )
        wanted.append("text")
    unknown = query_ids.filter(~query_ids.is_in(queries["query_id"].implode()))
    if unknown.len():
        raise ValueError(
            f"{unknown.len()} scored queries are missing from the queries table, "
            f"e.g. {unknown.head(5).to_list()}"
        )
    aligned = pl.DataFrame({"query_id": query_ids}).join(
        queries.select("query_id", *dict.fromkeys(wanted)), on="query_id", how="left"
    )
    labels = {}
    for column in settings.slice_columns:
        if column in aligned.columns:
            labels[column] = (
                aligned[column].cast(pl.String).fill_null(MISSING_SLICE_VALUE).to_numpy()
            )
    if settings.group_column is not None:
        groups = aligned[settings.group_column]
        if groups.null_count():
            nulls = aligned.filter(groups.is_null())["query_id"].head(5).to_list()
            raise ValueError(
                f"group_column {settings.group_column!r} is null for {groups.null_count()} "
                f"queries, e.g. {nulls}; every query needs a group to be resampled with"
            )
        labels[settings.group_column] = groups.cast(pl.String).to_numpy()
    if settings.length_buckets:
        words = aligned["text"].fill_null("").str.count_matches(r"\S+").to_numpy()
        bucket = np.searchsorted(np.asarray(settings.length_buckets), words, side="left")
        labels[QUERY_LENGTH] = np.asarray(length_bucket_names(settings.length_buckets))[bucket]
    return labels


def _top_documents(
    runs: Mapping[str, pl.DataFrame] | pl.DataFrame, *, models: set[str]
) -> pl.DataFrame:
    """``model, query_id, doc_id`` of each model's first-ranked document per query."""
    if isinstance(runs, pl.DataFrame):
        if "model" not in runs.columns:
            raise ValueError("a single runs frame needs a model column; or pass {model: run}")
        frames = [runs]
    else:
        frames = [run.with_columns(pl.lit(model).alias("model")) for model, run in runs.items()]
    present = {str(model) for frame in frames for model in frame["model"].unique()}
    absent = sorted(models - present)
    if absent:
        raise ValueError(
            f"runs has no rows for models {absent}; pass the run of every compared model"
        )
    combined = pl.concat(
        [
            frame.select(
                pl.col("model").cast(pl.String),
                pl.col("query_id").cast(pl.String),
                pl.col("rank").cast(pl.Int64),
                pl.col("doc_id").cast(pl.String),
            )
            for frame in frames
        ]
    )
    return (
        combined.filter(pl.col("model").is_in(sorted(models)))
        .sort("model", "query_id", "rank", "doc_id")
        .group_by("model", "query_id", maintain_order=True)
        .first()
        .select("model", "query_id", "doc_id")
    )
