"""Benchmark the vectorised paired bootstrap against per-resample loops, in one run.

Default workload: 10,000 queries x 10,000 resamples x 6 metrics (jointly resampled), the
percentile interval included. Baselines, timed on the same deltas:

* the naive per-resample Python loop (the target's reference): per resample, draw n query
  indices with ``random.Random`` and add up each metric in Python. Its cost is exactly linear
  in the number of resamples, so it is timed on ``--naive-resamples`` resamples and scaled to
  the full count (a full run would take minutes);
* a per-resample loop with numpy inside (draw n indices, gather, mean), timed in full. It is
  reported for context: both it and the vectorised version are bounded below by drawing
  n x B random indices, so their ratio stays small whatever the vectorisation.

Prints a human-readable summary, then ONE JSON line with the figures, the targets
(>= 50x faster than the naive loop, under 10 s) and whether each was met.

    python benchmarks/bench_bootstrap.py [--queries N] [--resamples B] [--metrics M]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import sys
import time

import numpy as np

from embedpyramid.stats import paired_bootstrap, paired_sign_flip_test
from embedpyramid.stats.bootstrap import percentile_rank

SPEEDUP_TARGET = 50.0
SECONDS_TARGET = 10.0


def synthetic_deltas(n_queries: int, n_metrics: int, seed: int) -> np.ndarray:
    """Deltas shaped like retrieval metrics: many exact ties, the rest spread over [-1, 1]."""
    rng = np.random.default_rng(seed)
    changed = rng.random((n_queries, n_metrics)) < 0.4
    return np.where(changed, rng.uniform(-1.0, 1.0, size=(n_queries, n_metrics)), 0.0)


def naive_python_loop(deltas: np.ndarray, n_resamples: int, seed: int) -> list[list[float]]:
    """Resampled means, one resample and one draw at a time, in plain Python."""
    rows = deltas.tolist()
    n_queries, n_metrics = deltas.shape
    rng = random.Random(seed)
    means = []
    for _ in range(n_resamples):
        sums = [0.0] * n_metrics
        for _ in range(n_queries):
            row = rows[rng.randrange(n_queries)]
            for metric in range(n_metrics):
                sums[metric] += row[metric]
        means.append([total / n_queries for total in sums])
    return means


def numpy_per_resample_loop(deltas: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Resampled means, one resample at a time, numpy inside the loop."""
    rng = np.random.default_rng(seed)
    n_queries = deltas.shape[0]
    means = np.empty((n_resamples, deltas.shape[1]))
    for resample in range(n_resamples):
        means[resample] = deltas[rng.integers(0, n_queries, size=n_queries)].mean(axis=0)
    return means


def percentile_interval(means: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The same order-statistic interval as ``paired_bootstrap``, for the baselines."""
    ordered = np.sort(means, axis=0)
    k = percentile_rank(len(ordered), confidence)
    return ordered[k - 1], ordered[len(ordered) - k]


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=6)
    parser.add_argument("--naive-resamples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="vectorised runs; the best counts")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    deltas = synthetic_deltas(args.queries, args.metrics, args.seed)
    workload = f"{args.queries} queries x {args.resamples} resamples x {args.metrics} metrics"
    print(f"paired bootstrap, {workload}, {os.cpu_count()} CPUs")

    bootstrap = functools.partial(
        paired_bootstrap, deltas, n_resamples=args.resamples, seed=args.seed
    )
    vectorized_runs = []
    for _ in range(args.repeats):
        seconds, result = timed(bootstrap)
        vectorized_runs.append(seconds)
    vectorized = min(vectorized_runs)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  vectorised paired_bootstrap: {vectorized:.3f} s (runs: "
          f"{', '.join(f'{s:.3f}' for s in vectorized_runs)}), peak RSS {peak_rss_mib:.0f} MiB")

    sign_flip, _ = timed(
        functools.partial(
            paired_sign_flip_test, deltas, n_permutations=args.resamples, seed=args.seed
        )
    )
    print(f"  (context) paired_sign_flip_test, same sizes: {sign_flip:.3f} s")

    naive_sample, _ = timed(naive_python_loop, deltas, args.naive_resamples, args.seed)
    naive = naive_sample / args.naive_resamples * args.resamples
    print(f"  naive per-resample Python loop: {naive_sample:.3f} s for {args.naive_resamples} "
          f"resamples -> {naive:.1f} s for {args.resamples}")

    numpy_loop, means = timed(numpy_per_resample_loop, deltas, args.resamples, args.seed)
    loop_low, loop_high = percentile_interval(means, result.confidence)
    print(f"  (context) per-resample loop with numpy inside: {numpy_loop:.3f} s")
    # Same seed, same 64-bit index stream: the loop reproduces the intervals up to rounding.
    disagreement = float(
        max(np.max(np.abs(loop_low - result.ci_low)), np.max(np.abs(loop_high - result.ci_high)))
    )
    print(f"  interval ends vs the numpy loop on the same draws: max |diff| {disagreement:.1e}")

    speedup = naive / vectorized
    figures = {
        "benchmark": "paired_bootstrap",
        "queries": args.queries,
        "resamples": args.resamples,
        "metrics": args.metrics,
        "cpus": os.cpu_count(),
        "vectorized_seconds": round(vectorized, 4),
        "naive_python_loop_seconds": round(naive, 2),
        "naive_python_loop_timed_resamples": args.naive_resamples,
        "speedup_vs_naive_python_loop": round(speedup, 1),
        "numpy_per_resample_loop_seconds": round(numpy_loop, 3),
        "speedup_vs_numpy_per_resample_loop": round(numpy_loop / vectorized, 2),
        "max_interval_difference_vs_numpy_loop": disagreement,
        "sign_flip_seconds": round(sign_flip, 4),
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
    print(f"  speedup vs naive Python loop: {speedup:.0f}x (target >= {SPEEDUP_TARGET:.0f}x); "
          f"vs numpy-inside loop: {numpy_loop / vectorized:.1f}x")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
