"""The cross-model results database and the leaderboard.

``<data>/results.duckdb`` is built from the per-partition Parquet artefacts and is self-contained
(the rows are copied in). It grows with what changed: the large tables — per-query metrics, runs
and qrels — are updated file by file. Each of their rows carries the file it came from
(``_source``, relative to the data folder) and ``t_sources`` holds each file's fingerprint
(:func:`embedpyramid.store.file_fingerprint`); a build starts from a copy of the current
database, deletes the rows of the files that changed or left, and reads in only the files that
changed or are new. A new model on one dataset reads that partition's files, not every
partition's. The small tables (models, conventions, efficiency and the summary tables, which
the summaries rewrite on every run anyway) are rebuilt whole. The copy is moved into place only
once it is complete, so a reader never sees half a database; a database of another layout (or
one the update cannot take) is rebuilt from scratch. It exposes the views

- ``per_query_metrics(dataset, model, system, query_id, metric, value)``
- ``leaderboard(dataset, model, system, metric, mean, n)``
- ``runs(dataset, model, system, query_id, rank, doc_id, score)``
- ``qrels(dataset, query_id, doc_id, relevance)``

plus ``models(model, name, card_hash, card)``, ``conventions(dataset, model, system, conventions)``
(the metric conventions of each retrieval partition, and — from ``extra_conventions`` — the
protocol each L2 task number follows: task, protocol, mteb_version under ``protocol: mteb``,
similarity, per (dataset, model, system) of the task summary) and the summary tables passed as
``extra_tables``: ``comparisons`` and ``regressions`` (the paired statistics of
:mod:`embedpyramid.stats.comparisons` and the lists of :mod:`embedpyramid.summary.regressions`;
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import polars as pl
import pyarrow as pa

from embedpyramid.config.measures import parse_measure
from embedpyramid.current_inputs import EvaluatedPartition
from embedpyramid.efficiency import efficiency_frame
from embedpyramid.store import StorePath, file_fingerprint, local_file, read_table, write_with


def sql_literal(value: object) -> str:
    """``value`` as an SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _with_labels(table: pa.Table, labels: dict[str, str]) -> pa.Table:
    """``table`` with constant string columns prepended (dataset, model, system)."""
    for position, (name, value) in enumerate(labels.items()):
        table = table.add_column(position, name, pa.array([value] * table.num_rows, pa.string()))
    return table


RESULTS_LAYOUT = 1
"""The version of the database's own tables (``t_*``, ``_source``, ``t_sources``): a database of
another version is rebuilt from scratch."""

METRIC_COLUMNS = ["dataset", "model", "system", "query_id", "metric", "value"]
INCREMENTAL = ("per_query_metrics", "runs", "qrels")
"""The tables updated file by file; every other table is rebuilt whole."""
_INCREMENTAL_SCHEMAS = {
    "per_query_metrics": "dataset VARCHAR, model VARCHAR, system VARCHAR, query_id VARCHAR, metric VARCHAR, "
                         "value DOUBLE, _source VARCHAR",
    "runs": "dataset VARCHAR, model VARCHAR, system VARCHAR, query_id VARCHAR, rank BIGINT, doc_id VARCHAR, "
            "score FLOAT, _source VARCHAR",
    "qrels": "dataset VARCHAR, query_id VARCHAR, doc_id VARCHAR, relevance INTEGER, _source VARCHAR",
}
"""The incremental tables as they are before any file is read into them (a config of task
datasets only has no retrieval run)."""


@dataclass(frozen=True)
class _Source:
    """One Parquet file of an incremental table, with the constant columns its rows get."""

    table: str
    path: StorePath
    columns: list[str]
    labels: dict[str, str]


@dataclass(frozen=True)
class ResultsDatabase:
    """A built results database: its path, and how many source files were read into it and how
    many were kept from the previous build unread."""

    path: StorePath
    sources_read: int
    sources_kept: int


def _source_key(path: StorePath, root: StorePath) -> str:
    """A source's name in the database: its path relative to the data folder when it lies under
    it (so a local and a remote data folder name their files alike), else the path."""
    try:
        return path.relative_to(root).as_posix()
    except (ValueError, TypeError):
        return str(path)


def _sources(partitions: Sequence[EvaluatedPartition], extra_metrics: Sequence[StorePath]) -> list[_Source]:
    run_columns = ["query_id", "rank", "doc_id", "score"]
    sources = [_Source("per_query_metrics", p.metrics_path, METRIC_COLUMNS, {}) for p in partitions]
    sources += [_Source("per_query_metrics", path, METRIC_COLUMNS, {}) for path in extra_metrics]
    sources += [_Source("runs", p.run_path, run_columns, {"dataset": p.dataset, "model": p.model_key,
                                                          "system": p.system}) for p in partitions]
    qrels_paths = {p.dataset: p.qrels_path for p in partitions}
    sources += [_Source("qrels", path, ["query_id", "doc_id", "relevance"], {"dataset": dataset})
                for dataset, path in sorted(qrels_paths.items())]
    return sources


