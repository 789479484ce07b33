"""What one spec costs against exact search: ANN recall, relevance under ANN, the paired delta.

Two things are reported apart. ANN recall@k compares the index's top-k with the exact top-k (a
property of the index, defined for every query). The relevance metrics under ANN score the
index's top-k against the qrels (a property of the whole system); their reference is the exact
top-k cut to the same depth k and scored with the same measures, and the paired delta of
``delta_metric`` (ANN − exact, per evaluated query) gets a paired interval
(:func:`embedpyramid.stats.paired_bootstrap`'s default, the hybrid: the t interval where half the
queries or more tie at 0 — most ANN deltas do —, bootstrap-t otherwise). A stochastic spec is built with several seeds: its
recall and delta are reported as mean ± sd over the builds, so one lucky build is not the number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure
from embedpyramid.retrieval.metrics.evaluate import evaluate_run
from embedpyramid.retrieval.search import Metric, run_table
from embedpyramid.serving.index import BuiltIndex
from embedpyramid.serving.recall import ann_recall_at_k
from embedpyramid.serving.sweep import SweepPoint
from embedpyramid.serving.vectors import GatheredRows, Vectors
from embedpyramid.stats.bootstrap import paired_bootstrap

PER_QUERY_SCHEMA: dict[str, pl.DataType] = {
    "spec": pl.String(), "seed": pl.Int64(), "sweep_param": pl.String(), "sweep_value": pl.Int64(),
    "query_id": pl.String(), "metric": pl.String(), "value": pl.Float64(),
}

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "spec": pl.String(), "kind": pl.String(), "factory": pl.String(), "index_metric": pl.String(),
    "reference_metric": pl.String(), "dimension": pl.Int64(), "sweep_param": pl.String(),
    "sweep_value": pl.Int64(), "k": pl.Int64(), "n_queries": pl.Int64(), "ann_recall": pl.Float64(),
    "ann_recall_sd": pl.Float64(), "delta_metric": pl.String(), "n_evaluated": pl.Int64(),
    "ann_value": pl.Float64(), "exact_value": pl.Float64(), "delta": pl.Float64(), "delta_sd": pl.Float64(),
    "delta_ci_low": pl.Float64(), "delta_ci_high": pl.Float64(), "confidence": pl.Float64(),
    "n_resamples": pl.Int64(), "bootstrap_seed": pl.Int64(), "build_seconds": pl.Float64(),
    "index_bytes": pl.Int64(), "bytes_per_vector": pl.Float64(), "n_vectors": pl.Int64(),
    "peak_rss_bytes": pl.Int64(), "qps": pl.Float64(), "batch_size": pl.Int64(), "p50_ms": pl.Float64(),
    "p95_ms": pl.Float64(), "latency_queries": pl.Int64(), "seed": pl.Int64(), "n_seeds": pl.Int64(),
    "seeds": pl.String(), "build_threads": pl.Int64(), "search_threads": pl.Int64(),
    "faiss_version": pl.String(), "training_finding": pl.String(),
}

Build = tuple[BuiltIndex, Sequence[SweepPoint]]


def ann_recall_name(k: int) -> str:
    return f"ANNRecall@{k}"


@dataclass(frozen=True)
class SpecEvaluation:
    """``per_query``: the long table (PER_QUERY_SCHEMA) with ``ANNRecall@k`` for every query and
    each measure for every evaluated query, per build seed and sweep point. ``summary``: one row
    per sweep point over all seeds (SUMMARY_SCHEMA). ``excluded_query_ids``: queries without a
    relevant qrel."""

    per_query: pl.DataFrame
    summary: pl.DataFrame
    excluded_query_ids: list[str]


def _sd(values: list[float]) -> float | None:
    """Sample standard deviation over builds (None for a single build)."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def evaluate_spec(
    builds: Sequence[Build],
    *,
    exact_scores: np.ndarray,
    exact_indices: np.ndarray,
    queries: np.ndarray,
    documents: Vectors,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    qrels: pl.DataFrame,
    measures: Sequence[Measure],
    conventions: MetricConventions = MetricConventions(),
    delta_metric: str = "nDCG@10",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    bootstrap_seed: int = 42,
    query_groups: Mapping[str, str] | None = None,
    reference_metric: Metric = "inner_product",
) -> SpecEvaluation:
    """Evaluate every sweep point of one spec, built once per seed, against the exact search.

    ``builds`` holds (built index, its sweep points) per seed, all of one spec. ``exact_scores``
    / ``exact_indices`` are the exact top-k (at least k columns, project order) of the full
    float ``queries`` over the full float ``documents`` under ``reference_metric`` (the card's)
    — the vectors recall is recomputed from, whatever cut or metric the spec applies. Only the
    rows that some exact or ANN top-k names are read (a stored table in one pass over its
    blocks): at most min(N, n_queries × k × (sweep points × seeds + 1)) vectors are held.

    Per sweep point, ANN recall and the ``delta_metric`` delta are the mean over seeds, with
    their sd over seeds; the delta's CI treats as units the queries (or whole ``query_groups``,
    query_id → group) of the per-query delta averaged over seeds. Costs (QPS, latency, build
    seconds, bytes) are means over seeds, peak RSS the largest.
    """
    if not builds or not all(points for _, points in builds):
        raise ValueError("no sweep points to evaluate")
    spec = builds[0][0].spec
    k = builds[0][1][0].indices.shape[1]
    too_deep = [str(m) for m in measures if m.cutoff is None or m.cutoff > k]
    if too_deep:
        raise ValueError(f"measures {too_deep} read past the ANN depth k={k}; use cutoffs <= k")
    if delta_metric not in {str(m) for m in measures}:
        raise ValueError(f"delta_metric {delta_metric!r} is not among the measures {[str(m) for m in measures]}")
    exact_cut = min(k, len(doc_ids))
    if exact_indices.shape[1] < exact_cut:
        raise ValueError(f"the exact top-k has {exact_indices.shape[1]} columns; the ANN depth needs {exact_cut}")
    exact_scores, exact_indices = exact_scores[:, :exact_cut], exact_indices[:, :exact_cut]

    exact = evaluate_run(
        pl.from_arrow(run_table(query_ids, doc_ids, exact_scores, exact_indices)),
        qrels, measures, conventions, query_ids=query_ids,
    )
    if not exact.evaluated_query_ids:
        raise ValueError("no query has a relevant qrel: nothing to compare under ANN")
    exact_delta_values = _metric_values(exact.per_query, delta_metric)
    groups = None if query_groups is None else [query_groups[q] for q in exact.evaluated_query_ids]

    gathered = GatheredRows.of(documents, [exact_indices, *(point.indices for _, points in builds for point in points)])
    exact_positions = gathered.positions(exact_indices)
    tables = []
    per_point: dict[int, list[tuple[BuiltIndex, SweepPoint, np.ndarray, np.ndarray]]] = {}
    for built, points in builds:
        for position, point in enumerate(points):
            recall = ann_recall_at_k(gathered.positions(point.indices), exact_positions, queries, gathered.vectors, k,
                                     reference_metric)
            ann = evaluate_run(
                pl.from_arrow(point.run_table(query_ids, doc_ids)), qrels, measures, conventions, query_ids=query_ids
            )
            recall_rows = pl.DataFrame({"query_id": list(query_ids), "metric": ann_recall_name(k), "value": recall})
            tables.append(
                pl.concat([recall_rows, ann.per_query], how="vertical_relaxed").select(
                    pl.lit(spec.name).alias("spec"), pl.lit(built.seed).alias("seed"),
                    pl.lit(point.param).alias("sweep_param"), pl.lit(point.value).alias("sweep_value"),
                    "query_id", "metric", "value",
                ).cast(PER_QUERY_SCHEMA)
            )
            per_point.setdefault(position, []).append((built, point, recall, _metric_values(ann.per_query, delta_metric)))

    rows = []
    for seeded in per_point.values():
        deltas = np.mean([ann_values - exact_delta_values for *_, ann_values in seeded], axis=0)
        bootstrap = paired_bootstrap(deltas, n_resamples=n_resamples, confidence=confidence, seed=bootstrap_seed,
                                     groups=groups)
        recalls = [float(recall.mean()) for _, _, recall, _ in seeded]
        seed_deltas = [float((ann_values - exact_delta_values).mean()) for *_, ann_values in seeded]
        rows.append({
            **_point_fields(seeded, reference_metric), "k": k,
            "ann_recall": float(np.mean(recalls)), "ann_recall_sd": _sd(recalls),
            "delta_metric": delta_metric, "n_evaluated": len(deltas),
            "ann_value": float(np.mean([ann_values.mean() for *_, ann_values in seeded])),
            "exact_value": float(exact_delta_values.mean()),
            "delta": float(bootstrap.mean), "delta_sd": _sd(seed_deltas),
            "delta_ci_low": float(bootstrap.ci_low), "delta_ci_high": float(bootstrap.ci_high),
            "confidence": bootstrap.confidence, "n_resamples": bootstrap.n_resamples, "bootstrap_seed": bootstrap.seed,
        })
    return SpecEvaluation(
        per_query=pl.concat(tables),
        summary=pl.DataFrame(rows, schema=SUMMARY_SCHEMA),
        excluded_query_ids=exact.excluded_query_ids,
    )


