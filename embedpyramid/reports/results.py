"""The cross-model results database and the leaderboard.

``<data>/results.duckdb`` is rebuilt atomically from the per-partition Parquet artefacts and is
self-contained (the rows are copied in). It exposes the views

- ``per_query_metrics(dataset, model, system, query_id, metric, value)``
- ``leaderboard(dataset, model, system, metric, mean, n)``
- ``runs(dataset, model, system, query_id, rank, doc_id, score)``
- ``qrels(dataset, query_id, doc_id, relevance)``

plus ``models(model, name, card_hash, card)``, ``conventions(dataset, model, system, conventions)``
(the metric conventions of each retrieval partition, and — from ``extra_conventions`` — the
protocol each L2 task number follows: task, protocol, mteb_version under ``protocol: mteb``,
similarity, per (dataset, model, system) of the task summary) and the summary tables passed as
``extra_tables``: ``comparisons`` and ``regressions`` (the paired statistics of
:mod:`embedpyramid.stats.comparisons` and the lists of :mod:`embedpyramid.reports.regressions`;
empty until two models are evaluated on a
dataset), ``hsd`` and ``hsd_pairs`` (the Tukey HSD groups; empty below three models) and
``random_floor`` (every measure under a random ranking), ``system_verdicts`` and ``system_latency``
(pyramid L5: each system against its model's dense exact search, and the latency each stage
adds); and ``efficiency`` (one row per (model,
dataset), :data:`embedpyramid.efficiency.EFFICIENCY_SCHEMA`, joined to the leaderboard: its
``quality_metric`` and ``quality``, the exact run's mean). ``model`` is always the partition key
(``name@hash7``), so two cards never share a row; an L5 system's rows carry the system's name in
``system`` (and ``none`` as the model of a model-independent one such as BM25), and ``models``
lists the cards of the exact partitions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl
import pyarrow as pa

from embedpyramid.efficiency import efficiency_frame
from embedpyramid.retrieval.metrics.measures import parse_measure
from embedpyramid.store import StorePath, local_file, read_table, write_with


@dataclass(frozen=True)
class EvaluatedPartition:
    """The artefacts of one (model, dataset) evaluation that go into the results database."""

    dataset: str
    model_key: str
    model_name: str
    card_hash: str
    card: dict[str, Any]
    system: str
    metrics_path: StorePath
    run_path: StorePath
    qrels_path: StorePath
    conventions: dict[str, Any]
    efficiency_path: StorePath | None = None


def _literal(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _with_labels(table: pa.Table, labels: dict[str, str]) -> pa.Table:
    """``table`` with constant string columns prepended (dataset, model, system)."""
    for position, (name, value) in enumerate(labels.items()):
        table = table.add_column(position, name, pa.array([value] * table.num_rows, pa.string()))
    return table


def build_results_db(
    target: StorePath, partitions: Sequence[EvaluatedPartition], extra_tables: Mapping[str, StorePath] | None = None,
    *, quality_metric: str = "nDCG@10", extra_metrics: Sequence[StorePath] = (),
    extra_conventions: Sequence[StorePath] = (),
) -> StorePath:
    """Write the results database atomically; an empty ``partitions`` is an error.

    ``extra_tables`` maps view names to Parquet files copied in as they are; ``extra_metrics``
    are further long per-query tables appended to ``per_query_metrics`` (e.g. L6's judge and
    answer metrics); ``extra_conventions`` are tables of ``dataset, model, system, conventions``
    (JSON text) whose rows join the ``conventions`` view (the L2 task results'); ``quality_metric``
    is the leaderboard metric the ``efficiency`` view shows beside the costs. Every Parquet file
    is read through the store (literal paths, local or remote) and handed to DuckDB as Arrow.
    """
    if not partitions:
        raise ValueError("no evaluated partitions to summarize: materialize retrieval_metrics first")
    metrics = pa.concat_tables([
        read_table(p.metrics_path, columns=["dataset", "model", "system", "query_id", "metric", "value"])
        for p in partitions] + [read_table(path, columns=["dataset", "model", "system", "query_id", "metric", "value"])
                                for path in extra_metrics])
    runs = pa.concat_tables([
        _with_labels(read_table(p.run_path, columns=["query_id", "rank", "doc_id", "score"]),
                     {"dataset": p.dataset, "model": p.model_key, "system": p.system})
        for p in partitions])
    qrels_paths = {p.dataset: p.qrels_path for p in partitions}
    qrels = pa.concat_tables([
        _with_labels(read_table(path, columns=["query_id", "doc_id", "relevance"]), {"dataset": dataset})
        for dataset, path in sorted(qrels_paths.items())])
    extra = {name: read_table(path) for name, path in (extra_tables or {}).items()}
    conventions = [(p.dataset, p.model_key, p.system, json.dumps(p.conventions, sort_keys=True)) for p in partitions]
    for path in extra_conventions:
        conventions += [(row["dataset"], row["model"], row["system"], row["conventions"]) for row in
                        read_table(path, columns=["dataset", "model", "system", "conventions"]).to_pylist()]
    efficiency = efficiency_frame([]).to_arrow()
    efficiency_tables = [read_table(p.efficiency_path) for p in partitions if p.efficiency_path is not None]
    if efficiency_tables:
        efficiency = pa.concat_tables(efficiency_tables, promote_options="default")

    def write(path: Path) -> None:
        with duckdb.connect(str(path)) as con:
            tables = {"per_query_metrics": metrics, "runs": runs, "qrels": qrels, "efficiency": efficiency, **extra}
            for name, table in tables.items():
                con.register("incoming", table)
                con.execute(f"CREATE TABLE t_{name} AS SELECT * FROM incoming")
                con.unregister("incoming")
            con.execute("CREATE TABLE t_models (model VARCHAR, name VARCHAR, card_hash VARCHAR, card JSON)")
            con.executemany(
                "INSERT INTO t_models VALUES (?, ?, ?, ?)",
                sorted({(p.model_key, p.model_name, p.card_hash, json.dumps(p.card, sort_keys=True, default=str))
                        for p in partitions if p.system == "exact"}),
            )
            con.execute("CREATE TABLE t_conventions (dataset VARCHAR, model VARCHAR, system VARCHAR, conventions JSON)")
            if conventions:
                con.executemany("INSERT INTO t_conventions VALUES (?, ?, ?, ?)", conventions)
            for view in ("per_query_metrics", "runs", "qrels", "models", "conventions", *extra):
                con.execute(f'CREATE VIEW "{view}" AS SELECT * FROM t_{view}')  # quoted: `references` is an SQL keyword
            con.execute(
                "CREATE VIEW leaderboard AS SELECT dataset, model, system, metric, avg(value) AS mean, "
                "count(*) AS n FROM t_per_query_metrics GROUP BY ALL"
            )
            con.execute(
                f"CREATE VIEW efficiency AS SELECT e.*, {_literal(quality_metric)} AS quality_metric, l.mean AS quality "
                "FROM t_efficiency e LEFT JOIN leaderboard l ON l.dataset = e.dataset AND l.model = e.model "
                f"AND l.system = 'exact' AND l.metric = {_literal(quality_metric)}"
            )

    return write_with(write, target)


def read_leaderboard(db_path: StorePath) -> pl.DataFrame:
    return sort_metrics(query_results(db_path, "SELECT * FROM leaderboard ORDER BY dataset, model, system, metric"))


def query_results(db_path: StorePath, sql: str) -> pl.DataFrame:
    """One read-only query of the results database (``embedpyramid query``, the leaderboard).

    A missing database, one held open by a writer, and SQL that DuckDB refuses are each one
    clear error naming the database; the query itself never writes."""
    if not db_path.is_file():
        raise FileNotFoundError(f"{db_path}: no results database yet; run `embedpyramid run` first")
    with local_file(db_path) as local:
        try:
            con = duckdb.connect(str(local), read_only=True)
        except duckdb.IOException as error:
            holder = re.search(r"PID \d+", str(error))
            raise ResultsBusyError(
                f"{db_path}: held open by another process{f' ({holder.group(0)})' if holder else ''}; "
                "close that connection (e.g. a duckdb shell) and retry"
            ) from None
        with con:
            try:
                relation = con.sql(sql)
            except duckdb.Error as error:
                views = ", ".join(name for (name,) in con.execute(
                    "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name").fetchall())
                raise QueryError(f"{db_path}: {str(error).splitlines()[0]} (views: {views})") from None
            if relation is None:
                raise QueryError(f"{db_path}: the statement returned no rows to show; give a SELECT")
            return pl.from_arrow(relation.to_arrow_table())


class QueryError(ValueError):
    """SQL the results database refuses; the message names the database and lists its views."""


class ResultsBusyError(OSError):
    """The results database is locked by another process; the message names the path and the holder."""


def sort_metrics(frame: pl.DataFrame) -> pl.DataFrame:
    """Order rows by dataset, model, system, then metric family and cutoff (not alphabetically),
    metrics that are not retrieval measures last by name; rows that tie keep their order."""
    families = ["nDCG", "Recall", "MAP", "MRR", "P", "Hit", "RPrec", "CompleteEvidence", "Judged"]

    def rank(metric: str) -> tuple[int, float, str]:
        try:
            measure = parse_measure(metric)
        except ValueError:  # another level's metric (judge:relevance, answer:token_f1): after these, by name
            return len(families), 0.0, metric
        return families.index(measure.name), measure.cutoff or float("inf"), ""

    order = {metric: index for index, metric in enumerate(sorted(frame["metric"].unique().to_list(), key=rank))}
    return frame.with_columns(pl.col("metric").replace_strict(order, return_dtype=pl.Int64).alias("_order")).sort(
        [c for c in ("dataset", "model", "system") if c in frame.columns] + ["_order"], maintain_order=True
    ).drop("_order")


def format_leaderboard(frame: pl.DataFrame, fmt: Literal["table", "json", "csv"] = "table",
                       system_metric: str = "nDCG@10") -> str:
    """Render the leaderboard: ``table`` shows, per dataset, metrics as rows and the models' exact
    search as columns with the number of queries on top, then, where L5 systems were evaluated,
    ``system_metric`` per system (rows) and model (columns); json and csv keep the long format."""
    if fmt != "table":
        return format_rows(frame, fmt)
    blocks = []
    for (dataset,), part in frame.partition_by("dataset", as_dict=True, maintain_order=True).items():
        exact = part.filter(pl.col("system") == "exact")
        models = list(dict.fromkeys(exact["model"].to_list()))
        values = {(r["model"], r["metric"]): r for r in exact.iter_rows(named=True)}
        rows = [["n queries", *(str(exact.filter(pl.col("model") == m)["n"].max()) for m in models)]]
        rows += [[metric, *(f"{values[(m, metric)]['mean']:.4f}" if (m, metric) in values else "-" for m in models)]
                 for metric in dict.fromkeys(exact["metric"].to_list())]
        blocks.append(_text_table(f"dataset: {dataset}", ["metric", *models], rows))
        systems = part.filter((pl.col("system") != "exact") & (pl.col("metric") == system_metric))
        if systems.height:
            means = {(r["system"], r["model"]): r["mean"] for r in systems.iter_rows(named=True)}
            columns = list(dict.fromkeys(systems["model"].to_list()))
            rows = [[name, *(f"{means[(name, m)]:.4f}" if (name, m) in means else "-" for m in columns)]
                    for name in dict.fromkeys(systems["system"].to_list())]
            blocks.append(_text_table(f"dataset: {dataset} · L5 systems, {system_metric}", ["system", *columns], rows))
    return "\n\n".join(blocks)


def format_rows(frame: pl.DataFrame, fmt: Literal["table", "json", "csv"] = "table") -> str:
    """Any query's rows: a text table, JSON records or CSV (``embedpyramid query``)."""
    if fmt == "json":
        return json.dumps(frame.to_dicts(), indent=2, default=str)
    if fmt == "csv":
        return frame.write_csv()
    rows = [["" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value) for value in row]
            for row in frame.iter_rows()]
    return _text_table(f"{frame.height} rows", frame.columns, rows)


def _text_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)
