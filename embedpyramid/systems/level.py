"""Pyramid L5 for one (model, dataset, system): its run, per-query metrics and summary.

:func:`evaluate_system` takes what an asset reads — the frozen tables (:class:`DatasetTables`),
the input runs by reference (``exact``, ``ann:...``, other systems), the reranking card's
vectors keyed by id, the dev split's tables and runs — and returns the run, the per-query
metrics in the project's long format (``dataset, model, system, query_id, metric, value``) and
a one-row summary with the settings, hash, seeds, candidate depth and the latency the stage adds.
:func:`write_system` / :func:`read_system_run` store and read them under
``<data>/systems/<dataset>/<model>/<system>/`` and ``<data>/metrics/<dataset>/<model>/<system>.parquet``;
``model`` is the model key, or ``none`` for a model-independent system (BM25).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure, parse_measure
from embedpyramid.config.system_kinds import BiEncoderSystem, Bm25System, CrossEncoderSystem, RrfSystem, WeightedSystem
from embedpyramid.config.systems import EXACT, SystemsConfig, parse_ann_reference
from embedpyramid.data import FrozenDataset, document_texts
from embedpyramid.retrieval.level import ScoredRun, scored_run
from embedpyramid.retrieval.metrics.evaluate import evaluate_run
from embedpyramid.retrieval.trec import write_trec_run
from embedpyramid.store import ArtifactStore, read_frame, write_parquet
from embedpyramid.systems.bm25 import bm25_search, build_bm25_index
from embedpyramid.systems.fusion import (
    WeightChoice,
    candidates,
    choose_weight,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)
from embedpyramid.systems.latency import StageLatency, latency_sample, time_per_query
from embedpyramid.systems.rerank import (
    CrossEncoderScorer,
    KeyedVectors,
    bi_encoder_rerank,
    cross_encoder_rerank,
)
from embedpyramid.systems.runs import CodedRun, empty_queries, encode_run, queries_with_ties

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "system": pl.String(), "kind": pl.String(),
    "system_hash": pl.String(), "inputs": pl.String(), "candidate_depth": pl.Int64(), "output_depth": pl.Int64(),
    "n_queries": pl.Int64(), "empty_queries": pl.Int64(), "queries_with_ties": pl.Int64(),
    "candidates_per_query": pl.Float64(), "stage_seconds": pl.Float64(), "p50_ms": pl.Float64(),
    "p95_ms": pl.Float64(), "latency_queries": pl.Int64(), "latency_scope": pl.String(), "seed": pl.Int64(),
    "weights": pl.String(), "tuned_on": pl.String(), "settings": pl.String(),
}


@dataclass(frozen=True)
class DatasetTables:
    """The frozen tables an L5 system reads: ids and texts in table order (sorted by id), qrels."""

    query_ids: list[str]
    query_texts: list[str]
    doc_ids: list[str]
    doc_texts: list[str]
    qrels: pl.DataFrame

    @classmethod
    def from_frozen(cls, frozen: FrozenDataset) -> DatasetTables:
        queries, corpus = frozen.read("queries"), frozen.read("corpus")
        return cls(
            queries.column("query_id").to_pylist(), queries.column("text").to_pylist(),
            corpus.column("doc_id").to_pylist(), document_texts(corpus), read_frame(frozen.path("qrels")),
        )


@dataclass(frozen=True)
class DevSplit:
    """A dataset's dev split (same corpus) with the runs of the system's inputs on it."""

    dataset: str
    tables: DatasetTables
    first_stages: Mapping[str, pl.DataFrame]


@dataclass(frozen=True)
class SystemResult:
    """A system's run, its scored per-query metrics, its one-row summary and, for a weighted
    fusion tuned on a dev split, the dev sweep (``weight``, ``value``)."""

    run: pa.Table
    scored: ScoredRun
    summary: pl.DataFrame
    sweep: pl.DataFrame | None = None

    def manifest(self) -> dict[str, Any]:
        """The metrics manifest plus the system's identity, stored with the per-query table."""
        row = self.summary.row(0, named=True)
        return {**self.scored.manifest(), "system": {key: row[key] for key in ("system", "kind", "system_hash",
                                                                                  "inputs", "settings")}}