def build_results_db(
    target: StorePath, partitions: Sequence[EvaluatedPartition],
    extra_tables: Mapping[str, StorePath | pa.Table] | None = None,
    *, quality_metric: str = "nDCG@10", extra_metrics: Sequence[StorePath] = (),
    extra_conventions: Sequence[StorePath] = (),
) -> ResultsDatabase:
    """Write the results database, updating the current one (see the module docstring); with no
    ``partitions`` (a config of task datasets only) the retrieval tables are empty, and an error
    when there is nothing else to hold either.

    ``extra_tables`` maps view names to Parquet files (or Arrow tables) copied in as they are; ``extra_metrics``
    are further long per-query tables appended to ``per_query_metrics`` (e.g. L6's judge and
    answer metrics); ``extra_conventions`` are tables of ``dataset, model, system, conventions``
    (JSON text) whose rows join the ``conventions`` view (the L2 task results'); ``quality_metric``
    is the report metric: the one the ``efficiency`` view shows beside the costs and the
    ``report_settings`` view names. Every Parquet file
    is read through the store (literal paths, local or remote) and handed to DuckDB as Arrow.
    """
    if not partitions and not extra_tables:
        raise ValueError("nothing evaluated to summarize: materialize retrieval_metrics or a task first")
    root = target.parent
    sources = {(source.table, _source_key(source.path, root)): source for source in _sources(partitions, extra_metrics)}
    fingerprints = {key: file_fingerprint(source.path) for key, source in sources.items()}
    extra = {name: source if isinstance(source, pa.Table) else read_table(source)
             for name, source in (extra_tables or {}).items()}
    conventions = [(p.dataset, p.model_key, p.system, json.dumps(p.conventions, sort_keys=True)) for p in partitions]
    for path in extra_conventions:
        conventions += [(row["dataset"], row["model"], row["system"], row["conventions"]) for row in
                        read_table(path, columns=["dataset", "model", "system", "conventions"]).to_pylist()]
    efficiency = efficiency_frame([]).to_arrow()
    efficiency_tables = [read_table(p.efficiency_path) for p in partitions if p.efficiency_path is not None]
    if efficiency_tables:
        efficiency = pa.concat_tables(efficiency_tables, promote_options="default")
    counts = {"read": 0, "kept": 0}

    def update(con: duckdb.DuckDBPyConnection) -> None:
        kept = _kept_sources(con)
        for table in INCREMENTAL:
            stale = sorted(source for (name, source), fingerprint in kept.items()
                           if name == table and fingerprints.get((name, source)) != fingerprint)
            if stale:
                con.execute(f"DELETE FROM t_{table} WHERE _source IN (SELECT unnest(?))", [stale])
        existing = _tables(con)
        for (table, key), source in sources.items():
            if kept.get((table, key)) == fingerprints[(table, key)]:
                counts["kept"] += 1
                continue
            rows = _with_labels(read_table(source.path, columns=source.columns), {**source.labels, "_source": key})
            con.register("incoming", rows)
            if f"t_{table}" in existing:
                con.execute(f"INSERT INTO t_{table} BY NAME SELECT * FROM incoming")
            else:
                con.execute(f"CREATE TABLE t_{table} AS SELECT * FROM incoming")
                existing.add(f"t_{table}")
            con.unregister("incoming")
            counts["read"] += 1
        for table in INCREMENTAL:
            if f"t_{table}" not in existing:
                con.execute(f"CREATE TABLE t_{table} ({_INCREMENTAL_SCHEMAS[table]})")
        _replace_table(con, "t_sources", _string_table(["table", "source", "fingerprint"], [
            (table, key, fingerprint) for (table, key), fingerprint in sorted(fingerprints.items())]))
        con.execute(f"CREATE OR REPLACE TABLE t_layout AS SELECT {RESULTS_LAYOUT} AS version")
        for name, table in {"efficiency": efficiency, **extra}.items():
            _replace_table(con, f"t_{name}", table)
        for name in _tables(con) - {f"t_{table}" for table in (*INCREMENTAL, "efficiency", *extra)} - {
                "t_sources", "t_layout", "t_models", "t_conventions"}:
            con.execute(f'DROP VIEW IF EXISTS "{name[2:]}"')
            con.execute(f'DROP TABLE "{name}"')  # a summary table no longer passed in
        models = sorted({(p.model_key, p.model_name, p.card_hash, json.dumps(p.card, sort_keys=True, default=str))
                         for p in partitions if p.system == "exact"})
        _replace_table(con, "t_models", _string_table(["model", "name", "card_hash", "card"], models),
                       json_columns=["card"])
        _replace_table(con, "t_conventions", _string_table(["dataset", "model", "system", "conventions"], conventions),
                       json_columns=["conventions"])
        for view in INCREMENTAL:
            con.execute(f'CREATE OR REPLACE VIEW "{view}" AS SELECT * EXCLUDE (_source) FROM t_{view}')
        for view in ("models", "conventions", *extra):
            con.execute(f'CREATE OR REPLACE VIEW "{view}" AS SELECT * FROM t_{view}')  # quoted: `references` is a keyword
        con.execute(
            "CREATE OR REPLACE VIEW leaderboard AS SELECT dataset, model, system, metric, avg(value) AS mean, "
            "count(*) AS n FROM t_per_query_metrics GROUP BY ALL"
        )
        con.execute(f"CREATE OR REPLACE VIEW report_settings AS SELECT {sql_literal(quality_metric)} AS report_metric")
        con.execute(
            f"CREATE OR REPLACE VIEW efficiency AS SELECT e.*, {sql_literal(quality_metric)} AS quality_metric, "
            "l.mean AS quality FROM t_efficiency e LEFT JOIN leaderboard l ON l.dataset = e.dataset "
            f"AND l.model = e.model AND l.system = 'exact' AND l.metric = {sql_literal(quality_metric)}"
        )

    def write(path: Path) -> None:
        copied = path.is_file()  # write_with put the current database there
        try:
            _write_whole(path, update, target)
            return
        except duckdb.Error:
            if not copied:
                raise
        # The current database could not take the update (a table's columns changed, a damaged
        # file): build this one from scratch.
        for leftover in (path, path.with_name(path.name + ".wal")):
            leftover.unlink(missing_ok=True)
        counts.update(read=0, kept=0)
        _write_whole(path, update, target)

    path = write_with(write, target, from_target=True)
    return ResultsDatabase(path, counts["read"], counts["kept"])


