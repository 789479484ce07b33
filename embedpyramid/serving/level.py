"""Pyramid L4 for one (model, dataset): every index spec of ``ann.yaml`` measured against the
exact search, the recall/QPS frontier, and their report section — read from and written to
the artifact store.

The exact reference is the stored exact run of the card's vectors (L2), ranked by the card's
similarity, so a spec never recomputes embeddings or exact search; a spec takes its metric
from the card unless it names one (then a finding says so). Indexes are content-addressed
folders under ``<data>/indexes``: a spec, embeddings and seed that were built once are loaded,
not rebuilt. Findings (a metric override, a training set smaller than FAISS recommends) are
kept once per spec in ``findings.json`` beside its results.

Memory: the document table is never read whole. Indexes are built from it block by block
(:func:`~embedpyramid.serving.index.build_index`), binary rescoring and ANN recall read only the
rows their candidates and top-k name; the document ids (strings), the query vectors and the
index itself are held whole. A graph index (HNSW) is the exception: FAISS builds it from one
``add`` of every vector, so its build holds the prepared table (see
:mod:`embedpyramid.serving.index`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from embedpyramid.config import IndexSpec, ProjectConfig, ResolvedModel
from embedpyramid.data import FrozenDataset
from embedpyramid.encode import (
    BLOCK_ROWS,
    cached_embedding_path,
    embedding_ids,
    read_embedding_metadata,
    read_embeddings,
)
from embedpyramid.rendering.document import Figure, ReportSection
from embedpyramid.retrieval.search import search_metric
from embedpyramid.serving.evaluate import SpecEvaluation, evaluate_spec
from embedpyramid.serving.frontier import frontier, frontier_svg, qps_at_recall
from embedpyramid.serving.index import BuiltIndex, build_index, index_complete, load_index, save_index
from embedpyramid.serving.specs import build_seeds, index_file_name, resolve_metric
from embedpyramid.serving.sweep import search_sweep
from embedpyramid.serving.vectors import TableVectors
from embedpyramid.store import ArtifactStore, read_frame, read_json, remove_tree, write_json, write_parquet, write_text

FRONTIER_COLUMNS = ("spec", "sweep_param", "sweep_value", "ann_recall", "ann_recall_sd", "qps", "p50_ms", "p95_ms",
                    "delta", "delta_sd", "delta_ci_low", "delta_ci_high", "n_seeds", "bytes_per_vector",
                    "build_seconds")


def serving_dir(store: ArtifactStore, dataset: str, model_key: str) -> Path:
    return store.root / "serving" / dataset / model_key


def stored_index_path(store: ArtifactStore, model: ResolvedModel, document_path: Path, spec: IndexSpec,
                      seed: int) -> Path:
    """Where the index of ``spec`` (its metric resolved) over the card's document table is saved."""
    return store.root / "indexes" / index_file_name(spec, document_path.stem + "@" + model.card_hash, seed)


