"""Cross-model comparisons: which (model, dataset) partitions are evaluated and current, and
their paired comparisons.

Everything here is derived from the per-query metric tables of the current cards: the
comparisons (every model against the baseline, per dataset, metric and slice, in two test
families), the Tukey HSD of the report metric when three or more models are evaluated, the
random-ranking floor of every measure, the worst regressions on the report metric, the
per-query deltas behind the distributions, the L5 system verdicts and latencies, and the
verdict of each dataset. The report that shows them is built by :mod:`embedpyramid.summary.contents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.config.comparison import comparison_settings
from embedpyramid.current_inputs import (
    DOWNSTREAM_ANSWERS,
    EFFICIENCY,
    RETRIEVAL_METRICS,
    EvaluatedPartition,
    SummaryInputs,
)
from embedpyramid.data import FrozenDataset, open_frozen
from embedpyramid.downstream.grades import collect_downstream, compare_downstream
from embedpyramid.efficiency import efficiency_path
from embedpyramid.encode import cached_embedding_path, read_embedding_metadata, read_embeddings, read_token_counts
from embedpyramid.retrieval.level import read_metrics_manifest
from embedpyramid.retrieval.metrics.floor import random_ranking_floor
from embedpyramid.stats.comparisons import COMPARISON_SCHEMA, compare_models
from embedpyramid.stats.hsd_tables import HSD_PAIR_SCHEMA, HSD_SCHEMA, tukey_hsd_tables
from embedpyramid.stats.pairing import DELTA_SCHEMA, query_deltas
from embedpyramid.stats.verdict import dataset_verdicts
from embedpyramid.store import ArtifactStore, StorePath, read_frame, read_json, write_json, write_parquet
from embedpyramid.summary.regressions import REGRESSION_SCHEMA, regressions
from embedpyramid.summary.report import VERDICT_FILE
from embedpyramid.summary.results import sort_metrics
from embedpyramid.systems.comparison import LATENCY_SCHEMA, SYSTEM_VERDICT_SCHEMA, system_latency, system_verdicts
from embedpyramid.transfer.level import transfer_views

EXACT = "exact"
FLOOR_SCHEMA: dict[str, pl.DataType] = {"dataset": pl.String(), "metric": pl.String(), "mean": pl.Float64(), "n": pl.Int64()}
TABLE_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "comparisons": COMPARISON_SCHEMA, "regressions": REGRESSION_SCHEMA, "deltas": DELTA_SCHEMA,
    "hsd": HSD_SCHEMA, "hsd_pairs": HSD_PAIR_SCHEMA, "random_floor": FLOOR_SCHEMA,
    "system_verdicts": SYSTEM_VERDICT_SCHEMA, "system_latency": LATENCY_SCHEMA,
}
COMPARISON_TABLES = tuple(TABLE_SCHEMAS)
RESULTS_VIEWS = ("comparisons", "regressions", "hsd", "hsd_pairs", "random_floor", "system_verdicts", "system_latency")
"""The comparison tables copied into ``results.duckdb`` as views of the same names."""


def evaluated_partitions(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs,
                         datasets: Sequence[str] | None = None) -> tuple[list[EvaluatedPartition], list[str]]:
    """The (model, dataset) evaluations of the current cards that exist on disk and are current
    (``inputs`` lists those that are not: they are left out), and the missing ones (a
    ``published`` dataset has no data to evaluate), on ``datasets`` (every dataset by default)."""
    found, missing = [], []
    for dataset in config.datasets_with_data():
        if datasets is not None and dataset not in datasets:
            continue
        for model in config.models.values():
            metrics_path = store.metrics_path(dataset, model.key, EXACT)
            if not inputs.admits(RETRIEVAL_METRICS, dataset, model.key):
                continue
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
                and inputs.admits(EFFICIENCY, dataset, model.key) else None,
            ))
    return found, missing


@dataclass(frozen=True)
class ComparisonTables:
    """The tables of one summary (:data:`TABLE_SCHEMAS`), the verdicts (one dict per dataset,
    with its ``text``) and the datasets that could not be compared. The ``comparisons`` asset
    writes one dataset's under :meth:`ArtifactStore.dataset_comparisons_dir`; the results
    database and the report read every dataset's (:func:`read_comparison_tables`)."""

    comparisons: pl.DataFrame
    regressions: pl.DataFrame
    deltas: pl.DataFrame
    hsd: pl.DataFrame
    hsd_pairs: pl.DataFrame
    random_floor: pl.DataFrame
    system_verdicts: pl.DataFrame
    system_latency: pl.DataFrame
    verdicts: list[dict[str, Any]]
    skipped: list[str]

    def write(self, directory: Path) -> dict[str, Path]:
        paths = {name: write_parquet(getattr(self, name).to_arrow(), directory / f"{name}.parquet")
                 for name in COMPARISON_TABLES}
        paths["verdict"] = write_json(self.verdicts, directory / VERDICT_FILE)
        return paths


