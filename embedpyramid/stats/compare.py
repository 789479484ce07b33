"""Paired comparisons of models on per-query metrics: the comparisons table and regression lists.

Every number here is derived from the long per-query table
``dataset, model, system, query_id, metric, value``. Two models are paired on ``query_id``
within one dataset and system; the per-query delta is ``value_b - value_a`` with ``model_a``
the baseline (or, for all pairs, the earlier model). For each pair and each slice of the queries
(all of them, each value of each slice column, each query-length bucket) the metrics are
summarised jointly: one paired bootstrap (:func:`embedpyramid.stats.paired_bootstrap`) and one
sign-flip test (:func:`embedpyramid.stats.paired_sign_flip_test`) over the (queries x metrics)
delta matrix, so every metric of a comparison sees the same resamples. The p-values of one
dataset form one Holm family (pairs x metrics x slices), stated in ``holm_family``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.stats import holm_adjust, paired_bootstrap, paired_sign_flip_test, win_tie_loss
from embedpyramid.stats.bootstrap import percentile_rank

ALL_QUERIES = "all"
"""``slice_column`` and ``slice_value`` of the row that covers every query of the pair."""
QUERY_LENGTH = "query_length"
"""``slice_column`` of the word-count buckets computed from the query text."""
MISSING_SLICE_VALUE = "(missing)"
"""``slice_value`` of queries whose slice column is null."""

PER_QUERY_COLUMNS = ("dataset", "model", "system", "query_id", "metric", "value")
PAIR_KEYS = ("dataset", "system", "model_a", "model_b")
_HOLM_COLUMNS = ("p_holm", "holm_family")

COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(),
    "system": pl.String(),
    "metric": pl.String(),
    "model_a": pl.String(),
    "model_b": pl.String(),
    "slice_column": pl.String(),
    "slice_value": pl.String(),
    "n": pl.Int64(),
    "n_units": pl.Int64(),
    "mean_a": pl.Float64(),
    "mean_b": pl.Float64(),
    "mean_delta": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "boot_median": pl.Float64(),
    "share_above_zero": pl.Float64(),
    "p_value": pl.Float64(),
    "p_holm": pl.Float64(),
    "holm_family": pl.String(),
    "wins": pl.Int64(),
    "ties": pl.Int64(),
    "losses": pl.Int64(),
    "small_slice": pl.Boolean(),
    "confidence": pl.Float64(),
    "n_resamples": pl.Int64(),
    "n_permutations": pl.Int64(),
    "seed": pl.Int64(),
    "resampling": pl.String(),
}


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
    "gold_doc_ids": pl.List(pl.String()),
    "top1_a": pl.String(),
    "top1_b": pl.String(),
    "top1_a_text": pl.String(),
    "top1_b_text": pl.String(),
}


@dataclass(frozen=True)
class ComparisonSettings:
    """How models are paired, resampled, tested and sliced.

    ``baseline`` is ``model_a`` of every comparison (``all_pairs`` adds every other pair, the
    earlier model in sorted order as ``model_a``). ``n_resamples`` bootstrap resamples and
    ``n_permutations`` sign patterns, both seeded by ``seed``; ``confidence`` is the interval's
    level. ``tie_epsilon``: ``|delta| <= tie_epsilon`` is a tie. Slices with fewer than
    ``min_slice_n`` queries are flagged ``small_slice``. ``worst_n`` regressions and
    improvements are listed per pair. ``group_column`` (a queries column such as a session or
    source document) makes whole groups the resampling unit. ``slice_columns`` are queries
    columns to slice by, used where the dataset has them. ``length_buckets`` are inclusive upper
    word-count edges of the computed ``query_length`` slice: ``(4, 8, 16)`` gives
    ``<=4``, ``5-8``, ``9-16`` and ``>16`` words; ``()`` turns that slice off.
    """

    baseline: str
    all_pairs: bool = False
    n_resamples: int = 10_000
    n_permutations: int = 10_000
    seed: int = 42
    confidence: float = 0.95
    tie_epsilon: float = 1e-9
    min_slice_n: int = 20
    worst_n: int = 10
    group_column: str | None = None
    slice_columns: tuple[str, ...] = ("category",)
    length_buckets: tuple[int, ...] = (4, 8, 16)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slice_columns", tuple(self.slice_columns))
        object.__setattr__(self, "length_buckets", tuple(self.length_buckets))
        if not self.baseline:
            raise ValueError("baseline must name the model every other model is compared with")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1; got {self.confidence}")
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
        reserved = {ALL_QUERIES, QUERY_LENGTH, "query_id", "text"}
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
    (``value_b - value_a``). Pairs are formed within each (dataset, system). Raises when the
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
                    (pl.col("value_b") - pl.col("value_a")).alias("delta"),
                )
            )
    return pl.concat(frames) if frames else pl.DataFrame(schema=DELTA_SCHEMA)


def compare_models(
    per_query: pl.DataFrame, queries: pl.DataFrame, settings: ComparisonSettings
) -> pl.DataFrame:
    """The comparisons table: one row per dataset x system x metric x model pair x slice.

    ``queries`` holds ``query_id``, ``text`` and the slice (and group) columns; with a
    ``dataset`` column it may cover several datasets, without one ``per_query`` must hold a
    single dataset. Columns are those of :data:`COMPARISON_SCHEMA`: the pair's means, the mean
    delta with its paired bootstrap interval (``ci_low``, ``ci_high``), the bootstrap median
    and share of resamples above zero, the sign-flip ``p_value``, its Holm adjustment
    ``p_holm`` within the dataset's family (described in ``holm_family``), win/tie/loss counts,
    and ``small_slice`` when ``n < min_slice_n`` (flagged, never dropped). Metrics keep their
    order of first appearance; slices run ``all``, then each slice column's sorted values, then
    the query-length buckets.
    """
    deltas = query_deltas(per_query, settings)
    first_seen = per_query["metric"].cast(pl.String).unique(maintain_order=True)
    metric_order = {metric: index for index, metric in enumerate(first_seen)}
    datasets = per_query["dataset"].cast(pl.String).unique().sort().to_list()
    records = []
    for pair_index, (keys, pair) in enumerate(
        deltas.partition_by(list(PAIR_KEYS), as_dict=True, maintain_order=True).items()
    ):
        query_ids, metrics, matrices = _pair_matrices(pair, keys, metric_order)
        dataset_queries = _dataset_queries(queries, keys[0], datasets)
        labels = _query_labels(query_ids, dataset_queries, settings)
        groups = None if settings.group_column is None else labels[settings.group_column]
        for slice_index, (slice_column, slice_value, mask) in enumerate(
            _slices(labels, query_ids.len(), settings)
        ):
            statistics = _slice_statistics(
                matrices, mask, None if groups is None else groups[mask], settings
            )
            records += [
                {
                    **dict(zip(PAIR_KEYS, keys, strict=True)),
                    "metric": metric,
                    "slice_column": slice_column,
                    "slice_value": slice_value,
                    **{name: values[index].item() for name, values in statistics.items()},
                    "_order": (pair_index, metric_order[metric], slice_index),
                }
                for index, metric in enumerate(metrics)
            ]

    settings_columns = {
        "confidence": settings.confidence,
        "n_resamples": settings.n_resamples,
        "n_permutations": settings.n_permutations,
        "seed": settings.seed,
        "resampling": settings.resampling,
    }
    record_schema = {
        name: dtype
        for name, dtype in COMPARISON_SCHEMA.items()
        if name not in (*_HOLM_COLUMNS, *settings_columns)
    }
    record_schema["_order"] = pl.List(pl.Int64())
    table = pl.DataFrame(records, schema=record_schema).sort("_order").drop("_order")
    return _with_holm(
        table.with_columns(
            pl.lit(value, dtype=COMPARISON_SCHEMA[name]).alias(name)
            for name, value in settings_columns.items()
        )
    ).select(list(COMPARISON_SCHEMA))


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
    improvement ``delta > tie_epsilon``; ties on delta are ordered by query_id. Columns:
    dataset, system, metric, model_a, model_b, direction (``"regression"``/``"improvement"``),
    rank, query_id, text, value_a, value_b, delta, gold_doc_ids (relevance >= 1, most relevant
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
        .with_columns((pl.int_range(pl.len()).over("_pair", "direction") + 1).alias("rank"))
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


def _word_range(lower: int, upper: int) -> str:
    return f"{lower} words" if lower == upper else f"{lower}-{upper} words"


def _validated_per_query(per_query: pl.DataFrame) -> pl.DataFrame:
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


def _pair_matrices(
    pair: pl.DataFrame, keys: tuple[str, ...], metric_order: dict[str, int]
) -> tuple[pl.Series, list[str], dict[str, np.ndarray]]:
    """Sorted query ids, the pair's metrics, and (queries x metrics) delta/value matrices."""
    metrics = sorted(pair["metric"].unique().to_list(), key=metric_order.__getitem__)
    query_ids = pair["query_id"].unique().sort()
    shape = (query_ids.len(), len(metrics))
    if pair.height != shape[0] * shape[1]:
        dataset, system, model_a, model_b = keys
        raise ValueError(
            f"dataset {dataset!r}, system {system!r}: models {model_a!r} and {model_b!r} "
            f"hold {pair.height} (query, metric) values for {shape[0]} queries x "
            f"{shape[1]} metrics; every scored query needs every metric"
        )
    ordered = pair.with_columns(
        pl.col("metric").replace_strict(metric_order, return_dtype=pl.Int64).alias("_rank")
    ).sort("query_id", "_rank")
    matrices = {
        column: ordered[column].to_numpy().reshape(shape)
        for column in ("delta", "value_a", "value_b")
    }
    return query_ids, metrics, matrices


