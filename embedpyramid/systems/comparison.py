"""Pyramid L5 across models: which systems are evaluated, their verdicts against dense exact,
the latency each stage adds, and the report section.

A system's evaluation counts only when its stored summary carries the current hash of the
system (:attr:`~embedpyramid.config.systems.SystemsConfig.hashes`): results of edited settings
that have not been recomputed yet are listed as missing, never mixed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from embedpyramid.config import ProjectConfig
from embedpyramid.config.comparison import comparison_settings
from embedpyramid.config.slices import ALL_QUERIES
from embedpyramid.config.systems import MODEL_INDEPENDENT
from embedpyramid.current_inputs import EvaluatedPartition, SummaryInputs, system_asset_name
from embedpyramid.data import open_frozen
from embedpyramid.rendering.document import ReportSection
from embedpyramid.rendering.tables import format_interval, format_pvalue
from embedpyramid.retrieval.level import read_metrics_manifest
from embedpyramid.stats.comparisons import COMPARISON_SCHEMA
from embedpyramid.stats.families import CONFIRMATORY
from embedpyramid.store import ArtifactStore, read_frame
from embedpyramid.systems.level import SUMMARY_SCHEMA, read_system_summary, systems_dir
from embedpyramid.systems.verdict import system_comparisons

_RENAMED = {"system": "model", "model_a": "system_a", "model_b": "system_b"}
SYSTEM_VERDICT_SCHEMA: dict[str, pl.DataType] = {
    **{_RENAMED.get(name, name): dtype for name, dtype in COMPARISON_SCHEMA.items()}, "verdict": pl.String(),
}
""":func:`~embedpyramid.systems.system_comparisons`: the comparisons table with ``model`` for
``system`` and ``system_a`` (``exact``) / ``system_b`` for ``model_a`` / ``model_b``, plus ``verdict``."""
LATENCY_SCHEMA = SUMMARY_SCHEMA
"""One row per evaluated (dataset, model, system): the stored summary of each system."""


def system_partitions(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs,
                      datasets: Sequence[str] | None = None) -> tuple[list[EvaluatedPartition], list[str]]:
    """The stored, current (dataset, model, system) evaluations of ``systems.yaml`` on ``datasets``
    (every dataset by default), as partitions of the results database (``model`` is ``none`` for
    a model-independent system), and the missing or outdated ones ("rrf: minilm-l6@… ×
    chatterbot"); those ``inputs`` names as not current are left out."""
    systems = config.systems
    if systems is None:
        return [], []
    found, missing = [], []
    for dataset in config.datasets if datasets is None else datasets:
        for name in systems.systems:
            models = [None] if systems.model_independent(name) else [
                model for model in config.models.values() if systems.applies_to(name, model.name)]
            for model in models:
                key = MODEL_INDEPENDENT if model is None else model.key
                if not inputs.admits(system_asset_name(name), dataset, None if model is None else model.key):
                    continue
                directory = systems_dir(store, dataset, key, name)
                metrics_path = store.metrics_path(dataset, key, name)
                current = ((directory / "summary.parquet").is_file() and metrics_path.is_file()
                           and read_system_summary(store, dataset, key, name)["system_hash"][0] == systems.hashes[name])
                if not current:
                    missing.append(f"{name}: {key} × {dataset}")
                    continue
                found.append(EvaluatedPartition(
                    dataset=dataset, model_key=key, model_name=MODEL_INDEPENDENT if model is None else model.name,
                    card_hash="" if model is None else model.card_hash, card={} if model is None else model.hashed_fields(),
                    system=name, metrics_path=metrics_path, run_path=directory / "run.parquet",
                    qrels_path=store.dataset_dir(dataset) / "qrels.parquet",
                    conventions=read_metrics_manifest(metrics_path)["conventions"],
                ))
    return found, missing


def system_verdicts(
    config: ProjectConfig, store: ArtifactStore, exact: list[EvaluatedPartition], systems: list[EvaluatedPartition],
) -> pl.DataFrame:
    """Per dataset, every evaluated system against its model's exact run (a model-independent
    system against every model's): :func:`~embedpyramid.systems.system_comparisons` over all
    metrics and slices, confirmatory family (the report metric over all queries) Holm-adjusted
    across the dataset's models × systems."""
    frames = []
    for dataset in config.datasets:
        evaluated = [p for p in [*exact, *systems] if p.dataset == dataset]
        if not any(p.system != "exact" for p in evaluated) or not any(p.system == "exact" for p in evaluated):
            continue
        per_query = pl.concat([read_frame(p.metrics_path) for p in evaluated])
        queries = read_frame(open_frozen(store.dataset_dir(dataset)).path("queries"))
        frames.append(system_comparisons(per_query, queries, comparison_settings(config, dataset)))
    if not frames:
        return pl.DataFrame(schema=SYSTEM_VERDICT_SCHEMA)
    return pl.concat(frames).select(list(SYSTEM_VERDICT_SCHEMA)).cast(SYSTEM_VERDICT_SCHEMA)


def system_latency(store: ArtifactStore, systems: list[EvaluatedPartition]) -> pl.DataFrame:
    """The stored summary of every evaluated system: settings, hash, candidate depth and the
    latency each stage adds (p50/p95 ms per query)."""
    frames = [read_system_summary(store, p.dataset, p.model_key, p.system) for p in systems]
    return pl.concat(frames) if frames else pl.DataFrame(schema=LATENCY_SCHEMA)


def report_section(
    dataset: str, metric: str, verdicts: pl.DataFrame, latency: pl.DataFrame, leaderboard: pl.DataFrame,
) -> list[ReportSection]:
    """The L5 section of one dataset: systems × models on ``metric`` with each system's paired
    verdict against the same model's dense exact search, and the latency each stage adds."""
    rows = latency.filter(pl.col("dataset") == dataset)
    if not rows.height:
        return []
    confirmatory = verdicts.filter(
        (pl.col("dataset") == dataset) & (pl.col("metric") == metric) & (pl.col("slice_column") == ALL_QUERIES)
        & (pl.col("family") == CONFIRMATORY))
    exact = leaderboard.filter((pl.col("dataset") == dataset) & (pl.col("metric") == metric)
                               & (pl.col("system") == "exact")).select("model", pl.col("mean").alias("exact"))
    table = confirmatory.join(exact, on="model", how="left").select(
        pl.col("system_b").alias("system"), "model", "exact", pl.col("mean_b").alias(metric),
        pl.col("mean_delta").alias("Δ vs exact"),
        pl.struct("ci_low", "ci_high").map_elements(lambda r: format_interval(r["ci_low"], r["ci_high"]),
                                                    return_dtype=pl.String()).alias("unadjusted CI"),
        pl.col("p_adjusted").map_elements(format_pvalue, return_dtype=pl.String()).alias("p (Holm)"),
        pl.format("{}/{}/{}", "wins", "ties", "losses").alias("W/T/L"), "verdict", "n",
    )
    stages = rows.select("system", "model", "kind", "inputs", "candidate_depth", "p50_ms", "p95_ms",
                         "latency_queries", "latency_scope", "tuned_on", "system_hash")
    confidence = verdicts["confidence"][0] if verdicts.height else None
    level = f"{confidence:.0%} " if confidence is not None else ""
    not_compared = sorted(set(rows["system"].to_list()) - set(confirmatory["system_b"].to_list()))
    return [ReportSection(
        title=f"L5 hybrid and rerank systems: {dataset}",
        intro=(
            f"Each system of systems.yaml against the same model's dense exact search on {metric} over all queries "
            f"(a model-independent system such as BM25, model `none`, against every model's exact run): the paired "
            f"delta with its unadjusted {level}bootstrap CI, the sign-flip p-value Holm-adjusted across the dataset's models × "
            "systems, wins/ties/losses per query. Latency is what each stage adds per query (p50/p95 ms, batch 1, "
            "wall clock; its scope says what was timed), beside its inputs and candidate depth. A weighted fusion "
            "says where its weight came from (`tuned_on`)."
            + (f" Not compared (no exact run of the same model): {', '.join(not_compared)}." if not_compared else "")
        ),
        tables=((f"Systems vs dense exact ({metric})", table), ("Latency each stage adds", stages)),
    )]
