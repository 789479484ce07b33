"""The cross-model results database and the leaderboard.

``<data>/results.duckdb`` is rebuilt atomically from the per-partition Parquet artefacts and is
self-contained (the rows are copied in). It exposes the views

- ``per_query_metrics(dataset, model, system, query_id, metric, value)``
- ``leaderboard(dataset, model, system, metric, mean, n)``
- ``runs(dataset, model, system, query_id, rank, doc_id, score)``
- ``qrels(dataset, query_id, doc_id, relevance)``

plus ``models(model, name, card_hash, card)``, ``conventions(dataset, model, system, conventions)``
and the summary tables passed as ``extra_tables``: ``comparisons`` and ``regressions`` (the paired
statistics of :mod:`embedpyramid.stats.compare`; empty until two models are evaluated on a
dataset), ``hsd`` and ``hsd_pairs`` (the Tukey HSD groups; empty below three models) and
``random_floor`` (every measure under a random ranking); and ``efficiency`` (one row per (model,
dataset), :data:`embedpyramid.efficiency.EFFICIENCY_SCHEMA`, joined to the leaderboard: its
``quality_metric`` and ``quality``, the exact run's mean). ``model`` is always the partition key
(``name@hash7``), so two cards never share a row.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl

from embedpyramid.efficiency import efficiency_frame
from embedpyramid.retrieval.metrics import parse_measure
from embedpyramid.store import read_table, write_with


@dataclass(frozen=True)
class EvaluatedPartition:
    """The artefacts of one (model, dataset) evaluation that go into the results database."""

    dataset: str
    model_key: str
    model_name: str
    card_hash: str
    card: dict[str, Any]
    system: str
    metrics_path: Path
    run_path: Path
    qrels_path: Path
    conventions: dict[str, Any]
    efficiency_path: Path | None = None


def _literal(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def build_results_db(
    target: Path, partitions: Sequence[EvaluatedPartition], extra_tables: Mapping[str, Path] | None = None,
    *, quality_metric: str = "nDCG@10",
) -> Path:
    """Write the results database atomically; an empty ``partitions`` is an error.

    ``extra_tables`` maps view names to Parquet files copied in as they are; ``quality_metric``
    is the leaderboard metric the ``efficiency`` view shows beside the costs.
    """
    if not partitions:
        raise ValueError("no evaluated partitions to summarize: materialize retrieval_metrics first")

    def write(path: Path) -> None:
        with duckdb.connect(str(path)) as con:
            # DuckDB's read_parquet expands '[', ']', '?' and '*' in a path as a glob, even in a file
            # name that exists: every file is read by the literal-path reader and handed over as Arrow.
            scans = itertools.count()

            def scan(parquet: Path) -> str:
                name = f"parquet_{next(scans)}"
                con.register(name, read_table(parquet))
                return name

            metrics = [f"SELECT dataset, model, system, query_id, metric, value FROM {scan(p.metrics_path)}"
                       for p in partitions]
            con.execute("CREATE TABLE t_per_query_metrics AS " + " UNION ALL ".join(metrics))
            runs = [
                f"SELECT {_literal(p.dataset)} AS dataset, {_literal(p.model_key)} AS model, {_literal(p.system)} AS system, "
                f"query_id, rank, doc_id, score FROM {scan(p.run_path)}"
                for p in partitions
            ]
            con.execute("CREATE TABLE t_runs AS " + " UNION ALL ".join(runs))
            qrels = [
                f"SELECT {_literal(dataset)} AS dataset, query_id, doc_id, relevance FROM {scan(path)}"
                for dataset, path in sorted({(p.dataset, p.qrels_path) for p in partitions})
            ]
            con.execute("CREATE TABLE t_qrels AS " + " UNION ALL ".join(qrels))
            con.execute("CREATE TABLE t_models (model VARCHAR, name VARCHAR, card_hash VARCHAR, card JSON)")
            con.executemany(
                "INSERT INTO t_models VALUES (?, ?, ?, ?)",
                sorted({(p.model_key, p.model_name, p.card_hash, json.dumps(p.card, sort_keys=True, default=str)) for p in partitions}),
            )
            con.execute("CREATE TABLE t_conventions (dataset VARCHAR, model VARCHAR, system VARCHAR, conventions JSON)")
            con.executemany(
                "INSERT INTO t_conventions VALUES (?, ?, ?, ?)",
                [(p.dataset, p.model_key, p.system, json.dumps(p.conventions, sort_keys=True)) for p in partitions],
            )
            extra = dict(extra_tables or {})
            for name, path in extra.items():
                con.execute(f"CREATE TABLE t_{name} AS SELECT * FROM {scan(path)}")
            for view in ("per_query_metrics", "runs", "qrels", "models", "conventions", *extra):
                con.execute(f"CREATE VIEW {view} AS SELECT * FROM t_{view}")
            con.execute(
                "CREATE VIEW leaderboard AS SELECT dataset, model, system, metric, avg(value) AS mean, "
                "count(*) AS n FROM t_per_query_metrics GROUP BY ALL"
            )
            efficiency = [p.efficiency_path for p in partitions if p.efficiency_path is not None]
            scanned = [f"SELECT * FROM {scan(path)}" for path in efficiency]
            if not scanned:
                con.register("no_efficiency", efficiency_frame([]).to_arrow())
                scanned = ["SELECT * FROM no_efficiency"]
            con.execute("CREATE TABLE t_efficiency AS " + " UNION ALL BY NAME ".join(scanned))
            con.execute(
                f"CREATE VIEW efficiency AS SELECT e.*, {_literal(quality_metric)} AS quality_metric, l.mean AS quality "
                "FROM t_efficiency e LEFT JOIN leaderboard l ON l.dataset = e.dataset AND l.model = e.model "
                f"AND l.system = 'exact' AND l.metric = {_literal(quality_metric)}"
            )

    return write_with(write, target)


def read_leaderboard(db_path: Path) -> pl.DataFrame:
    if not db_path.is_file():
        raise FileNotFoundError(f"{db_path}: no results database yet; run `embedpyramid run` first")
    with duckdb.connect(str(db_path), read_only=True) as con:
        frame = pl.from_arrow(con.sql("SELECT * FROM leaderboard ORDER BY dataset, model, system, metric").to_arrow_table())
    return sort_metrics(frame)


def sort_metrics(frame: pl.DataFrame) -> pl.DataFrame:
    """Order rows by dataset, model, system, then metric family and cutoff (not alphabetically);
    rows that tie keep their order."""
    families = ["nDCG", "Recall", "MAP", "MRR", "P", "Hit", "RPrec", "CompleteEvidence", "Judged"]

    def rank(metric: str) -> tuple[int, float]:
        measure = parse_measure(metric)
        return families.index(measure.name), measure.cutoff or float("inf")

    order = {metric: index for index, metric in enumerate(sorted(frame["metric"].unique().to_list(), key=rank))}
    return frame.with_columns(pl.col("metric").replace_strict(order, return_dtype=pl.Int64).alias("_order")).sort(
        [c for c in ("dataset", "model", "system") if c in frame.columns] + ["_order"], maintain_order=True
    ).drop("_order")


def format_leaderboard(frame: pl.DataFrame, fmt: Literal["table", "json", "csv"] = "table") -> str:
    """Render the leaderboard: ``table`` shows, per dataset, metrics as rows and models as
    columns with the number of queries on top; json and csv keep the long format."""
    if fmt == "json":
        return json.dumps(frame.to_dicts(), indent=2)
    if fmt == "csv":
        return frame.write_csv()
    blocks = []
    for (dataset,), part in frame.partition_by("dataset", as_dict=True, maintain_order=True).items():
        columns = list(dict.fromkeys(zip(part["model"].to_list(), part["system"].to_list(), strict=True)))
        values = {(r["model"], r["system"], r["metric"]): r for r in part.iter_rows(named=True)}
        metrics = list(dict.fromkeys(part["metric"].to_list()))
        header = ["metric", *(model if system == "exact" else f"{model} ({system})" for model, system in columns)]
        rows = [["n queries", *(str(part.filter((pl.col("model") == m) & (pl.col("system") == s))["n"].max()) for m, s in columns)]]
        rows += [[metric, *(f"{values[(m, s, metric)]['mean']:.4f}" if (m, s, metric) in values else "-" for m, s in columns)]
                 for metric in metrics]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines = [f"dataset: {dataset}", "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