@dataclass(frozen=True)
class _Stage:
    run: CodedRun
    latency: StageLatency
    seconds: float
    candidate_depth: int | None
    candidates_per_query: float | None
    details: dict[str, Any]
    weights: tuple[float, ...] | None = None
    tuned_on: str | None = None
    sweep: pl.DataFrame | None = None


def evaluate_system(
    name: str, config: SystemsConfig, *, dataset: str, model_key: str | None, tables: DatasetTables,
    measures: Sequence[Measure], conventions: MetricConventions,
    first_stages: Mapping[str, pl.DataFrame] | None = None,
    rerank_vectors: tuple[KeyedVectors, KeyedVectors] | None = None,
    cross_encoder: Callable[[str, Sequence[str]], np.ndarray] | None = None,
    encode_query: Callable[[str], np.ndarray] | None = None,
    dev: DevSplit | None = None,
) -> SystemResult:
    """Run one configured system on one dataset (for one model unless it is model-independent)
    and score it.

    ``first_stages`` maps each reference the system reads to its run (``query_id, rank, doc_id,
    score``). A bi-encoder rerank needs ``rerank_vectors`` (query and document vectors of its
    ``by`` card, keyed by id) and, to time query encoding, ``encode_query``; a cross-encoder
    rerank loads its model from the config unless ``cross_encoder(query, documents) -> scores``
    is given. ``dev`` (the dataset's dev split) lets a weighted fusion with a ``sweep`` choose its
    weight there; without it the configured weights apply.
    """
    spec, settings = config.system(name), config.settings
    model = config.model_label(name, model_key)
    first_stages = first_stages or {}
    start = time.perf_counter()
    if isinstance(spec, Bm25System):
        index = build_bm25_index(spec, tables.doc_texts)
        searched = bm25_search(index, tables.query_texts, settings.depth)
        stage = _Stage(searched.run, searched.latency, time.perf_counter() - start, None, None,
                       {**index.describe(), "index_seconds": index.index_seconds,
                        "queries_without_terms": searched.empty_queries})
    elif isinstance(spec, RrfSystem | WeightedSystem):
        stage = _fusion_stage(name, spec, config, tables, first_stages, measures, conventions, dev)
    elif isinstance(spec, CrossEncoderSystem):
        scorer = cross_encoder
        details: dict[str, Any] = {**spec.identity(), "batch_size": spec.batch_size}
        if scorer is None:
            loaded = CrossEncoderScorer(config.cross_encoders[name], max_length=spec.max_length,
                                        batch_size=spec.batch_size)
            scorer, details = loaded.score, {**details, **loaded.describe()}
        first = _input_run(first_stages, spec.first_stage, tables, name)
        start = time.perf_counter()
        reranked = cross_encoder_rerank(first, spec.top_n, tables.query_texts, tables.doc_texts, scorer)
        stage = _Stage(reranked.run, reranked.latency, time.perf_counter() - start, spec.top_n,
                       reranked.candidates_per_query, details)
    elif isinstance(spec, BiEncoderSystem):
        if rerank_vectors is None:
            raise ValueError(f"system {name!r} reranks by card {spec.by!r}: pass its query and document vectors")
        query_vectors = rerank_vectors[0].aligned(tables.query_ids, f"{spec.by} query vectors")
        doc_vectors = rerank_vectors[1].aligned(tables.doc_ids, f"{spec.by} document vectors")
        first = _input_run(first_stages, spec.first_stage, tables, name)
        start = time.perf_counter()
        reranked = bi_encoder_rerank(first, spec.top_n, query_vectors, doc_vectors,
                                     latency_queries=settings.latency_queries, seed=settings.seed,
                                     query_texts=tables.query_texts, encode_query=encode_query)
        stage = _Stage(reranked.run, reranked.latency, time.perf_counter() - start, spec.top_n,
                       reranked.candidates_per_query, spec.identity())
    else:
        raise TypeError(f"unknown system kind {type(spec).__name__}")
    return _result(name, config, dataset, model, tables, stage, measures, conventions)