def read_comparison_tables(store: ArtifactStore, datasets: Sequence[str]) -> ComparisonTables:
    """The comparison tables and verdicts of ``datasets`` (in that order), of those whose
    comparisons have been written."""
    folders = [folder for dataset in datasets if (folder := store.dataset_comparisons_dir(dataset) / VERDICT_FILE).is_file()]
    tables = {name: pl.concat([read_frame(folder.parent / f"{name}.parquet") for folder in folders])
              if folders else pl.DataFrame(schema=TABLE_SCHEMAS[name]) for name in COMPARISON_TABLES}
    verdicts = [verdict for folder in folders for verdict in read_json(folder)]
    return ComparisonTables(**tables, verdicts=verdicts, skipped=[])


def results_tables(store: ArtifactStore, tables: ComparisonTables) -> dict[str, StorePath | pa.Table]:
    """The comparison tables that ``results.duckdb`` exposes as views, by view name, and the L3
    tables once the transfer analysis has run."""
    return {**{name: getattr(tables, name).to_arrow() for name in RESULTS_VIEWS}, **transfer_views(store)}


def compare_evaluated(config: ProjectConfig, store: ArtifactStore, partitions: list[EvaluatedPartition],
                      systems: list[EvaluatedPartition] | None = None, *,
                      inputs: SummaryInputs, datasets: Sequence[str] | None = None) -> ComparisonTables:
    """Per dataset of ``datasets`` (every dataset by default): the random-ranking floor, and the paired comparisons of every evaluated model
    against the baseline (all pairs if configured) with the Tukey HSD when three or more models
    are evaluated; datasets where the baseline or every other model is missing are skipped and
    listed. L6's judge and answer metrics, when judge.yaml is set, are compared beside the
    retrieval metrics (:func:`~embedpyramid.downstream.grades.compare_downstream`). Then the
    verdicts (exact search).

    ``systems`` (the L5 evaluations, :func:`embedpyramid.systems.comparison.system_partitions`) add,
    per model-dependent system evaluated for the baseline and another model, the same model
    comparisons within that system (its own test families, so adding a system never moves the
    exact comparisons' adjusted p-values), each system's verdicts against dense exact and the
    latency table.

    ``inputs`` names the input partitions that are not current: they enter no table and no
    test, and each dataset's verdict lists them (a dataset whose baseline is excluded gets no
    verdict, only that sentence)."""
    systems = systems or []
    comparison = config.protocol.comparison
    metric, baseline = comparison.report_metric, config.baseline.key
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in COMPARISON_TABLES}
    skipped = []
    datasets = list(config.datasets if datasets is None else datasets)
    downstream = collect_downstream(config, store, inputs)
    for dataset in datasets:
        evaluated = [p for p in partitions if p.dataset == dataset]
        if not evaluated:
            continue
        frozen = open_frozen(store.dataset_dir(dataset))
        qrels = read_frame(frozen.path("qrels"))
        parts["random_floor"].append(random_floor_table(config, dataset, frozen, qrels))
        models = {p.model_key for p in evaluated}
        if baseline not in models or len(models) < 2:
            skipped.append(f"{dataset}: needs the baseline {baseline} and another evaluated model "
                           f"(evaluated and current: {', '.join(sorted(models)) or 'none'})")
            continue
        settings = comparison_settings(config, dataset)
        per_query = sort_metrics(pl.concat([read_frame(p.metrics_path) for p in evaluated]))
        queries = read_frame(frozen.path("queries"))
        truncated = {p.model_key: truncated_queries(store, config.model_by_key(p.model_key), frozen, qrels,
                                                    p.conventions["relevance_threshold"]) for p in evaluated}
        parts["comparisons"].append(compare_models(
            per_query, queries, settings, aliases=common_aliases(evaluated), truncated=truncated))
        if downstream is not None:
            parts["comparisons"].append(compare_downstream(
                downstream.per_query.filter(pl.col("dataset") == dataset), queries, settings, truncated=truncated))
        for name in dict.fromkeys(p.system for p in systems if p.dataset == dataset):
            within = [p for p in systems if p.dataset == dataset and p.system == name]
            if baseline in {p.model_key for p in within} and len(within) >= 2:
                parts["comparisons"].append(compare_models(
                    sort_metrics(pl.concat([read_frame(p.metrics_path) for p in within])), queries, settings,
                    aliases=common_aliases(within), truncated=truncated))
        parts["regressions"].append(regressions(
            per_query, queries, qrels, {p.model_key: read_frame(p.run_path) for p in evaluated}, settings, metric,
            corpus=read_frame(frozen.path("corpus"), columns=["doc_id", "text"]),
        ))
        parts["deltas"].append(query_deltas(per_query.filter(pl.col("metric") == metric), settings))
        hsd, hsd_pairs = tukey_hsd_tables(per_query, queries, settings, metric)
        parts["hsd"].append(hsd)
        parts["hsd_pairs"].append(hsd_pairs)
    parts["system_verdicts"].append(system_verdicts(config, store, partitions, systems))
    parts["system_latency"].append(system_latency(store, systems))
    tables = {name: pl.concat(frames) if frames else pl.DataFrame(schema=TABLE_SCHEMAS[name])
              for name, frames in parts.items()}
    verdicts = dataset_verdicts(tables["comparisons"].filter(pl.col("system") == EXACT), tables["hsd"],
                                power=comparison.power, detectable_delta=comparison.detectable_delta,
                                hsd_pairs=tables["hsd_pairs"])
    return ComparisonTables(**tables, verdicts=inputs.annotate([v.as_dict() for v in verdicts], datasets,
                                                                   (RETRIEVAL_METRICS, DOWNSTREAM_ANSWERS)),
                            skipped=skipped)


