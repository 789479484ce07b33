"""Cross-model summaries: which partitions are evaluated, their paired comparisons, the report.

The report holds the leaderboard, the comparisons and, per (model, dataset), the L1 section.

Everything here is derived from the per-query metric tables of the current cards: the
comparisons (every model against the baseline, per dataset, metric and slice), the worst
regressions on the report metric, the per-query deltas behind the distributions, and the
Markdown/HTML report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from embedpyramid.config import ProjectConfig
from embedpyramid.data import open_frozen
from embedpyramid.efficiency import cost_axis, cost_quality_svg, efficiency_path, pareto_front
from embedpyramid.geometry.level import l1_dir
from embedpyramid.geometry.level import report_section as l1_section
from embedpyramid.reports import ComparisonReport, Figure, ReportFiles, ReportSection, write_report
from embedpyramid.reports.results import EvaluatedPartition, sort_metrics
from embedpyramid.retrieval.level import read_metrics_manifest
from embedpyramid.serving.level import report_section as l4_section
from embedpyramid.serving.level import serving_dir
from embedpyramid.stats.compare import (
    COMPARISON_SCHEMA,
    DELTA_SCHEMA,
    REGRESSION_SCHEMA,
    compare_models,
    query_deltas,
    regressions,
)
from embedpyramid.store import ArtifactStore, read_frame, write_parquet

EXACT = "exact"
COMPARISON_TABLES = ("comparisons", "regressions", "deltas")


def evaluated_partitions(config: ProjectConfig, store: ArtifactStore) -> tuple[list[EvaluatedPartition], list[str]]:
    """The (model, dataset) evaluations of the current cards that exist on disk, and the missing ones."""
    found, missing = [], []
    for dataset in config.datasets:
        for model in config.models.values():
            metrics_path = store.metrics_path(dataset, model.key, EXACT)
            if not metrics_path.is_file():
                missing.append(f"{model.key} × {dataset}")
                continue
            found.append(EvaluatedPartition(
                dataset=dataset, model_key=model.key, model_name=model.name, card_hash=model.card_hash,
                card=model.hashed_fields(), system=EXACT, metrics_path=metrics_path,
                run_path=store.run_dir(dataset, model.key) / f"{EXACT}.parquet",
                qrels_path=store.dataset_dir(dataset) / "qrels.parquet",
                conventions=read_metrics_manifest(metrics_path)["conventions"],
                efficiency_path=efficiency if (efficiency := efficiency_path(store, dataset, model.key)).is_file()
                else None,
            ))
    return found, missing


@dataclass(frozen=True)
class ComparisonTables:
    """The comparisons table, the regression lists and the per-query deltas of one summary."""

    comparisons: pl.DataFrame
    regressions: pl.DataFrame
    deltas: pl.DataFrame
    skipped: list[str]

    def write(self, directory: Path) -> dict[str, Path]:
        return {name: write_parquet(getattr(self, name).to_arrow(), directory / f"{name}.parquet")
                for name in COMPARISON_TABLES}


def read_comparison_tables(directory: Path) -> ComparisonTables:
    tables = {name: read_frame(directory / f"{name}.parquet") for name in COMPARISON_TABLES}
    return ComparisonTables(**tables, skipped=[])


def compare_evaluated(config: ProjectConfig, store: ArtifactStore, partitions: list[EvaluatedPartition]) -> ComparisonTables:
    """Paired comparisons per dataset: every evaluated model against the baseline (all pairs
    if configured); datasets where the baseline or every other model is missing are skipped
    and listed."""
    metric = config.protocol.comparison.report_metric
    baseline = config.baseline.key
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in COMPARISON_TABLES}
    skipped = []
    for dataset in config.datasets:
        evaluated = [p for p in partitions if p.dataset == dataset]
        models = {p.model_key for p in evaluated}
        if baseline not in models or len(models) < 2:
            skipped.append(f"{dataset}: needs the baseline {baseline} and another evaluated model "
                           f"(evaluated: {', '.join(sorted(models)) or 'none'})")
            continue
        settings = config.comparison_settings(dataset)
        frozen = open_frozen(store.dataset_dir(dataset))
        per_query = sort_metrics(pl.concat([read_frame(p.metrics_path) for p in evaluated]))
        queries = read_frame(frozen.path("queries"))
        parts["comparisons"].append(compare_models(per_query, queries, settings))
        parts["regressions"].append(regressions(
            per_query, queries, read_frame(frozen.path("qrels")),
            {p.model_key: read_frame(p.run_path) for p in evaluated}, settings, metric,
            corpus=read_frame(frozen.path("corpus"), columns=["doc_id", "text"]),
        ))
        parts["deltas"].append(query_deltas(per_query.filter(pl.col("metric") == metric), settings))
    schemas = {"comparisons": COMPARISON_SCHEMA, "regressions": REGRESSION_SCHEMA, "deltas": DELTA_SCHEMA}
    tables = {name: pl.concat(frames) if frames else pl.DataFrame(schema=schemas[name]) for name, frames in parts.items()}
    return ComparisonTables(**tables, skipped=skipped)


def build_report(
    config: ProjectConfig, store: ArtifactStore, leaderboard: pl.DataFrame, tables: ComparisonTables
) -> ReportFiles:
    """Write report.md, report.html and the SVG figures under the store's report folder: the
    comparisons, then per dataset its data notes (empty or dropped texts), the cost/quality of
    its models, and the L1 and L4 sections of every evaluated (model, dataset)."""
    sections = []
    for dataset in config.datasets:
        sections.extend(data_notes_section(store, dataset))
        sections.extend(cost_quality_section(config, store, dataset, leaderboard))
        for model in config.models.values():
            l1 = l1_dir(store, dataset, model.key)
            if (l1 / "price.parquet").is_file() and (l1 / "geometry.json").is_file():
                sections.append(l1_section(l1, model.key, dataset))
            if (serving_dir(store, dataset, model.key) / "frontier.parquet").is_file():
                sections.append(l4_section(store, dataset, model.key))
    return write_report(store.report_dir, ComparisonReport(
        leaderboard=leaderboard, comparisons=tables.comparisons, regressions=tables.regressions,
        deltas=tables.deltas, metric=config.protocol.comparison.report_metric,
        title="Embedding model evaluation", sections=tuple(sections),
    ))


def data_notes_section(store: ArtifactStore, dataset: str) -> list[ReportSection]:
    """A section listing the dataset's empty texts (kept, encoded as the empty string) and what
    ``empty_texts: drop`` removed, when there is any."""
    if not (store.dataset_dir(dataset) / "manifest.json").is_file():
        return []
    manifest = open_frozen(store.dataset_dir(dataset)).manifest
    empty = manifest.get("empty_texts", {})
    dropped = manifest["source"].get("empty_texts", {})
    rows = [(kind, "kept, encoded as the empty string", ", ".join(ids)) for kind, ids in empty.items() if ids]
    rows += [(kind.removeprefix("dropped_"), "dropped (empty_texts: drop)", ", ".join(map(str, ids)))
             for kind, ids in dropped.items() if kind.startswith("dropped_") and ids]
    if not rows:
        return []
    table = pl.DataFrame(rows, schema=["texts", "what happened", "ids"], orient="row")
    return [ReportSection(title=f"Data notes: {dataset}",
                          intro=f"Empty texts in {dataset} (policy empty_texts: {dropped.get('policy', 'keep')}).",
                          tables=(("Empty texts", table),))]


def cost_quality_section(
    config: ProjectConfig, store: ArtifactStore, dataset: str, leaderboard: pl.DataFrame
) -> list[ReportSection]:
    """Quality and cost side by side for the evaluated models of one dataset, with the
    cost/quality Pareto plot (models no other model beats on both)."""
    paths = [efficiency_path(store, dataset, m.key) for m in config.models.values()]
    frames = [read_frame(path) for path in paths if path.is_file()]
    if not frames:
        return []
    metric = config.protocol.comparison.report_metric
    quality = leaderboard.filter((pl.col("dataset") == dataset) & (pl.col("metric") == metric)
                                 & (pl.col("system") == EXACT)).select("model", pl.col("mean").alias(metric))
    table = pl.concat(frames).join(quality, on="model", how="left")
    cost, label = cost_axis(table)
    front = set(pareto_front(table.filter(pl.col(cost).is_not_null() & pl.col(metric).is_not_null()), cost, metric)["model"])
    shown = table.select(
        "model", metric, pl.col("model").is_in(list(front)).alias("pareto"), "documents_per_second",
        "queries_per_second_encoded", "latency_p50_ms", "latency_p95_ms", "search_qps", "bytes_per_vector",
        "encode_peak_rss_bytes", "device", "threads", "cost_basis", "device_seconds", "tokens_billed", "cost",
        "reembed_device_seconds", "reembed_cost",
    )
    figures = ()
    if table.filter(pl.col(cost).is_not_null() & pl.col(metric).is_not_null()).height:
        svg = cost_quality_svg(table, cost, metric, title=f"{metric} vs cost on {dataset}", xlabel=label, ylabel=metric)
        figures = (Figure(f"cost-quality-{dataset}", f"{metric} against {label} ({dataset}); the line is the Pareto front",
                          svg),)
    return [ReportSection(
        title=f"Cost and quality: {dataset}",
        intro=(f"Per model: {metric} beside what it costs to run — encode throughput at the card's batch size "
               "(documents and queries apart), query-encode latency at batch 1 (warm, repeated; remote cards: per "
               "request during the encode), exact-search QPS, bytes per vector, peak RSS of the encode, device and "
               "threads, and cost: API price × tokens for remote cards, device-seconds (× the card's price per device "
               "hour, when set) for local ones; 're-embed' is the corpus alone. 'pareto' marks the models no other "
               "model beats on both quality and cost."),
        tables=(("Cost and quality", shown),),
        figures=figures,
    )]