_DISK_FULL = re.compile("No space left on device|File too large|Disk quota exceeded")


def _write_whole(path: Path, update: Callable[[duckdb.DuckDBPyConnection], None], target: StorePath) -> None:
    """Run ``update`` on the database at ``path`` and leave all of it in that one file.

    DuckDB writes to a write-ahead log beside the file and folds it in when the connection
    closes, saying nothing when that fails (a full disk): the file is then left without the
    latest tables, and a copy of it alone would lose them. The log is folded in by an explicit
    ``CHECKPOINT``, which raises, and a log still there after closing is an error too. A full
    disk is raised as an :class:`OSError` naming ``target`` (the database being replaced)."""
    try:
        with duckdb.connect(str(path)) as con:
            update(con)
            con.execute("CHECKPOINT")
    except duckdb.Error as error:
        if full := _DISK_FULL.search(str(error)):
            raise OSError(f"{target}: the results database cannot be written ({full[0]}); "
                          "free space on that disk and rerun: the previous database and every finished artefact "
                          "are kept") from error
        raise
    log = path.with_name(path.name + ".wal")
    if log.exists():
        raise OSError(f"{target}: DuckDB could not fold its write-ahead log into the database (is the disk full?); "
                      "free space and rerun: the previous database is kept")


def _string_table(columns: list[str], rows: Sequence[tuple[str, ...]]) -> pa.Table:
    return pa.table({name: pa.array([row[i] for row in rows], pa.string()) for i, name in enumerate(columns)})


def _replace_table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, *,
                   json_columns: Sequence[str] = ()) -> None:
    """Create (or replace) table ``name`` from an Arrow table, ``json_columns`` typed JSON."""
    con.register("incoming", table)
    columns = ", ".join(f'"{column}"::JSON AS "{column}"' if column in json_columns else f'"{column}"'
                        for column in table.column_names)
    con.execute(f'CREATE OR REPLACE TABLE {name} AS SELECT {columns} FROM incoming')
    con.unregister("incoming")


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}


def _kept_sources(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], str]:
    """The fingerprints of the files the current database holds, or nothing when it is of
    another layout (its tables are then dropped, to be built again)."""
    tables = _tables(con)
    layout = con.execute("SELECT max(version) FROM t_layout").fetchone()[0] if "t_layout" in tables else None
    if layout == RESULTS_LAYOUT and "t_sources" in tables:
        return {(table, source): fingerprint for table, source, fingerprint in
                con.execute('SELECT "table", source, fingerprint FROM t_sources').fetchall()}
    for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{name}"')
    for name in tables:
        con.execute(f'DROP TABLE "{name}"')
    return {}


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
