"""Benchmark the paired statistics of a three-model comparison against naive per-resample loops.

Workload (defaults): 3 models scored on 10,000 queries x 6 metrics; every pair of models is
compared on every metric over all queries, as ``compare_models`` does it: a studentized
bootstrap (10,000 resamples, jointly over the 3 pairs x 6 metrics), a sign-flip test (10,000
sign patterns), the paired t-test, d_z, the Monte-Carlo errors, the two families' adjustments;
plus the randomized Tukey HSD of the three models on the first metric (10,000 permutations).
Target: under 15 s on the 2-core development machine.

The reference is the naive per-resample Python loop for the same statistics: per bootstrap
resample, draw n query indices with ``random.Random`` and add up each column's delta and squared
delta (what the studentized interval needs); per sign pattern, flip each query's deltas; per
HSD permutation, shuffle each query's three values. Its cost is linear in the number of
resamples, so it is timed on ``--naive-resamples`` of each and scaled to the full counts.

Prints a human-readable summary, then ONE JSON line with the figures, the targets (< 15 s,
>= 50x the naive loop) and whether each was met.

    python benchmarks/bench_bootstrap.py [--queries N] [--resamples B] [--metrics M] [--models K]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import sys
import time

import numpy as np
import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats.comparisons import compare_models
from embedpyramid.stats.hsd_tables import tukey_hsd_tables

SPEEDUP_TARGET = 50.0
SECONDS_TARGET = 15.0


def synthetic_per_query(n_queries: int, n_metrics: int, n_models: int, seed: int) -> pl.DataFrame:
    """Per-query values shaped like retrieval metrics: in [0, 1], models tied on many queries."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.0, 1.0, size=(n_queries, n_metrics))
    frames = []
    for model in range(n_models):
        changed = rng.random((n_queries, n_metrics)) < 0.4
        values = np.where(changed, rng.uniform(0.0, 1.0, size=base.shape), base)
        frames += [
            pl.DataFrame({
                "dataset": "bench", "model": f"model-{model}", "system": "exact",
                "query_id": [f"q{i:06d}" for i in range(n_queries)], "metric": f"metric-{metric}",
                "value": values[:, metric],
            })
            for metric in range(n_metrics)
        ]
    return pl.concat(frames)


def naive_loops(matrix: np.ndarray, values: np.ndarray, counts: int, seed: int) -> float:
    """Seconds for ``counts`` bootstrap resamples, sign patterns and HSD permutations in Python."""
    rows = matrix.tolist()
    n_queries, n_columns = matrix.shape
    rng = random.Random(seed)
    start = time.perf_counter()
    for _ in range(counts):  # bootstrap: sums and sums of squares per column
        sums, squares = [0.0] * n_columns, [0.0] * n_columns
        for _ in range(n_queries):
            row = rows[rng.randrange(n_queries)]
            for column in range(n_columns):
                sums[column] += row[column]
                squares[column] += row[column] * row[column]
    for _ in range(counts):  # sign flips
        sums = [0.0] * n_columns
        for row in rows:
            sign = 1.0 if rng.random() < 0.5 else -1.0
            for column in range(n_columns):
                sums[column] += sign * row[column]
    model_rows = values.tolist()
    for _ in range(counts):  # HSD: shuffle each query's models
        totals = [0.0] * values.shape[1]
        for row in model_rows:
            shuffled = row[:]
            rng.shuffle(shuffled)
            for slot, value in enumerate(shuffled):
                totals[slot] += value
        max(totals) - min(totals)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=6)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--naive-resamples", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2, help="vectorised runs; the best counts")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    per_query = synthetic_per_query(args.queries, args.metrics, args.models, args.seed)
    queries = pl.DataFrame({"query_id": per_query["query_id"].unique().sort(), "text": "q"})
    settings = ComparisonSettings(
        baseline="model-0", all_pairs=True, n_resamples=args.resamples, n_permutations=args.resamples,
        seed=args.seed, interval="studentized", report_metric="metric-0", slice_columns=(), length_buckets=(),
    )
    n_pairs = args.models * (args.models - 1) // 2
    workload = (f"{args.models} models ({n_pairs} pairs) x {args.queries} queries x {args.metrics} metrics, "
                f"{args.resamples} resamples / sign patterns / HSD permutations")
    print(f"paired statistics, {workload}, {os.cpu_count()} CPUs")

    runs, statistics, hsd_seconds = [], 0.0, 0.0
    for _ in range(args.repeats):
        start = time.perf_counter()
        table = compare_models(per_query, queries, settings)
        middle = time.perf_counter()
        models, _ = tukey_hsd_tables(per_query, queries, settings, "metric-0")
        end = time.perf_counter()
        runs.append(end - start)
        if end - start == min(runs):
            statistics, hsd_seconds = middle - start, end - middle
    vectorized = min(runs)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert table.height == n_pairs * args.metrics and models.height == args.models
    print(f"  comparisons (bootstrap, sign-flip, t-test, d_z, MC errors, families): {statistics:.2f} s")
    print(f"  randomized Tukey HSD: {hsd_seconds:.2f} s")
    print(f"  total: {vectorized:.2f} s (runs: {', '.join(f'{s:.2f}' for s in runs)}), peak RSS {peak_rss_mib:.0f} MiB")

    wide = per_query.pivot(on="model", index=["query_id", "metric"], values="value").sort("metric", "query_id")
    values = {model: wide[model].to_numpy().reshape(args.metrics, args.queries).T for model in sorted(set(per_query["model"]))}
    pairs = list(itertools.combinations(sorted(values), 2))
    deltas = np.hstack([values[b] - values[a] for a, b in pairs])
    hsd_values = np.column_stack([values[m][:, 0] for m in sorted(values)])
    naive_sample = naive_loops(deltas, hsd_values, args.naive_resamples, args.seed)
    naive = naive_sample / args.naive_resamples * args.resamples
    print(f"  naive per-resample Python loops: {naive_sample:.2f} s for {args.naive_resamples} of each "
          f"-> {naive:.0f} s for {args.resamples}")

    speedup = naive / vectorized
    figures = {
        "benchmark": "paired_statistics",
        "queries": args.queries,
        "resamples": args.resamples,
        "metrics": args.metrics,
        "models": args.models,
        "pairs": n_pairs,
        "cpus": os.cpu_count(),
        "vectorized_seconds": round(vectorized, 3),
        "comparisons_seconds": round(statistics, 3),
        "hsd_seconds": round(hsd_seconds, 3),
        "naive_python_loop_seconds": round(naive, 1),
        "naive_python_loop_timed_resamples": args.naive_resamples,
        "speedup_vs_naive_python_loop": round(speedup, 1),
        "peak_rss_mib": round(peak_rss_mib, 1),
        "targets": {
            "speedup_vs_naive_python_loop_min": SPEEDUP_TARGET,
            "vectorized_seconds_max": SECONDS_TARGET,
        },
        "met": {
            "speedup_vs_naive_python_loop": speedup >= SPEEDUP_TARGET,
            "vectorized_seconds": vectorized < SECONDS_TARGET,
        },
    }
    print(f"  speedup vs naive Python loops: {speedup:.0f}x (target >= {SPEEDUP_TARGET:.0f}x); "
          f"total {vectorized:.2f} s (target < {SECONDS_TARGET:.0f} s)")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
