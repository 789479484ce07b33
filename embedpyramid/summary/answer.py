"""The answer on one screen: what ``embedpyramid run`` ends with and ``embedpyramid leaderboard``
prints, read from the results database and the verdicts the report wrote.

Per retrieval dataset, a table of models × headline metrics: the report metric with the 95% t
interval of its mean over queries, the recall at the deepest cutoff and MRR@10 (where measured),
and the group letter (models sharing a letter are not distinguishable on the report metric:
Tukey HSD with three or more models, the confirmatory Holm test with two). Then one table of the
task datasets (each one's verdict score per model, its HSD letter where the score is per item),
and one verdict line per dataset. Every metric, system and verdict is in the report and in
``embedpyramid leaderboard --all``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from embedpyramid.stats.student_t import t_quantile
from embedpyramid.store import StorePath, read_json
from embedpyramid.summary.report import VERDICT_FILE, headline_metrics, verdict_lines
from embedpyramid.summary.results import query_results, sql_literal

EXACT = "exact"
SPLIT_ORDER = ("test", "all", "cv")
"""Which split of a task dataset's summary the table shows, first found first."""


def terminal_answer(db_path: StorePath, report_dir: StorePath) -> str:
    """The compact leaderboard, then one verdict line per dataset."""
    verdicts = _verdicts(report_dir)
    blocks = [compact_leaderboard(db_path, verdicts), _reproduction_line(db_path)]
    lines = verdict_lines(verdicts)
    if lines:
        blocks.append("\n".join(["verdict (one line per dataset; the report has every system and metric):",
                                 *(f"  {line}" for line in lines)]))
    return "\n\n".join(block for block in blocks if block)


def compact_leaderboard(db_path: StorePath, verdicts: Sequence[dict] | None = None) -> str:
    """Per retrieval dataset its headline table, then the task datasets' table."""
    views = _views(db_path)
    report_metric = query_results(db_path, "SELECT report_metric FROM report_settings")["report_metric"][0]
    leaderboard = query_results(db_path, "SELECT * FROM leaderboard WHERE system = 'exact'")
    blocks = [_retrieval_table(db_path, views, dataset, part, report_metric)
              for (dataset,), part in leaderboard.partition_by("dataset", as_dict=True, maintain_order=True).items()]
    tasks = _task_table(db_path, verdicts or []) if {"task_summary", "task_hsd"} <= views else ""
    return "\n\n".join([*blocks, *([tasks] if tasks else [])])


def _retrieval_table(db_path: StorePath, views: set[str], dataset: str, part: pl.DataFrame, report_metric: str) -> str:
    metrics = headline_metrics(part["metric"].unique().to_list(), report_metric)
    spread = query_results(db_path, (
        "SELECT model, avg(value) AS mean, stddev_samp(value) AS sd, count(*) AS n FROM per_query_metrics "
        f"WHERE dataset = {sql_literal(dataset)} AND system = 'exact' AND metric = {sql_literal(report_metric)} "
        "GROUP BY model"))
    intervals = {row["model"]: _t_interval(row["mean"], row["sd"], row["n"]) for row in spread.iter_rows(named=True)}
    letters = _groups(db_path, views, dataset, report_metric)
    means = {(row["model"], row["metric"]): row["mean"] for row in part.iter_rows(named=True)}
    models = sorted(dict.fromkeys(part["model"].to_list()), key=lambda m: -(means.get((m, report_metric)) or -math.inf))
    n = int(part.filter(pl.col("metric") == report_metric)["n"].max() or part["n"].max())
    header = ["model", *(f"{m} (95% CI)" if m == report_metric and intervals else m for m in metrics), "group"]
    rows = [[model, *(_cell(means.get((model, m)), intervals.get(model) if m == report_metric else None)
                      for m in metrics), letters.get(model, "")] for model in models]
    return _table(f"{dataset} · {n:,} queries · exact search", header, rows)


