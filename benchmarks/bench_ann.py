"""Benchmark level L4: the configured indexes over a synthetic corpus, next to bare FAISS.

Default workload: 100,000 unit vectors of dimension 384 shaped like sentence embeddings (see
:func:`synthetic_corpus`), 1,000 queries, every spec of ``configs/ann.yaml`` built and searched
at every sweep point with the config's k and batch size. Measured in the same run:

* per sweep point of a FAISS spec, the pipeline (:func:`embedpyramid.serving.search_sweep`: score
  conversion, project ordering, timing loop) against bare ``index.search`` over the same
  batches with the same parameter and threads, timed right before and right after the
  pipeline (the fastest of ``--repeats`` passes on each side counts); target: the pipeline adds
  at most 5% to the search time summed over all those points, and to the median point (the
  sum is dominated by the slow flat scans; the largest per-point overhead is printed too, it is
  mostly timer noise on the fastest points). The pipeline's tie-aware ANN recall is printed beside
  FAISS's own intersection measure (``faiss.contrib.evaluation.knn_intersection_measure``) of
  the bare results. Each point's top-k id sets must equal bare FAISS's on every query, or the
  script stops before reporting it (the int8 spec is FAISS's IndexScalarQuantizer: it has a twin);
* binary specs have no bare FAISS twin (rescoring is the pipeline's own); the Hamming stage is
  printed for context;
* exact top-k throughput: the blocked torch search (:func:`embedpyramid.retrieval.search.exact_topk`)
  against ``faiss.IndexFlatIP``, all queries in one call each; target >= 0.8x. Before either is
  timed, both run once and must agree: scores by rank to 1e-5, and the same ids except where a
  document in one top-k only scores within 1e-5 of the k-th score (a near-tie at the cut).

Specs take the metric of a normalizing card (inner product over the unit synthetic vectors).
Threads default to the config's (1): with more, torch's and FAISS's OpenMP runtimes compete
for the cores of a small machine and timings get coarse (``OMP_WAIT_POLICY=PASSIVE`` helps).

Prints a table per spec, the recall/QPS frontier and QPS at the target recalls, then ONE JSON
line with the figures, the targets and whether each was met (including a 5-minute budget).

    python benchmarks/bench_ann.py [--docs N] [--queries Q] [--dim D] [--threads T] [--specs a,b]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402, F401  (imported first, so the thread limit below applies to exact_topk's torch too)
from faiss.contrib.evaluation import knn_intersection_measure  # noqa: E402
from results import record_result  # noqa: E402

from embedpyramid.config import IndexSpec, Sweep, load_ann_config  # noqa: E402
from embedpyramid.encode import thread_limit  # noqa: E402
from embedpyramid.retrieval.search import exact_topk  # noqa: E402
from embedpyramid.serving import (  # noqa: E402
    BuiltIndex,
    SweepPoint,
    ann_recall_at_k,
    build_index,
    faiss_thread_limit,
    frontier,
    qps_at_recall,
    resolve_metric,
    search_sweep,
)
from embedpyramid.serving.index import indexed_vectors  # noqa: E402
from embedpyramid.serving.vectors import binarize  # noqa: E402

OVERHEAD_TARGET = 0.05
EXACT_RATIO_TARGET = 0.8
SECONDS_TARGET = 300.0
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "ann.yaml"


def synthetic_corpus(n_docs: int, n_queries: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors shaped like sentence embeddings: a 64-d latent space with ``n_docs / 100``
    clusters, projected to ``dim`` dimensions with variance falling along the coordinates (so a
    dimension cut loses something, not everything), plus a little isotropic noise. Queries are
    documents perturbed in the latent space."""
    rng = np.random.default_rng(seed)
    latent = 64
    centres = rng.standard_normal((max(10, n_docs // 100), latent), dtype=np.float32)
    doc_latent = centres[rng.integers(0, len(centres), n_docs)]
    doc_latent += 0.6 * rng.standard_normal((n_docs, latent), dtype=np.float32)
    query_latent = doc_latent[rng.integers(0, n_docs, n_queries)]
    query_latent += 0.3 * rng.standard_normal((n_queries, latent), dtype=np.float32)
    projection = rng.standard_normal((latent, dim), dtype=np.float32)
    projection /= np.sqrt(1.0 + np.arange(dim, dtype=np.float32) / 32.0)

    def embed(points: np.ndarray) -> np.ndarray:
        vectors = points @ projection + 0.05 * rng.standard_normal((len(points), dim), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return embed(doc_latent), embed(query_latent)


def best_seconds(run: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Fastest of ``repeats`` timed calls after one warm-up call, and the last result."""
    result = run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def topk_differences(scores: np.ndarray, indices: np.ndarray, other_scores: np.ndarray, other_indices: np.ndarray,
                     queries: np.ndarray, documents: np.ndarray, tolerance: float) -> dict[str, float]:
    """Two top-k results of the same exact search against each other: the largest score
    difference by rank, and the queries whose id sets differ beyond a near-tie at the cut (a
    document in one set only whose score lies more than ``tolerance`` from the k-th score)."""
    differing, near_ties = 0, 0
    for row in np.flatnonzero((np.sort(indices, axis=1) != np.sort(other_indices, axis=1)).any(axis=1)):
        only = np.setxor1d(indices[row], other_indices[row])
        gaps = np.abs(documents[only] @ queries[row] - scores[row, -1])
        if (gaps <= tolerance).all():
            near_ties += 1
        else:
            differing += 1
    return {"max_score_difference": float(np.abs(scores - other_scores).max()), "queries_differing": differing,
            "queries_near_tie_at_cut": near_ties}


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def bare_batches(index: faiss.Index | faiss.IndexBinary, queries: np.ndarray, k: int, batch_size: int) -> np.ndarray:
    return np.concatenate([index.search(queries[s : s + batch_size], k)[1] for s in range(0, len(queries), batch_size)])


def single_point(built: BuiltIndex, value: int | None) -> BuiltIndex:
    """The same built index, with a spec that sweeps only ``value``."""
    spec = built.spec
    if spec.sweep is None:
        return built
    return dataclasses.replace(built, spec=spec.model_copy(update={"sweep": Sweep(param=spec.sweep.param, values=(value,))}))


def bare_twin(built: BuiltIndex, value: int | None, cut_queries: np.ndarray,
              k: int) -> tuple[faiss.Index | faiss.IndexBinary, np.ndarray, int] | None:
    """What bare FAISS searches for a sweep point: (index, query input, depth).

    For binary that is the Hamming stage alone, ``value`` candidates deep: context, not a twin.
    """
    spec = built.spec
    if spec.kind in ("faiss", "int8"):
        if value is not None and spec.sweep is not None:
            faiss.ParameterSpace().set_index_parameter(built.index, spec.sweep.param, value)
        return built.index, cut_queries, k
    if spec.kind == "binary" and value is not None:
        return built.index, binarize(cut_queries), value
    return None


def time_bare(bare: tuple[faiss.Index | faiss.IndexBinary, np.ndarray, int] | None, passes: list[float],
              args: argparse.Namespace, batch_size: int) -> np.ndarray | None:
    """Time ``repeats`` passes of bare FAISS after a one-batch warm-up, appending each pass's
    seconds to ``passes``; the ids of the last pass (None where the point has no bare twin)."""
    if bare is None:
        return None
    index, inputs, depth = bare
    indices = None
    with faiss_thread_limit(args.threads):
        index.search(inputs[:batch_size], depth)
        for _ in range(args.repeats):
            seconds, indices = timed(partial(bare_batches, index, inputs, depth, batch_size))
            passes.append(seconds)
    return indices


def measure_spec(spec: IndexSpec, documents: np.ndarray, queries: np.ndarray, exact_indices: np.ndarray,
                 args: argparse.Namespace, k: int, batch_size: int) -> tuple[BuiltIndex, list[dict]]:
    """Build one spec; per sweep point, time bare FAISS right before and right after the
    pipeline, ``repeats`` passes each after a one-batch warm-up (as the pipeline does); the
    fastest pass counts, as the pipeline's fastest of its ``repeats`` passes does."""
    built = build_index(spec, documents, seed=spec.seed, threads=args.threads)
    cut_queries = indexed_vectors(spec, queries)
    rows = []
    for value in spec.sweep.values if spec.sweep else (None,):
        bare = bare_twin(built, value, cut_queries, k)
        bare_passes: list[float] = []
        time_bare(bare, bare_passes, args, batch_size)
        (point,) = search_sweep(single_point(built, value), queries, k, batch_size=batch_size,
                                latency_queries=args.latency_queries, seed=args.seed, threads=args.threads,
                                repeats=args.repeats, documents=documents)
        bare_indices = time_bare(bare, bare_passes, args, batch_size)
        if spec.kind in ("faiss", "int8") and bare_indices is not None and not np.array_equal(
                np.sort(point.indices, axis=1), np.sort(bare_indices, axis=1)):
            raise SystemExit(f"{spec.name} {point.param}={point.value}: the pipeline's top-{k} ids differ from bare "
                             "FAISS's on the same index: the timings would compare different searches")
        rows.append(point_row(built, point, exact_indices, queries, documents, k,
                              min(bare_passes) if bare_passes else None, bare_indices))
    return built, rows


def point_row(built: BuiltIndex, point: SweepPoint, exact_indices: np.ndarray, queries: np.ndarray,
              documents: np.ndarray, k: int, bare_seconds: float | None, bare_indices: object) -> dict:
    spec = built.spec
    recall = float(ann_recall_at_k(point.indices, exact_indices, queries, documents, k, spec.metric).mean())
    is_faiss = spec.kind in ("faiss", "int8") and bare_seconds is not None
    return {
        "spec": spec.name, "kind": spec.kind, "factory": built.factory, "sweep_param": point.param,
        "sweep_value": point.value, "ann_recall": recall, "qps": point.qps, "p50_ms": point.p50_ms,
        "p95_ms": point.p95_ms, "pipeline_seconds": point.search_seconds,
        "faiss_seconds": bare_seconds if is_faiss else None,
        "faiss_qps": len(queries) / bare_seconds if is_faiss else None,
        "faiss_recall": float(knn_intersection_measure(bare_indices, exact_indices)) if is_faiss else None,
        "overhead": point.search_seconds / bare_seconds - 1.0 if is_faiss else None,
        "hamming_qps": len(queries) / bare_seconds if spec.kind == "binary" and bare_seconds else None,
        "build_seconds": built.build_seconds, "index_bytes": built.index_bytes,
        "bytes_per_vector": built.bytes_per_vector, "peak_rss_bytes": built.peak_rss_bytes,
    }


def print_spec(built: BuiltIndex, rows: list[dict]) -> None:
    print(f"\n{built.spec.name}: {built.factory}, build {built.build_seconds:.1f} s, "
          f"{built.bytes_per_vector:.1f} B/vector, peak RSS {built.peak_rss_bytes / 2**20:.0f} MiB")
    for row in rows:
        sweep = "" if row["sweep_param"] is None else f"{row['sweep_param']}={row['sweep_value']:<4} "
        line = (f"  {sweep:<14}recall {row['ann_recall']:.4f}  {row['qps']:>9.0f} QPS  "
                f"p50 {row['p50_ms']:.3f} ms  p95 {row['p95_ms']:.3f} ms")
        if row["faiss_qps"] is not None:
            line += (f"  | FAISS {row['faiss_qps']:>9.0f} QPS, intersection {row['faiss_recall']:.4f}, "
                     f"pipeline overhead {100 * row['overhead']:+.1f}%")
        elif row["hamming_qps"] is not None:
            line += f"  | Hamming stage alone {row['hamming_qps']:.0f} QPS"
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--threads", type=int, help="FAISS/torch threads (default: the config's settings.threads)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per measurement; the fastest counts")
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--specs", default="", help="comma-separated spec names (default: all)")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    config = load_ann_config(args.config)
    args.threads = args.threads or config.settings.threads
    k, batch_size = config.settings.k, config.settings.batch_size
    wanted = [name for name in args.specs.split(",") if name]
    specs = [resolve_metric(spec, "inner_product", True)[0]
             for spec in ([config.spec(name) for name in wanted] if wanted else config.specs)]
    documents, queries = synthetic_corpus(args.docs, args.queries, args.dim, args.seed)
    print(f"L4 benchmark: {args.docs} documents x {args.dim}-d, {args.queries} queries, k={k}, "
          f"batch {batch_size}, {args.threads} threads, FAISS {faiss.__version__}")

    flat_ip = faiss.IndexFlatIP(args.dim)
    flat_ip.add(documents)
    with faiss_thread_limit(args.threads), thread_limit(args.threads):
        # Equal outputs first: the same top-k as IndexFlatIP (up to near-ties at the cut).
        exact_scores, exact_indices = exact_topk(queries, documents, k)
        flat_scores, flat_indices = flat_ip.search(queries, k)
        agreement = topk_differences(exact_scores, exact_indices, flat_scores, flat_indices, queries, documents, 1e-5)
        print(f"exact top-{k} vs faiss.IndexFlatIP: scores by rank max |diff| {agreement['max_score_difference']:.1e}, "
              f"{agreement['queries_differing']} queries with other ids, {agreement['queries_near_tie_at_cut']} "
              f"differing only by a near-tie (1e-5) at the cut")
        if agreement["queries_differing"] or agreement["max_score_difference"] > 1e-5:
            raise SystemExit("exact_topk and IndexFlatIP return different top-k: timing them would compare different work")
        torch_seconds, _ = best_seconds(lambda: exact_topk(queries, documents, k), args.repeats)
        flat_seconds, _ = best_seconds(lambda: flat_ip.search(queries, k), args.repeats)
    exact_ratio = flat_seconds / torch_seconds
    print(f"exact top-{k}: torch exact_topk {args.queries / torch_seconds:.0f} QPS, faiss.IndexFlatIP "
          f"{args.queries / flat_seconds:.0f} QPS -> {exact_ratio:.2f}x (target >= {EXACT_RATIO_TARGET}x)")

    rows = []
    for spec in specs:
        if spec.dimension is not None and spec.dimension >= args.dim:
            continue
        built, spec_rows = measure_spec(spec, documents, queries, exact_indices, args, k, batch_size)
        print_spec(built, spec_rows)
        rows.extend(spec_rows)

    table = pl.DataFrame(rows, infer_schema_length=None)
    faiss_rows = table.filter(pl.col("faiss_seconds").is_not_null())
    overhead = float(faiss_rows["pipeline_seconds"].sum() / faiss_rows["faiss_seconds"].sum() - 1.0)
    median_overhead, max_overhead = float(faiss_rows["overhead"].median()), float(faiss_rows["overhead"].max())
    front = frontier(table)
    at_targets = qps_at_recall(table, config.settings.recall_targets)
    print("\nrecall/QPS frontier:")
    for row in front.iter_rows(named=True):
        sweep = "" if row["sweep_param"] is None else f" {row['sweep_param']}={row['sweep_value']}"
        print(f"  {row['spec']}{sweep}: recall {row['ann_recall']:.4f}, {row['qps']:.0f} QPS")
    print("QPS at target recall:")
    for row in at_targets.iter_rows(named=True):
        reached = "not reached" if row["spec"] is None else f"{row['qps']:.0f} QPS ({row['spec']} {row['sweep_param'] or ''}={row['sweep_value']})"
        print(f"  {row['target_recall']}: {reached}")
    seconds = time.perf_counter() - started
    print(f"pipeline overhead over bare FAISS search: all FAISS sweep points {100 * overhead:+.2f}%, median "
          f"point {100 * median_overhead:+.2f}% (target <= {100 * OVERHEAD_TARGET:.0f}% each), largest point "
          f"{100 * max_overhead:+.2f}%; total {seconds:.0f} s")

    figures = {
        "benchmark": "ann",
        "documents": args.docs, "dim": args.dim, "queries": args.queries, "k": k, "batch_size": batch_size,
        "threads": args.threads, "cpus": os.cpu_count(), "faiss_version": faiss.__version__,
        "exact_topk_qps": round(args.queries / torch_seconds, 1),
        "faiss_flat_ip_qps": round(args.queries / flat_seconds, 1),
        "exact_topk_vs_faiss_flat_ip": round(exact_ratio, 3), "exact_topk_agreement": agreement,
        "pipeline_overhead": round(overhead, 4),
        "pipeline_overhead_median_point": round(median_overhead, 4),
        "pipeline_overhead_max_point": round(max_overhead, 4),
        "points": [
            {key: (round(value, 4) if isinstance(value, float) else value) for key, value in row.items()
             if key in ("spec", "sweep_value", "ann_recall", "qps", "faiss_qps", "faiss_recall", "p50_ms", "p95_ms")}
            for row in rows
        ],
        "builds": {row["spec"]: {"factory": row["factory"], "build_seconds": round(row["build_seconds"], 2),
                                 "bytes_per_vector": round(row["bytes_per_vector"], 1),
                                 "peak_rss_mib": round(row["peak_rss_bytes"] / 2**20, 1)} for row in rows},
        "qps_at_recall": {str(row["target_recall"]): None if row["qps"] is None else round(row["qps"], 1)
                          for row in at_targets.iter_rows(named=True)},
        "frontier": [[row["spec"], row["sweep_value"]] for row in front.iter_rows(named=True)],
        "seconds": round(seconds, 1),
        "targets": {"pipeline_overhead_max": OVERHEAD_TARGET, "exact_topk_vs_faiss_flat_ip_min": EXACT_RATIO_TARGET,
                    "documents_min": 100_000, "seconds_max": SECONDS_TARGET},
        "met": {
            "pipeline_overhead": overhead <= OVERHEAD_TARGET and median_overhead <= OVERHEAD_TARGET,
            "exact_topk_vs_faiss_flat_ip": exact_ratio >= EXACT_RATIO_TARGET,
            "documents": args.docs >= 100_000,
            "seconds": seconds <= SECONDS_TARGET,
        },
    }
    for name, passed in figures["met"].items():
        print(f"{name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_ann", figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