def _slice_statistics(
    matrices: dict[str, np.ndarray],
    mask: np.ndarray,
    groups: np.ndarray | None,
    settings: ComparisonSettings,
) -> dict[str, np.ndarray]:
    """Per-metric statistics of one slice: every metric resampled and sign-flipped jointly."""
    deltas = matrices["delta"][mask]
    boot = paired_bootstrap(
        deltas,
        n_resamples=settings.n_resamples,
        confidence=settings.confidence,
        seed=settings.seed,
        groups=groups,
    )
    wins, ties, losses = win_tie_loss(deltas, settings.tie_epsilon)
    n_metrics = deltas.shape[1]
    n = deltas.shape[0]
    return {
        "n": np.full(n_metrics, n),
        "n_units": np.full(n_metrics, boot.n_units),
        "mean_a": matrices["value_a"][mask].mean(axis=0),
        "mean_b": matrices["value_b"][mask].mean(axis=0),
        "mean_delta": boot.mean,
        "ci_low": boot.ci_low,
        "ci_high": boot.ci_high,
        "boot_median": boot.median,
        "share_above_zero": boot.share_above_zero,
        "p_value": paired_sign_flip_test(
            deltas, n_permutations=settings.n_permutations, seed=settings.seed, groups=groups
        ),
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "small_slice": np.full(n_metrics, n < settings.min_slice_n),
    }


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


