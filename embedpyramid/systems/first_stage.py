"""An L4 index as the first stage of an L5 system ("HNSW + rerank" against "exact + rerank").

L4 searches each index at its own depth ``k`` (its recall cutoff); a fusion or rerank needs its
candidate depth instead. :func:`ann_first_stage` searches a built index at one sweep point and
that depth with the L4 search code (:func:`embedpyramid.serving.search_sweep`), so the run is
the index's own answer, and reports the index's QPS and batch-1 latency at that depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl

from embedpyramid.config.ann import Sweep
from embedpyramid.config.systems import AnnReference
from embedpyramid.serving.index import BuiltIndex
from embedpyramid.serving.sweep import SweepPoint, search_sweep
from embedpyramid.serving.vectors import Vectors


def ann_first_stage(
    built: BuiltIndex, reference: AnnReference, queries: np.ndarray, query_ids: Sequence[str],
    doc_ids: Sequence[str], *, depth: int, batch_size: int, latency_queries: int, seed: int, threads: int = 1,
    documents: Vectors | None = None,
) -> tuple[pl.DataFrame, SweepPoint]:
    """The run (``query_id, rank, doc_id, score``) of ``built`` at the sweep point of
    ``reference`` and ``depth`` candidates per query, with the sweep point's QPS and latency.

    ``queries`` are the model's full float query vectors; ``documents`` its full float
    document vectors (a matrix, or a stored table of which only the candidates' rows are read),
    needed by binary specs only (they rescore).
    """
    spec = built.spec
    if reference.spec != spec.name:
        raise ValueError(f"reference 'ann:{reference.spec}' does not name the index {spec.describe()}")
    if spec.sweep is None:
        if reference.param is not None:
            raise ValueError(f"{spec.describe()} has no sweep; its reference is 'ann:{spec.name}'")
    elif reference.param != spec.sweep.param or reference.value not in spec.sweep.values:
        raise ValueError(f"{spec.describe()}: {reference.param}={reference.value} is not one of its sweep points")
    if spec.sweep is not None and reference.value is not None:
        one_point = spec.model_copy(update={"sweep": Sweep(param=spec.sweep.param, values=(reference.value,))})
        built = replace(built, spec=one_point)
    (point,) = search_sweep(built, queries, depth, batch_size=batch_size, latency_queries=latency_queries,
                            seed=seed, threads=threads, documents=documents)
    return pl.from_arrow(point.run_table(query_ids, doc_ids)), point
