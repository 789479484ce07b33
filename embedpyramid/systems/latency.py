"""The latency one L5 stage adds per query: p50 and p95 of per-query wall-clock times.

Batch-1 latency and batch throughput are never mixed: every time here is one query handled
alone (wall clock, ``time.perf_counter``). ``scope`` states which queries were timed: ``every
query`` where the stage handles one query per call anyway (BM25, cross-encoder rerank), or a
seeded sample (:func:`latency_sample`) where the run is computed for all queries at once and the
sample is re-run one query at a time (fusion, bi-encoder rerank). Percentiles use numpy's
default linear interpolation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StageLatency:
    """p50/p95 of one stage's per-query times, in milliseconds, over ``n_queries`` timed queries."""

    p50_ms: float
    p95_ms: float
    n_queries: int
    scope: str

    @classmethod
    def from_seconds(cls, seconds: Sequence[float] | np.ndarray, *, scope: str) -> StageLatency:
        times = np.asarray(seconds, dtype=np.float64) * 1000.0
        if times.size == 0:
            return cls(float("nan"), float("nan"), 0, scope)
        p50, p95 = np.percentile(times, [50, 95])
        return cls(float(p50), float(p95), int(times.size), scope)


def latency_sample(n_queries: int, size: int, seed: int) -> np.ndarray:
    """Sorted positions of ``min(size, n_queries)`` queries drawn without replacement with ``seed``."""
    if n_queries == 0:
        return np.empty(0, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(n_queries, min(size, n_queries), replace=False))


def time_per_query(handle: Callable[[int], object], positions: Sequence[int] | np.ndarray, *, seed: int) -> StageLatency:
    """Call ``handle(position)`` for each sampled query, one at a time, and summarise the times."""
    seconds = np.empty(len(positions))
    for index, position in enumerate(positions):
        start = time.perf_counter()
        handle(int(position))
        seconds[index] = time.perf_counter() - start
    return StageLatency.from_seconds(seconds, scope=f"sample of {len(positions)} queries (seed {seed})")