def _metric_values(per_query: pl.DataFrame, metric: str) -> np.ndarray:
    """One metric's values in query_id order (evaluate_run sorts by query_id)."""
    return per_query.filter(pl.col("metric") == metric)["value"].to_numpy()


def _point_fields(seeded: list[tuple[BuiltIndex, SweepPoint, np.ndarray, np.ndarray]], reference: Metric) -> dict[str, object]:
    """The summary fields that describe the index and the sweep point (costs averaged over seeds)."""
    built, point = seeded[0][0], seeded[0][1]
    spec = built.spec

    def mean(values: list[float]) -> float:
        return float(np.mean(values))

    return {
        "spec": spec.name, "kind": spec.kind, "factory": built.factory, "index_metric": spec.metric,
        "reference_metric": reference, "dimension": built.dimension, "sweep_param": point.param,
        "sweep_value": point.value, "n_queries": len(point.indices),
        "build_seconds": mean([b.build_seconds for b, *_ in seeded]),
        "index_bytes": round(mean([b.index_bytes for b, *_ in seeded])),
        "bytes_per_vector": mean([b.bytes_per_vector for b, *_ in seeded]), "n_vectors": built.n_vectors,
        "peak_rss_bytes": max(b.peak_rss_bytes for b, *_ in seeded), "qps": mean([p.qps for _, p, *_ in seeded]),
        "batch_size": point.batch_size, "p50_ms": mean([p.p50_ms for _, p, *_ in seeded]),
        "p95_ms": mean([p.p95_ms for _, p, *_ in seeded]), "latency_queries": point.latency_queries,
        "seed": built.seed, "n_seeds": len(seeded), "seeds": ",".join(str(b.seed) for b, *_ in seeded),
        "build_threads": built.threads, "search_threads": point.threads, "faiss_version": built.faiss_version,
        "training_finding": "; ".join(built.training_findings) or None,
    }