def random_floor_table(config: ProjectConfig, dataset: str, frozen: FrozenDataset, qrels: pl.DataFrame) -> pl.DataFrame:
    """Mean of every protocol measure over the dataset's evaluated queries under a random ranking
    of its corpus cut at the protocol depth (dataset, metric, mean, n)."""
    protocol = config.protocol
    floor = random_ranking_floor(
        qrels, read_frame(frozen.path("corpus"), columns=["doc_id"])["doc_id"].to_list(), protocol.measures(),
        protocol.conventions(config.dataset(dataset)), depth=protocol.depth,
        query_ids=read_frame(frozen.path("queries"), columns=["query_id"])["query_id"].to_list(),
    )
    means = floor.per_query.group_by("metric", maintain_order=True).agg(pl.col("value").mean().alias("mean"), pl.len().alias("n"))
    return sort_metrics(means.with_columns(pl.lit(dataset).alias("dataset")).select(list(FLOOR_SCHEMA))).cast(FLOOR_SCHEMA)


def common_aliases(partitions: list[EvaluatedPartition]) -> dict[str, str]:
    """The measure aliases every model's metrics manifest agrees on."""
    manifests = [read_metrics_manifest(p.metrics_path).get("aliases", {}) for p in partitions]
    first = manifests[0] if manifests else {}
    return {alias: canonical for alias, canonical in first.items() if all(m.get(alias) == canonical for m in manifests)}


def truncated_queries(
    store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset, qrels: pl.DataFrame, threshold: int
) -> set[str] | None:
    """Queries whose text, or a relevant document's text, reaches the card's max tokens (the
    stored counts are capped at that limit, so reaching it is taken as truncated). None when the
    backend reports no token counts or no limit. The one place that reads token counts, through
    :mod:`embedpyramid.encode`."""
    ids, longest = {}, {}
    for kind in ("query", "document"):
        path = cached_embedding_path(store, model, frozen, kind)
        if not path.is_file():
            return None
        counts = read_token_counts(path)
        limit = read_embedding_metadata(path).get("backend", {}).get("max_tokens") or model.card.max_tokens
        if counts is None or limit is None:
            return None
        ids[kind] = read_embeddings(path)[0]
        longest[kind] = {text_id for text_id, count in zip(ids[kind], counts.tolist(), strict=True) if count >= limit}
    relevant = qrels.filter((pl.col("relevance") >= threshold) & pl.col("doc_id").is_in(sorted(longest["document"])))
    return longest["query"] | set(relevant["query_id"].to_list())
