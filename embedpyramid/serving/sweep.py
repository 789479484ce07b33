"""Searching a built index at every point of its sweep: the ANN top-k, QPS and latency.

Throughput and latency are never mixed: QPS is measured with ``batch_size`` queries per call
over all queries (the fastest of ``repeats`` timed passes, after one warm-up call); latency is
measured one query per call over a seeded sample of ``latency_queries`` queries. Both include
the pipeline's own work per call (score conversion, re-ordering, binary rescoring).

Binary rescoring reads the float vectors of candidates only: before the timed passes, every
query's candidates at every sweep value are found once and their rows gathered from the
documents (a stored table in one pass over its blocks;
:class:`~embedpyramid.serving.vectors.GatheredRows`), so the search holds the union of those
rows — at most min(N, n_queries × the sum of the rescore depths) vectors — not the table. The
timed search looks each candidate's row up there and rescores the same pairs to the same
scores as from the whole matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import faiss
import numpy as np
import pyarrow as pa

from embedpyramid.config.ann import IndexSpec
from embedpyramid.retrieval.search import order_rows, run_table
from embedpyramid.serving.index import BuiltIndex, faiss_thread_limit, indexed_vectors, spec_preparation
from embedpyramid.serving.vectors import GatheredRows, Vectors, binarize, pair_scores

Search = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, eq=False)
class SweepPoint:
    """Results of one sweep value; ``param``/``value`` are None for a spec without a sweep.

    ``scores``/``indices`` have shape (n_queries, k), each row ordered by score descending then
    document index ascending; an index returns fewer than k documents as trailing -1 (score -inf).
    """

    param: str | None
    value: int | None
    scores: np.ndarray = field(repr=False)
    indices: np.ndarray = field(repr=False)
    qps: float
    batch_size: int
    search_seconds: float
    p50_ms: float
    p95_ms: float
    latency_queries: int
    threads: int

    def run_table(self, query_ids: Sequence[str], doc_ids: Sequence[str]) -> pa.Table:
        """The long-format run (``query_id, rank, doc_id, score``) without missing entries."""
        found = self.indices >= 0
        table = run_table(query_ids, doc_ids, self.scores, np.where(found, self.indices, 0))
        return table.filter(pa.array(found.reshape(-1)))


def _faiss_search(index: faiss.Index, spec: IndexSpec, k: int, value: int | None) -> Search:
    # A FAISS search parameter lives on the index: set it when this sweep point's turn comes.
    if value is not None and spec.sweep is not None:
        faiss.ParameterSpace().set_index_parameter(index, spec.sweep.param, value)
    sign = -1.0 if spec.metric == "l2" else 1.0

    def search(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distances, labels = index.search(batch, k)
        return order_rows(sign * distances, labels)

    return search


def _binary_search(index: faiss.IndexBinary, spec: IndexSpec, documents: GatheredRows, k: int, rescore: int) -> Search:
    def search(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, candidates = index.search(binarize(batch), rescore)
        scores = pair_scores(batch, documents.vectors, documents.positions(candidates), spec.metric or "inner_product",
                             dtype=np.float32)
        scores, indices = order_rows(scores, candidates)
        return scores[:, :k], indices[:, :k]

    return search


def _prepared_searches(
    built: BuiltIndex, k: int, queries: np.ndarray, documents: Vectors | None
) -> list[tuple[int | None, Callable[[], Search]]]:
    """Per sweep value (in order), a function that configures the index and returns its search;
    ``queries`` are the prepared queries (a binary spec gathers their candidates' rows here)."""
    spec, index = built.spec, built.index
    values: Sequence[int | None] = spec.sweep.values if spec.sweep else (None,)
    if isinstance(index, faiss.IndexBinary):
        if documents is None:
            raise ValueError(f"{spec.describe()} rescores with the float document vectors: pass documents=")
        too_few = [value for value in values if value is None or value < k]
        if too_few:
            raise ValueError(f"{spec.describe()} rescores {too_few[0]} candidates per query; it needs at least k={k}")
        codes = binarize(queries)
        rescored = GatheredRows.of(documents, [index.search(codes, value)[1] for value in values],
                                   spec_preparation(spec, documents))
        return [(value, partial(_binary_search, index, spec, rescored, k, value)) for value in values]
    return [(value, partial(_faiss_search, index, spec, k, value)) for value in values]


def _measure(
    spec: IndexSpec,
    value: int | None,
    search: Search,
    queries: np.ndarray,
    *,
    batch_size: int,
    repeats: int,
    latency_sample: np.ndarray,
    threads: int,
) -> SweepPoint:
    search(queries[:batch_size])
    best_seconds = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        results = [search(queries[s : s + batch_size]) for s in range(0, len(queries), batch_size)]
        best_seconds = min(best_seconds, time.perf_counter() - start)
    latencies_ms = np.empty(len(latency_sample))
    for position, row in enumerate(latency_sample):
        start = time.perf_counter()
        search(queries[row : row + 1])
        latencies_ms[position] = (time.perf_counter() - start) * 1000.0
    p50, p95 = np.percentile(latencies_ms, [50, 95])
    return SweepPoint(
        param=spec.sweep.param if spec.sweep else None,
        value=value,
        scores=np.concatenate([scores for scores, _ in results]),
        indices=np.concatenate([indices for _, indices in results]),
        qps=len(queries) / best_seconds if best_seconds > 0 else float("inf"),
        batch_size=batch_size,
        search_seconds=best_seconds,
        p50_ms=float(p50),
        p95_ms=float(p95),
        latency_queries=len(latency_sample),
        threads=threads,
    )


def search_sweep(
    built: BuiltIndex,
    queries: np.ndarray,
    k: int,
    *,
    batch_size: int,
    latency_queries: int,
    seed: int,
    threads: int = 1,
    repeats: int = 1,
    documents: Vectors | None = None,
) -> list[SweepPoint]:
    """Search every query at every sweep value of ``built.spec``.

    ``queries`` are the full float query vectors (a dimension cut is applied here);
    ``documents`` the full float document vectors (a matrix, or a stored table read block by
    block), needed only by binary specs to rescore their candidates.
    ``seed`` draws the latency sample. Runs FAISS on ``threads`` threads.
    """
    if k < 1 or batch_size < 1 or latency_queries < 1 or repeats < 1:
        raise ValueError("k, batch_size, latency_queries and repeats must be positive")
    vectors = indexed_vectors(built.spec, queries)
    if len(vectors) == 0:
        raise ValueError("no queries to search")
    sample = np.sort(np.random.default_rng(seed).choice(len(vectors), min(latency_queries, len(vectors)), replace=False))
    points = []
    with faiss_thread_limit(threads):
        for value, prepare in _prepared_searches(built, k, vectors, documents):
            points.append(_measure(
                built.spec, value, prepare(), vectors,
                batch_size=batch_size, repeats=repeats, latency_sample=sample, threads=threads,
            ))
    return points
