"""The regression lists of the comparison report: each pair's worst regressions and best
improvements on one metric, joined with the query text, the relevant documents and each model's
first-ranked document (and its text, given the corpus), so a reader sees *which* queries got
worse and what each model retrieved for them."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats.pairing import PAIR_KEYS, dataset_queries, query_deltas, validated_per_query

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
    per_query = validated_per_query(per_query)
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
    texts = dataset_queries(queries, dataset, [dataset]).select("query_id", "text")
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
