"""What the report over every level holds, gathered from each level's results: the sections of
every dataset (data notes, cost and quality, L1 and L4 per model, L5 systems, L6 grades), the L2
task families, the L3 reproduction and transfer, the environment record, the pyramid overview
and the verdicts; :mod:`embedpyramid.summary.report` lays them out and renders them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from embedpyramid.config import ProjectConfig
from embedpyramid.current_inputs import (
    EFFICIENCY,
    NORM_GEOMETRY,
    NORMALIZATION_PRICE,
    RETRIEVAL_METRICS,
    SERVING_FRONTIER,
    SummaryInputs,
)
from embedpyramid.data import open_frozen
from embedpyramid.downstream.grades import report_sections as l6_sections
from embedpyramid.downstream.grades import verdict_sentences as l6_verdicts
from embedpyramid.efficiency import cost_axis, cost_quality_svg, efficiency_path, pareto_front
from embedpyramid.geometry.level import report_section as l1_section
from embedpyramid.geometry.paths import l1_dir
from embedpyramid.rendering.document import DocumentFiles, Figure, ReportSection
from embedpyramid.retrieval.level import read_metrics_manifest
from embedpyramid.serving.level import report_section as l4_section
from embedpyramid.serving.level import serving_dir
from embedpyramid.store import ArtifactStore, read_frame, write_json
from embedpyramid.summary.comparisons import EXACT, ComparisonTables
from embedpyramid.summary.environment import environment_section
from embedpyramid.summary.overview import OVERVIEW_FILE, OverviewLine, pyramid_overview
from embedpyramid.summary.report import VERDICT_FILE, ComparisonReport, verdict_lines, write_report
from embedpyramid.systems.comparison import report_section as l5_section
from embedpyramid.tasks.comparison import read_task_summary, task_report_sections, tasks_summary_dir
from embedpyramid.transfer.level import pair_verdict, read_transfer, transfer_dir
from embedpyramid.transfer.level import report_sections as transfer_sections


def build_report(
    config: ProjectConfig, store: ArtifactStore, leaderboard: pl.DataFrame, tables: ComparisonTables, *,
    inputs: SummaryInputs,
) -> DocumentFiles:
    """Write report.md, report.html and the SVG figures under the store's report folder: the
    verdict, the leaderboard with its floor, the HSD groups, the comparisons, then per dataset its
    data notes (empty or dropped texts), the cost/quality of its models, the L1 and L4 sections
    of every evaluated (model, dataset), its L5 systems and its L6 grade analysis; then the L2
    task families, the L3 reproduction and transfer sections, and the environment record. It
    opens with the pyramid overview (:func:`overview_lines`) and the verdicts, also written as
    ``overview.json`` and ``verdict.json`` beside the report for the CLI. The input partitions of ``inputs`` (not current) are left out
    and listed in their own section."""
    sections, conventions, datasets = [], [], []
    sections.extend(excluded_section(inputs))
    for dataset in config.datasets:
        directory = store.dataset_dir(dataset)
        if (directory / "manifest.json").is_file():
            datasets.append({"dataset": dataset, "manifest": open_frozen(directory).manifest})
        sections.extend(data_notes_section(store, dataset))
        sections.extend(cost_quality_section(config, store, dataset, leaderboard, inputs))
        for model in config.models.values():
            metrics_path = store.metrics_path(dataset, model.key, EXACT)
            if metrics_path.is_file() and inputs.admits(RETRIEVAL_METRICS, dataset, model.key):
                manifest = read_metrics_manifest(metrics_path)
                conventions.append({"dataset": dataset, "model": model.key, "conventions": manifest["conventions"],
                                    "tied_queries": manifest.get("tied_queries", 0)})
            l1 = l1_dir(store, dataset, model.key)
            if ((l1 / "price.parquet").is_file() and (l1 / "geometry.json").is_file()
                    and inputs.admits(NORM_GEOMETRY, dataset, model.key)
                    and inputs.admits(NORMALIZATION_PRICE, dataset, model.key)):
                sections.append(l1_section(l1, model.key, dataset))
            if ((serving_dir(store, dataset, model.key) / "frontier.parquet").is_file()
                    and inputs.admits(SERVING_FRONTIER, dataset, model.key)):
                sections.append(l4_section(store, dataset, model.key))
        sections.extend(l5_section(dataset, config.protocol.comparison.report_metric, tables.system_verdicts,
                                   tables.system_latency, leaderboard))
        if config.downstream:
            sections.extend(l6_sections(store, dataset))
    task_summary = read_task_summary(tasks_summary_dir(store))
    sections.extend(task_report_sections(config, task_summary))
    sections.extend(transfer_sections(transfer_dir(store)))
    cards = [{"model": m.key, "card": m.hashed_fields(), "run": m.card.run.model_dump()} for m in config.models.values()]
    overview = overview_lines(config, store, tables, inputs=inputs)
    write_json([line.as_dict() for line in overview], store.report_dir / OVERVIEW_FILE)
    verdicts = [*tables.verdicts, *(task_summary.verdicts if task_summary else [])]
    write_json(verdicts, store.report_dir / VERDICT_FILE)
    return write_report(store.report_dir, ComparisonReport(
        leaderboard=leaderboard, comparisons=tables.comparisons, regressions=tables.regressions,
        deltas=tables.deltas, metric=config.protocol.comparison.report_metric,
        title="Embedding model evaluation", sections=tuple(sections),
        verdicts=tuple(verdict["text"] for verdict in verdicts), verdict_lines=tuple(verdict_lines(verdicts)),
        hsd=tables.hsd, hsd_pairs=tables.hsd_pairs, floor=tables.random_floor,
        notes=tuple(_tie_notes(conventions)),
        environment=(environment_section(cards, datasets, conventions),),
        overview=tuple(overview),
    ))


def overview_lines(config: ProjectConfig, store: ArtifactStore, tables: ComparisonTables, *,
                   inputs: SummaryInputs) -> list[OverviewLine]:
    """The pyramid overview of every dataset with data, from the tables the report shows: the
    verdicts and comparisons, the current efficiency and L4 sweep summaries, the L5 verdicts,
    the L6 grade verdicts and the L3 pairs."""
    datasets = list(config.datasets_with_data())
    efficiency, serving = [], {}
    for dataset in datasets:
        for model in config.models.values():
            path = efficiency_path(store, dataset, model.key)
            if path.is_file() and inputs.admits(EFFICIENCY, dataset, model.key):
                efficiency.append(read_frame(path).with_columns(pl.lit(dataset).alias("dataset")))
            summary = serving_dir(store, dataset, model.key) / "summary.parquet"
            if summary.is_file() and inputs.admits(SERVING_FRONTIER, dataset, model.key):
                frame = read_frame(summary).with_columns(pl.lit(dataset).alias("dataset"))
                serving[model.key] = pl.concat([serving[model.key], frame], how="diagonal_relaxed") \
                    if model.key in serving else frame
    transfer_directory = transfer_dir(store)
    transfer = None
    if (transfer_directory / "pairs.parquet").is_file():
        transfer = [(pair["own_dataset"], pair_verdict(pair))
                    for pair in read_transfer(transfer_directory).pairs.iter_rows(named=True)]
    return pyramid_overview(
        datasets, metric=config.protocol.comparison.report_metric, verdicts=tables.verdicts,
        comparisons=tables.comparisons,
        efficiency=pl.concat(efficiency, how="diagonal_relaxed") if efficiency else None, serving=serving,
        system_verdicts=tables.system_verdicts,
        downstream={dataset: l6_verdicts(store, dataset) for dataset in datasets} if config.downstream else None,
        transfer=transfer,
    )


def _tie_notes(conventions: list[dict[str, Any]]) -> list[str]:
    """One sentence per dataset: how many queries had score ties across a cutoff, per model."""
    notes = []
    for dataset in dict.fromkeys(entry["dataset"] for entry in conventions):
        entries = [entry for entry in conventions if entry["dataset"] == dataset]
        rules = sorted({entry["conventions"].get("ties", "doc_id") for entry in entries})
        counts = "; ".join(f"{entry['model']}: {entry['tied_queries']:,}" for entry in entries)
        notes.append(
            f"{dataset}: queries whose score ties straddle a cutoff (the tie rule, {', '.join(rules)}, decides "
            f"their numbers) — {counts}."
        )
    return notes
def excluded_section(inputs: SummaryInputs) -> list[ReportSection]:
    """The input partitions left out of every table and test because they are not current."""
    if not inputs.excluded:
        return []
    return [ReportSection(
        title="Excluded partitions",
        intro=("These results on disk were not computed from the current inputs (stale), were never computed, or "
               "their last run failed: no table, test or verdict of this report uses them. `embedpyramid run` "
               "brings them up to date."),
        tables=(("Excluded partitions", inputs.frame()),),
    )]


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
    config: ProjectConfig, store: ArtifactStore, dataset: str, leaderboard: pl.DataFrame, inputs: SummaryInputs,
) -> list[ReportSection]:
    """Quality and cost side by side for the evaluated models of one dataset (those whose
    efficiency is current), with the cost/quality Pareto plot (models no other model beats on both)."""
    paths = [efficiency_path(store, dataset, m.key) for m in config.models.values()
             if inputs.admits(EFFICIENCY, dataset, m.key)]
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
