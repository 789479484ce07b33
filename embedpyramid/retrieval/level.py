"""Pyramid L2, retrieval: exact search over cached embeddings, then per-query metrics.

The per-query table is the project's long format — ``dataset, model, system, query_id,
metric, value`` — with the metric conventions stored in the Parquet schema metadata, so the
numbers never travel without them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from embedpyramid.config import SearchSettings
from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure
from embedpyramid.data import FrozenDataset
from embedpyramid.encode import embedding_rows, iter_embedding_blocks, read_embeddings
from embedpyramid.retrieval.device_search import exact_topk_torch
from embedpyramid.retrieval.metrics.evaluate import RetrievalEvaluation, evaluate_run
from embedpyramid.retrieval.search import Metric, TiesAtCut, exact_topk, run_table
from embedpyramid.store import PER_QUERY_SCHEMA, read_frame, read_table_metadata, write_parquet


@dataclass(frozen=True)
class SearchResult:
    """An exact run and how it was searched; :meth:`manifest` travels in the run's Parquet schema."""

    run: pa.Table
    seconds: float
    n_queries: int
    n_documents: int
    metric: Metric
    threads: int
    doc_block_size: int
    query_block_size: int
    device: str = "cpu"

    @property
    def queries_per_second(self) -> float:
        return self.n_queries / self.seconds if self.seconds > 0 else float("inf")

    def manifest(self) -> dict[str, Any]:
        return {"metric": self.metric, "seconds": self.seconds, "queries_per_second": self.queries_per_second,
                "n_queries": self.n_queries, "n_documents": self.n_documents, "threads": self.threads,
                "doc_block_size": self.doc_block_size, "query_block_size": self.query_block_size,
                "device": self.device}

    def table(self) -> pa.Table:
        """The run with :meth:`manifest` in its schema metadata (content hashes ignore it)."""
        return self.run.replace_schema_metadata({"embedpyramid": json.dumps(self.manifest(), sort_keys=True)})


def search_embeddings(
    query_path: Path, document_path: Path, depth: int, settings: SearchSettings, metric: Metric = "inner_product",
    progress: Callable[[int, int], None] | None = None, ties_at_cut: TiesAtCut = "first", device: str = "cpu",
) -> SearchResult:
    """Exact top-``depth`` of every query over every document under ``metric``, as a long-format
    run table. The documents are streamed from their table ``doc_block_size`` rows at a time;
    documents tied at the cut are kept by ``ties_at_cut`` (:func:`exact_topk`). On a ``device``
    other than ``cpu`` (the card's ``run.device``, e.g. ``cuda``) the products and the selection
    run there with torch, under the same tie rule (:func:`exact_topk_torch`)."""
    query_ids, queries = read_embeddings(query_path)
    doc_ids: list[str] = []

    def blocks():
        for ids, vectors in iter_embedding_blocks(document_path, settings.doc_block_size):
            doc_ids.extend(ids)
            yield vectors

    search = exact_topk if device == "cpu" else partial(exact_topk_torch, device=device)
    start = time.perf_counter()
    scores, indices = search(queries, blocks(), depth, metric=metric, doc_block_size=settings.doc_block_size,
                             query_block_size=settings.query_block_size, n_documents=embedding_rows(document_path),
                             progress=progress, ties_at_cut=ties_at_cut)
    seconds = time.perf_counter() - start
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else os.cpu_count() or 1
    return SearchResult(run_table(query_ids, doc_ids, scores, indices), seconds, len(query_ids), len(doc_ids), metric,
                        threads, settings.doc_block_size, settings.query_block_size, device)


@dataclass(frozen=True)
class ScoredRun:
    """Per-query metrics of one run in the long format, with what they were computed under."""

    per_query: pl.DataFrame
    excluded_query_ids: list[str]
    conventions: MetricConventions
    measures: list[str]
    aliases: dict[str, str]
    tied_queries: dict[str, int]

    def manifest(self) -> dict[str, Any]:
        return {
            "conventions": self.conventions.as_dict(),
            "measures": self.measures,
            "aliases": self.aliases,
            "evaluated_queries": self.per_query["query_id"].n_unique(),
            "excluded_queries": len(self.excluded_query_ids),
            "excluded_reason": ("no qrel at or above the relevance threshold" if self.conventions.queries == "with_positive"
                                else "no qrel"),
            # Queries whose score ties straddle a cutoff: the ones the tie rule decides.
            "tied_queries": len(self.tied_queries),
            "tie_groups_at_cutoffs": self.tied_queries,
        }

    def means(self) -> pl.DataFrame:
        return self.per_query.group_by("metric", maintain_order=True).agg(
            pl.col("value").mean().alias("mean"), pl.len().alias("n")
        )


def score_run(
    run_path: Path, frozen: FrozenDataset, measures: Sequence[Measure], conventions: MetricConventions,
    *, dataset: str, model: str, system: str,
) -> ScoredRun:
    """Evaluate a stored run against the frozen qrels over every frozen query."""
    evaluation = evaluate_run(
        read_frame(run_path),
        read_frame(frozen.path("qrels")),
        measures,
        conventions,
        query_ids=read_frame(frozen.path("queries"), columns=["query_id"])["query_id"].to_list(),
    )
    return scored_run(evaluation, measures, dataset=dataset, model=model, system=system)


def scored_run(
    evaluation: RetrievalEvaluation, measures: Sequence[Measure], *, dataset: str, model: str, system: str,
) -> ScoredRun:
    """An evaluation in the project's long per-query format, labelled with its dataset, model and system."""
    per_query = evaluation.per_query.select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(system).alias("system"),
        "query_id", "metric", "value",
    ).cast(PER_QUERY_SCHEMA)
    return ScoredRun(per_query, evaluation.excluded_query_ids, evaluation.conventions, [str(m) for m in measures],
                     evaluation.aliases, evaluation.tied_queries)


def write_scored_run(scored: ScoredRun, target: Path) -> Path:
    table = scored.per_query.to_arrow()
    table = table.replace_schema_metadata({"embedpyramid": json.dumps(scored.manifest(), sort_keys=True)})
    return write_parquet(table, target)


def read_metrics_manifest(path: Path) -> dict[str, Any]:
    return read_table_metadata(path)