def _slices(
    labels: dict[str, np.ndarray], n_queries: int, settings: ComparisonSettings
) -> list[tuple[str, str, np.ndarray]]:
    """(slice_column, slice_value, mask) for all queries, each slice value, each length bucket."""
    slices = []
    for column in (c for c in settings.slice_columns if c in labels):
        values = labels[column]
        present = sorted(set(values.tolist()) - {MISSING_SLICE_VALUE})
        if (values == MISSING_SLICE_VALUE).any():
            present.append(MISSING_SLICE_VALUE)
        slices += [(column, value, values == value) for value in present]
    if QUERY_LENGTH in labels:
        buckets = labels[QUERY_LENGTH]
        slices += [
            (QUERY_LENGTH, name, buckets == name)
            for name in length_bucket_names(settings.length_buckets)
            if (buckets == name).any()
        ]
    return [(ALL_QUERIES, ALL_QUERIES, np.ones(n_queries, dtype=bool)), *slices]


def _with_holm(table: pl.DataFrame) -> pl.DataFrame:
    """Holm-adjust the p-values within each dataset and state that family."""
    families = []
    for (dataset,), family in table.partition_by(
        "dataset", as_dict=True, maintain_order=True
    ).items():
        n_pairs = family.select(*PAIR_KEYS[1:]).unique().height
        n_metrics = family["metric"].n_unique()
        n_slices = family.select("slice_column", "slice_value").unique().height
        n_tests = family.height
        counts = [_count(n_pairs, "pair"), _count(n_metrics, "metric"), _count(n_slices, "slice")]
        if n_pairs * n_metrics * n_slices == n_tests:
            description = f"dataset={dataset}: {' × '.join(counts)} = {_count(n_tests, 'test')}"
        else:
            description = (
                f"dataset={dataset}: {_count(n_tests, 'test')} ({', '.join(counts)}; "
                "not every combination occurs)"
            )
        families.append(
            family.with_columns(
                pl.Series("p_holm", holm_adjust(family["p_value"].to_numpy())),
                pl.lit(description).alias("holm_family"),
            )
        )
    if not families:
        return table.with_columns(
            pl.lit(None, dtype=COMPARISON_SCHEMA[name]).alias(name) for name in _HOLM_COLUMNS
        )
    return pl.concat(families)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
