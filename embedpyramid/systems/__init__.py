"""Pyramid level L5, systems: BM25, fusion and second-stage rerank, each scored like a model.

Dense exact search measures the representation; L5 asks whether the deployed system improves
when only the embedding changes. Every system (``configs/systems.yaml``, validated by
:mod:`embedpyramid.config.systems`) produces a run in the project's format, which is scored by
the same metrics into the same long per-query table with its own ``system`` value, so the
paired comparisons, slices and report apply unchanged, and :func:`system_comparisons` gives each
system's paired verdict against its model's dense exact search.

Modules: ``runs`` (integer-coded runs in the project's ranking order), ``bm25`` (bm25s),
``fusion`` (RRF, weighted score fusion, the dev-split weight choice), ``rerank`` (cross-encoder
and bi-encoder rerank of any first stage), ``first_stage`` (an L4 index as a first stage),
``latency`` (per-query p50/p95 of each stage), ``level`` (one system on one dataset, read and
written through the artifact store) and ``verdict``.
"""

from embedpyramid.systems.bm25 import Bm25Index, Bm25Run, bm25_search, build_bm25_index, top_documents
from embedpyramid.systems.first_stage import ann_first_stage
from embedpyramid.systems.fusion import (
    WeightChoice,
    candidates,
    choose_weight,
    normalized_scores,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)
from embedpyramid.systems.latency import StageLatency, latency_sample, time_per_query
from embedpyramid.systems.level import (
    SUMMARY_SCHEMA,
    DatasetTables,
    DevSplit,
    SystemResult,
    evaluate_system,
    read_system_run,
    read_system_summary,
    reference_run_path,
    systems_dir,
    write_system,
)
from embedpyramid.systems.rerank import (
    CrossEncoderScorer,
    KeyedVectors,
    RerankRun,
    bi_encoder_rerank,
    cross_encoder_rerank,
)
from embedpyramid.systems.runs import CodedRun, empty_queries, encode_run, queries_with_ties, ranked
from embedpyramid.systems.verdict import system_comparisons

__all__ = [
    "SUMMARY_SCHEMA",
    "Bm25Index",
    "Bm25Run",
    "CodedRun",
    "CrossEncoderScorer",
    "DatasetTables",
    "DevSplit",
    "KeyedVectors",
    "RerankRun",
    "StageLatency",
    "SystemResult",
    "WeightChoice",
    "ann_first_stage",
    "bi_encoder_rerank",
    "bm25_search",
    "build_bm25_index",
    "candidates",
    "choose_weight",
    "cross_encoder_rerank",
    "empty_queries",
    "encode_run",
    "evaluate_system",
    "latency_sample",
    "normalized_scores",
    "queries_with_ties",
    "ranked",
    "read_system_run",
    "read_system_summary",
    "reciprocal_rank_fusion",
    "reference_run_path",
    "system_comparisons",
    "systems_dir",
    "time_per_query",
    "top_documents",
    "weighted_score_fusion",
    "write_system",
]