def _t_interval(mean: float, sd: float | None, n: int) -> tuple[float, float] | None:
    """The 95% t interval of a mean over ``n`` queries (none below two)."""
    if n < 2 or sd is None or not math.isfinite(sd):
        return None
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def _groups(db_path: StorePath, views: set[str], dataset: str, metric: str) -> dict[str, str]:
    """Group letters on ``metric``: the Tukey HSD's, else the confirmatory Holm test's (two models:
    one letter unless the test separates them); none before anything is compared."""
    where = f"dataset = {sql_literal(dataset)} AND system = 'exact' AND metric = {sql_literal(metric)}"
    hsd = query_results(db_path, f"SELECT model, letters FROM hsd WHERE {where}") if "hsd" in views else None
    if hsd is not None and hsd.height:
        return dict(hsd.rows())
    if "comparisons" not in views:
        return {}
    holm = query_results(db_path, f"SELECT model_a, model_b, decision FROM comparisons WHERE {where} "
                                  "AND family = 'confirmatory' AND slice_column = 'all'")
    if holm.height != 1:
        return {}
    row = holm.row(0, named=True)
    better, worse = {"better": (row["model_b"], row["model_a"]), "worse": (row["model_a"], row["model_b"])}.get(
        row["decision"], (None, None))
    if better is None:
        return {row["model_a"]: "a", row["model_b"]: "a"}
    return {better: "a", worse: "b"}


def _task_table(db_path: StorePath, verdicts: Sequence[dict]) -> str:
    """One row per task dataset: the score its (first) verdict reads, per model, with its HSD letter."""
    scores = {}
    for verdict in verdicts:
        if "task" in verdict and verdict["dataset"] not in scores:
            scores[verdict["dataset"]] = (verdict["task"], verdict["system"], verdict["metric"], verdict.get("unit"))
    if not scores:
        return ""
    summary = query_results(db_path, "SELECT * FROM task_summary WHERE subset = 'all'")
    letters = query_results(db_path, "SELECT dataset, system, metric, model, letters FROM task_hsd")
    models = list(dict.fromkeys(summary["model"].to_list()))
    rows = []
    for dataset, (task, system, metric, unit) in scores.items():
        found = summary.filter((pl.col("dataset") == dataset) & (pl.col("system") == system) & (pl.col("metric") == metric))
        split = next((s for s in SPLIT_ORDER if s in found["split"].to_list()), found["split"][0] if found.height else "")
        found = found.filter(pl.col("split") == split)
        values = {row["model"]: row for row in found.iter_rows(named=True)}
        marks = {row[3]: row[4] for row in letters.rows() if row[:3] == (dataset, system, metric)}
        n = max((row["n_items"] or 0 for row in values.values()), default=0)
        rows.append([dataset, task, f"{system} · {metric}", f"{n:,} {unit}",
                     *(f"{values[m]['value']:.4f} {marks.get(m, '')}".rstrip() if m in values else "-" for m in models)])
    return _table("task datasets · each one's verdict score (HSD group where the score is per item)",
                  ["dataset", "task", "score", "n", *models], rows)


def _reproduction_line(db_path: StorePath) -> str:
    """How the published scores fared (none: nothing to say)."""
    if "reproduction" not in _views(db_path):
        return ""
    counts = dict(query_results(db_path, "SELECT status, count(*) AS n FROM reproduction GROUP BY status").rows())
    if not counts:
        return ""
    total = sum(counts.values())
    return (f"published scores: {total} checked — " + ", ".join(f"{counts[status]} {status}" for status in
                                                             ("pass", "fail", "not measured") if status in counts)
            + " (the report's Reproduction section)")


def _views(db_path: StorePath) -> set[str]:
    return set(query_results(db_path, "SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"])


def _verdicts(report_dir: StorePath) -> list[dict]:
    path = report_dir / VERDICT_FILE
    return list(read_json(path)) if path.is_file() else []


def _cell(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" + (f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else "")


def _table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [title, "  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)