def _fusion_stage(
    name: str, spec: RrfSystem | WeightedSystem, config: SystemsConfig, tables: DatasetTables,
    first_stages: Mapping[str, pl.DataFrame], measures: Sequence[Measure], conventions: MetricConventions,
    dev: DevSplit | None,
) -> _Stage:
    settings = config.settings
    depth, output_depth = spec.depth or settings.depth, settings.depth
    runs = [_input_run(first_stages, reference, tables, name) for reference in spec.inputs]
    weights: tuple[float, ...] | None = None
    tuned_on, sweep = None, None
    if isinstance(spec, RrfSystem):
        def fuse(inputs: Sequence[CodedRun]) -> CodedRun:
            return reciprocal_rank_fusion(inputs, k=spec.k, depth=depth, output_depth=output_depth)
    else:
        weights = spec.fixed_weights()
        tuned_on = "fixed weights (no dev split)" if dev is None else "fixed weights (no sweep configured)"
        if dev is not None and spec.sweep is not None:
            choice = _tune_on_dev(name, spec, dev, tables, measures, conventions, depth, output_depth)
            weights, tuned_on, sweep = (choice.weight, 1.0 - choice.weight), f"dev split {dev.dataset}", choice.sweep
        chosen = weights

        def fuse(inputs: Sequence[CodedRun]) -> CodedRun:
            return weighted_score_fusion(inputs, chosen, normalization=spec.normalization, depth=depth,
                                         output_depth=output_depth)

    start = time.perf_counter()
    fused = fuse(runs)
    seconds = time.perf_counter() - start
    pools = [candidates(run, depth) for run in runs]
    sample = latency_sample(len(tables.query_ids), settings.latency_queries, settings.seed)
    latency = time_per_query(lambda q: fuse([pool.query_slice(q) for pool in pools]), sample, seed=settings.seed)
    n_queries = len(tables.query_ids)
    per_query = sum(len(pool) for pool in pools) / n_queries if n_queries else 0.0
    return _Stage(fused, latency, seconds, depth, per_query, spec.identity(), weights, tuned_on, sweep)


def _tune_on_dev(
    name: str, spec: WeightedSystem, dev: DevSplit, tables: DatasetTables, measures: Sequence[Measure],
    conventions: MetricConventions, depth: int, output_depth: int,
) -> WeightChoice:
    if dev.tables.doc_ids != tables.doc_ids:
        raise ValueError(
            f"system {name!r}: dev split {dev.dataset!r} has a different corpus; a dev split must share the "
            "evaluated dataset's corpus (same documents and ids)"
        )
    metric = parse_measure(spec.tune_metric)
    dev_runs = [_input_run(dev.first_stages, reference, dev.tables, f"{name} on {dev.dataset}")
                for reference in spec.inputs]

    def score(run: CodedRun) -> float:
        evaluation = evaluate_run(pl.from_arrow(run.table(dev.tables.query_ids, dev.tables.doc_ids)),
                                  dev.tables.qrels, [metric], conventions, query_ids=dev.tables.query_ids)
        return float(evaluation.per_query["value"].mean() or 0.0)

    assert spec.sweep is not None
    return choose_weight(dev_runs, spec.sweep, metric=str(metric), score=score, normalization=spec.normalization,
                         depth=depth, output_depth=output_depth)


def _input_run(first_stages: Mapping[str, pl.DataFrame], reference: str, tables: DatasetTables, name: str) -> CodedRun:
    if reference not in first_stages:
        raise ValueError(f"system {name!r} reads {reference!r}, which was not given; given: {sorted(first_stages)}")
    return encode_run(first_stages[reference], tables.query_ids, tables.doc_ids, name=reference)


