"""Pyramid level L4, serving approximation: what ANN indexes, quantization and dimension cuts lose.

Exact search measures the representation; L4 measures what serving loses, and reports two
things apart: ANN recall@k (overlap with the exact top-k, a property of the index) and the
relevance metrics under ANN (against the qrels, a property of the whole system), with the cost
of each index (build time, bytes, QPS, latency, peak RSS).

The flow per (model, dataset, spec): :func:`embedpyramid.config.load_ann_config` → :func:`resolve_metric` against the
card → per seed of :func:`build_seeds`: :func:`build_index` → :func:`save_index` under
:func:`index_file_name` → :func:`search_sweep`; then :func:`evaluate_spec` over the seeds, and
:func:`frontier` and :func:`qps_at_recall` over the summaries of every spec.
"""

from embedpyramid.serving.evaluate import SpecEvaluation, ann_recall_name, evaluate_spec
from embedpyramid.serving.frontier import frontier, frontier_svg, qps_at_recall
from embedpyramid.serving.index import (
    BuiltIndex,
    build_index,
    faiss_thread_limit,
    index_complete,
    load_index,
    save_index,
)
from embedpyramid.serving.recall import ann_recall_at_k
from embedpyramid.serving.specs import (
    build_seeds,
    index_file_name,
    nlist_for,
    resolve_factory,
    resolve_metric,
)
from embedpyramid.serving.sweep import SweepPoint, search_sweep
from embedpyramid.serving.vectors import TableVectors, symmetric_int8_index, truncate_and_normalize

__all__ = [
    "BuiltIndex",
    "SpecEvaluation",
    "SweepPoint",
    "TableVectors",
    "ann_recall_at_k",
    "ann_recall_name",
    "build_index",
    "build_seeds",
    "evaluate_spec",
    "frontier",
    "frontier_svg",
    "index_complete",
    "index_file_name",
    "load_index",
    "nlist_for",
    "qps_at_recall",
    "resolve_factory",
    "resolve_metric",
    "save_index",
    "search_sweep",
    "symmetric_int8_index",
    "faiss_thread_limit",
    "truncate_and_normalize",
]