def exact_arrays(run_path: Path, doc_ids: list[str], n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The stored exact run as (scores, document indices) of shape (n_queries, depth), in rank order."""
    run = read_frame(run_path).sort("query_id", "rank")
    depth = run.height // n_queries
    indices = run["doc_id"].replace_strict(doc_ids, range(len(doc_ids)), return_dtype=pl.Int64).to_numpy()
    return run["score"].to_numpy().reshape(n_queries, depth), indices.reshape(n_queries, depth)


@dataclass(frozen=True)
class ServingResult:
    """One spec evaluated on one (model, dataset): the evaluation over every seed, the builds
    (first seed first), where each index lives, whether it was loaded rather than built, and
    the spec's findings (each stated once)."""

    evaluation: SpecEvaluation
    builds: tuple[BuiltIndex, ...]
    index_paths: tuple[Path, ...]
    reused: tuple[bool, ...]
    findings: tuple[str, ...]

    @property
    def built(self) -> BuiltIndex:
        return self.builds[0]


def evaluate_serving(
    config: ProjectConfig, store: ArtifactStore, model: ResolvedModel, dataset: str, frozen: FrozenDataset,
    spec: IndexSpec, *, block_rows: int = BLOCK_ROWS,
) -> ServingResult:
    """Build (or load) the spec's index over the card's document vectors once per seed, sweep
    each, and measure them against the exact run: ANN recall@k, relevance under ANN, the paired
    delta (mean ± sd over seeds), the costs. The document table is read ``block_rows`` rows at a
    time (see the module docstring); the results do not depend on ``block_rows``."""
    assert config.ann is not None, "L4 needs configs/ann.yaml"
    settings, comparison = config.ann.settings, config.protocol.comparison
    reference = search_metric(model.similarity, model.card.normalize)
    spec, override = resolve_metric(spec, reference, model.card.normalize)
    query_path = cached_embedding_path(store, model, frozen, "query")
    document_path = cached_embedding_path(store, model, frozen, "document")
    query_ids, queries = read_embeddings(query_path)
    doc_ids, documents = embedding_ids(document_path), TableVectors(document_path, block_rows)
    builds, paths, reused = [], [], []
    for seed in build_seeds(spec, settings):
        index_path = stored_index_path(store, model, document_path, spec, seed)
        loaded = index_complete(index_path)
        built = load_index(index_path, spec) if loaded else build_index(spec, documents, seed=seed, threads=settings.threads)
        if not loaded:
            save_index(built, index_path)
        points = search_sweep(built, queries, settings.k, batch_size=settings.batch_size,
                              latency_queries=settings.latency_queries, seed=spec.seed, threads=settings.threads,
                              repeats=settings.timing_repeats, documents=documents)
        builds.append((built, points))
        paths.append(index_path)
        reused.append(loaded)
    exact_scores, exact_indices = exact_arrays(store.run_dir(dataset, model.key) / "exact.parquet", doc_ids, len(query_ids))
    group_column, groups = config.dataset(dataset).group_column, None
    if group_column is not None:
        queries_table = read_frame(frozen.path("queries"), columns=["query_id", group_column])
        groups = dict(zip(queries_table["query_id"], queries_table[group_column], strict=True))
    evaluation = evaluate_spec(
        builds, exact_scores=exact_scores, exact_indices=exact_indices, queries=queries, documents=documents,
        query_ids=query_ids, doc_ids=doc_ids, qrels=read_frame(frozen.path("qrels")),
        measures=settings.measure_objects(), conventions=config.protocol.conventions(config.dataset(dataset)),
        delta_metric=settings.delta_metric, n_resamples=comparison.n_resamples, confidence=comparison.confidence,
        bootstrap_seed=comparison.seed, query_groups=groups, reference_metric=reference,
    )
    findings = tuple(dict.fromkeys([*([override] if override else []),
                                    *(f for built, _ in builds for f in built.training_findings)]))
    directory = serving_dir(store, dataset, model.key) / spec.name
    remove_tree(directory / "runs")
    for built, points in builds:
        for point in points:
            name = "top-k" if point.param is None else f"{point.param}-{point.value}"
            write_parquet(point.run_table(query_ids, doc_ids), directory / "runs" / f"seed-{built.seed}" / f"{name}.parquet")
    write_parquet(evaluation.per_query.to_arrow(), directory / "per_query.parquet")
    write_json({"spec": spec.name, "findings": list(findings)}, directory / "findings.json")
    write_parquet(evaluation.summary.to_arrow(), directory / "summary.parquet")
    return ServingResult(evaluation, tuple(b for b, _ in builds), tuple(paths), tuple(reused), findings)


def skipped_cut(store: ArtifactStore, model: ResolvedModel, dataset: str, frozen: FrozenDataset,
                spec: IndexSpec) -> str | None:
    """Why ``spec`` is not evaluated for this card (:meth:`IndexSpec.cut_beyond`), or None.

    A skipped spec's earlier results are removed and the reason is kept as its one finding, so
    the frontier leaves it out and the report lists it.
    """
    metadata = read_embedding_metadata(cached_embedding_path(store, model, frozen, "document"))
    reason = spec.cut_beyond(int(metadata["dim"]))
    if reason is not None:
        directory = serving_dir(store, dataset, model.key) / spec.name
        remove_tree(directory)
        write_json({"spec": spec.name, "findings": [reason]}, directory / "findings.json")
    return reason


@dataclass(frozen=True)
class ServingFrontier:
    summary: pl.DataFrame
    frontier: pl.DataFrame
    qps_at_recall: pl.DataFrame
    svg: str


def serving_frontier(config: ProjectConfig, store: ArtifactStore, dataset: str, model_key: str) -> ServingFrontier:
    """The recall/QPS frontier over every evaluated spec of one (model, dataset), and QPS at the
    target recalls; written beside the specs' results."""
    assert config.ann is not None, "L4 needs configs/ann.yaml"
    directory = serving_dir(store, dataset, model_key)
    summaries = [read_frame(directory / spec.name / "summary.parquet") for spec in config.ann.specs
                 if (directory / spec.name / "summary.parquet").is_file()]
    if not summaries:
        raise FileNotFoundError(f"{directory}: no evaluated index spec; materialize the ann_* assets first")
    summary = pl.concat(summaries)
    point = ["spec", "sweep_param", "sweep_value"]
    result = ServingFrontier(
        summary=summary,
        frontier=frontier(summary).select(point).join(summary, on=point, how="left", nulls_equal=True,
                                                       maintain_order="left"),
        qps_at_recall=qps_at_recall(summary, config.ann.settings.recall_targets),
        svg=frontier_svg(summary, title=f"ANN recall@{config.ann.settings.k} vs QPS: {model_key} ({dataset})"),
    )
    write_parquet(result.summary.to_arrow(), directory / "summary.parquet")
    write_parquet(result.qps_at_recall.to_arrow(), directory / "qps_at_recall.parquet")
    write_text(result.svg, directory / "frontier.svg")
    write_parquet(result.frontier.to_arrow(), directory / "frontier.parquet")
    return result


def spec_findings(directory: Path) -> list[str]:
    """The findings of every evaluated spec under one (model, dataset)'s serving folder."""
    return [finding for path in sorted(directory.glob("*/findings.json")) for finding in read_json(path)["findings"]]


def report_section(store: ArtifactStore, dataset: str, model_key: str) -> ReportSection:
    """The L4 section of one (model, dataset) for the report, from its stored frontier."""
    directory = serving_dir(store, dataset, model_key)
    summary = read_frame(directory / "summary.parquet")
    findings = spec_findings(directory)
    k = int(summary["k"][0])
    delta_metric = summary["delta_metric"][0]
    return ReportSection(
        title=f"L4 serving approximation: {model_key} ({dataset})",
        intro=(
            f"Every index spec against exact search, reported apart: ANN recall@{k} (overlap with the exact "
            f"top-{k}, tie-aware: a property of the index) and {delta_metric} under ANN (against the qrels: a "
            f"property of the system), with its paired delta vs exact and its CI (t where half the queries tie, bootstrap-t otherwise). Indexes are searched in "
            f"the card's similarity ({summary['reference_metric'][0]}); stochastic specs (IVF, PQ, HNSW) are built "
            f"with {int(summary['n_seeds'].max())} seeds, recall and delta as mean ± sd over the builds. QPS "
            f"(FAISS's search for every spec, int8 included) at batch {int(summary['batch_size'][0])}, latency "
            f"p50/p95 at batch 1, build seconds, bytes per vector."
            + ("" if not findings else " Findings: " + " ".join(f"{f}." for f in findings))
        ),
        tables=(
            ("Recall/QPS frontier", read_frame(directory / "frontier.parquet").select(FRONTIER_COLUMNS)),
            ("QPS at target recall", read_frame(directory / "qps_at_recall.parquet")),
            ("Every sweep point", summary.select(*FRONTIER_COLUMNS, "index_bytes", "peak_rss_bytes", "factory", "seeds",
                                                 "training_finding")),
        ),
        figures=(Figure(f"frontier-{dataset}-{model_key.replace('@', '-')}", f"ANN recall vs QPS of {model_key}",
                        (directory / "frontier.svg").read_text()),),
    )