def _result(
    name: str, config: SystemsConfig, dataset: str, model: str, tables: DatasetTables, stage: _Stage,
    measures: Sequence[Measure], conventions: MetricConventions,
) -> SystemResult:
    spec, settings = config.system(name), config.settings
    run = stage.run.table(tables.query_ids, tables.doc_ids)
    evaluation = evaluate_run(pl.from_arrow(run), tables.qrels, measures, conventions, query_ids=tables.query_ids)
    scored = scored_run(evaluation, measures, dataset=dataset, model=model, system=name)
    output_depth = spec.top_n if isinstance(spec, CrossEncoderSystem | BiEncoderSystem) else settings.depth
    summary = pl.DataFrame([{
        "dataset": dataset, "model": model, "system": name, "kind": spec.kind, "system_hash": config.hashes[name],
        "inputs": ",".join(spec.references()), "candidate_depth": stage.candidate_depth,
        "output_depth": output_depth, "n_queries": len(tables.query_ids),
        "empty_queries": empty_queries(stage.run, len(tables.query_ids)),
        "queries_with_ties": queries_with_ties(stage.run), "candidates_per_query": stage.candidates_per_query,
        "stage_seconds": stage.seconds, "p50_ms": stage.latency.p50_ms, "p95_ms": stage.latency.p95_ms,
        "latency_queries": stage.latency.n_queries, "latency_scope": stage.latency.scope, "seed": settings.seed,
        "weights": None if stage.weights is None else json.dumps(list(stage.weights)),
        "tuned_on": stage.tuned_on, "settings": json.dumps(stage.details, sort_keys=True, default=str),
    }], schema=SUMMARY_SCHEMA)
    return SystemResult(run, scored, summary, stage.sweep)


def systems_dir(store: ArtifactStore, dataset: str, model: str, system: str) -> Path:
    """``<data>/systems/<dataset>/<model>/<system>``; ``model`` is a model key or ``none``."""
    return store.root / "systems" / dataset / model / system


def write_system(result: SystemResult, store: ArtifactStore) -> dict[str, Path]:
    """Write the run (Parquet and TREC), the per-query metrics (with the conventions and the
    system's identity in the schema metadata), the summary and any dev sweep; each atomically."""
    row = result.summary.row(0, named=True)
    dataset, model, system = row["dataset"], row["model"], row["system"]
    directory = systems_dir(store, dataset, model, system)
    metrics = result.scored.per_query.to_arrow().replace_schema_metadata(
        {"embedpyramid": json.dumps(result.manifest(), sort_keys=True, default=str)}
    )
    paths = {
        "run": write_parquet(result.run, directory / "run.parquet"),
        "trec": write_trec_run(result.run, directory / "run.trec", tag=f"{model}.{system}"),
        "metrics": write_parquet(metrics, store.metrics_path(dataset, model, system)),
        "summary": write_parquet(result.summary.to_arrow(), directory / "summary.parquet"),
    }
    if result.sweep is not None:
        paths["sweep"] = write_parquet(result.sweep.to_arrow(), directory / "dev_sweep.parquet")
    return paths


def reference_run_path(store: ArtifactStore, config: SystemsConfig, dataset: str, model_key: str | None,
                       reference: str) -> Path:
    """Where a stored input run lives: the model's exact run or another system's run. An
    ``ann:`` reference has no stored run at the candidate depth: search it with
    :func:`embedpyramid.systems.ann_first_stage`."""
    if parse_ann_reference(reference) is not None:
        raise ValueError(f"{reference!r} is searched at the candidate depth with ann_first_stage, not read from disk")
    if reference == EXACT:
        if model_key is None:
            raise ValueError("the exact run belongs to a model: give the model key")
        return store.run_dir(dataset, model_key) / f"{EXACT}.parquet"
    return systems_dir(store, dataset, config.model_label(reference, model_key), reference) / "run.parquet"


def read_system_run(store: ArtifactStore, dataset: str, model: str, system: str) -> pl.DataFrame:
    return read_frame(systems_dir(store, dataset, model, system) / "run.parquet")


def read_system_summary(store: ArtifactStore, dataset: str, model: str, system: str) -> pl.DataFrame:
    return read_frame(systems_dir(store, dataset, model, system) / "summary.parquet")
