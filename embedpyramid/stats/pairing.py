"""The per-query table and the pairing of models on it: validation, the compared pairs and their
per-query deltas, and one dataset's queries.

Every comparison is derived from the long per-query table
``dataset, model, system, query_id, metric, value``. Two models are paired on ``query_id``
within one dataset and system; the per-query delta is ``value_b - value_a`` with ``model_a``
the baseline (or, for all pairs, the earlier model), and a delta within ``tie_epsilon`` of 0 is
exactly 0. :mod:`embedpyramid.stats.comparisons`, :mod:`embedpyramid.stats.hsd_tables` and
:mod:`embedpyramid.summary.regressions` all read the table through here.
"""

from __future__ import annotations

import itertools

import polars as pl

from embedpyramid.config.comparison import ComparisonSettings

PER_QUERY_COLUMNS = ("dataset", "model", "system", "query_id", "metric", "value")
PAIR_KEYS = ("dataset", "system", "model_a", "model_b")

DELTA_SCHEMA: dict[str, pl.DataType] = {
    **{key: pl.String() for key in PAIR_KEYS},
    "metric": pl.String(),
    "query_id": pl.String(),
    "value_a": pl.Float64(),
    "value_b": pl.Float64(),
    "delta": pl.Float64(),
}


def query_deltas(per_query: pl.DataFrame, settings: ComparisonSettings) -> pl.DataFrame:
    """Per-query paired values of every compared pair, one row per query and metric.

    Columns: dataset, system, model_a, model_b, metric, query_id, value_a, value_b, delta
    (``value_b - value_a``, set to exactly 0 where ``|value_b - value_a| <= tie_epsilon``: a tie
    is a tie in every statistic computed from the deltas, so float dust never enters a
    resample, a test or an effect size). Pairs are formed within each (dataset, system). Raises when the
    baseline is absent, a (model, query, metric) appears twice, a value is not finite, or one
    model of a pair lacks a query or metric the other has.
    """
    per_query = validated_per_query(per_query)
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


def _tied_to_zero(delta: pl.Expr, tie_epsilon: float) -> pl.Expr:
    return pl.when(delta.abs() <= tie_epsilon).then(pl.lit(0.0)).otherwise(delta)


def validated_per_query(
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


def dataset_queries(queries: pl.DataFrame, dataset: str, datasets: list[str]) -> pl.DataFrame:
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
