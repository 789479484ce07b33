"""Benchmark the paired statistics of a three-model comparison against the same statistics in plain numpy.

Workload (defaults): 3 models scored on 10,000 queries x 6 metrics; every pair of models is
compared on every metric over all queries, as ``compare_models`` does it: a studentized
bootstrap (10,000 resamples, jointly over the 3 pairs x 6 metrics), a sign-flip test (10,000
sign patterns), the paired t-test, d_z, the Monte-Carlo errors, the two families' adjustments;
plus the randomized Tukey HSD of the three models on the first metric (10,000 permutations).

The anchor (:func:`numpy_anchor`) computes the same resampled sums in vectorized numpy from the
same draws — per bootstrap resample the drawn counts times the deltas and their squares, per
sign pattern the flipped sums, per HSD permutation the range of the permuted totals — and from
them the studentized interval, bootstrap median, share above zero, sign-flip p-values, HSD
p-values and critical range. It does less than the project (no t-test, d_z, Monte-Carlo errors,
families or tables; its matrix products may use every BLAS thread, the project's use one), so
the ratio is conservative. Before anything is timed, the anchor's outputs must equal the
project's (max |difference| <= 1e-12); then the two alternate for ``--repeats`` runs and the
minima are compared. Targets: the project at least as fast as the anchor (>= 1.0x) and under
15 s on the 2-core development machine.

Prints a human-readable summary with PASS/FAIL per target, then ONE JSON line with the figures,
the targets and whether each was met.

    python benchmarks/bench_bootstrap.py [--queries N] [--resamples B] [--metrics M] [--models K]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import time

import numpy as np
import polars as pl
from results import record_result

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats.comparisons import compare_models
from embedpyramid.stats.hsd_tables import tukey_hsd_tables
from embedpyramid.stats.units import rows_per_block

SPEEDUP_TARGET = 1.0
EQUAL_TOLERANCE = 1e-12
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


def numpy_anchor(deltas: np.ndarray, hsd_values: np.ndarray, settings: ComparisonSettings) -> dict[str, np.ndarray]:
    """The same statistics in plain vectorized numpy, from the same draws as the project.

    Bootstrap: per resample, how often each query was drawn (``np.bincount``) times the centred
    deltas and their squares (one matrix product per block: the resampled mean and the standard
    error the studentized interval needs), then the interval from the sorted t statistics, the
    median and the share above zero. Sign flips: the
    +-1 patterns times the deltas. HSD: each query's three values permuted by one of the 3! orders,
    the range of the totals. Draws come from ``np.random.default_rng(seed)`` in the blocks the
    project draws them in (so the generator is consumed alike), and the results must equal the
    project's; the t-test, d_z, Monte-Carlo errors and families are not computed here.
    """
    n, b = deltas.shape[0], settings.n_resamples
    k = int(np.floor((b + 1) * (1.0 - settings.confidence) / 2.0 + 1e-9))
    mean = deltas.mean(axis=0)
    centred = deltas - mean
    se = np.sqrt(n / (n - 1) * (centred**2).sum(axis=0)) / n
    means, t = np.empty((b, deltas.shape[1])), np.empty((b, deltas.shape[1]))
    values = np.hstack([centred, centred**2])
    rng, done, columns = np.random.default_rng(settings.seed), 0, deltas.shape[1]
    while done < b:
        block = rng.integers(0, n, size=(min(rows_per_block(n, b), b - done), n), dtype=np.int64)
        rows = block.shape[0]
        counts = np.bincount((block + n * np.arange(rows)[:, None]).ravel(), minlength=rows * n).reshape(rows, n)
        sums = counts.astype(np.float64) @ values
        shift = sums[:, :columns] / n
        spread = sums[:, columns:] - n * shift**2
        means[done:done + rows] = mean + shift
        t[done:done + rows] = shift / (np.sqrt(n / (n - 1) * spread) / n)
        done += rows
    means.sort(axis=0)
    t.sort(axis=0)
    low, high = mean - t[b - k] * se, mean - t[k - 1] * se
    if settings.delta_bounds is not None:
        low, high = np.clip(low, *settings.delta_bounds), np.clip(high, *settings.delta_bounds)
    middle = b // 2
    median = means[middle] if b % 2 else (means[middle - 1] + means[middle]) / 2.0

    observed = np.abs(deltas.sum(axis=0) / n)
    threshold = observed - 100.0 * np.finfo(np.float64).eps * observed
    as_extreme = np.zeros(deltas.shape[1], dtype=np.int64)
    rng, done, words = np.random.default_rng(settings.seed), 0, -(-n // 64)
    while done < settings.n_permutations:
        rows = min(rows_per_block(n, settings.n_permutations), settings.n_permutations - done)
        raw = rng.integers(0, 2**64, size=(rows, words), dtype=np.uint64, endpoint=False)
        signs = 1.0 - 2.0 * np.unpackbits(raw.astype("<u8").view(np.uint8), axis=1, count=n, bitorder="little")
        as_extreme += np.count_nonzero(np.abs(signs @ deltas / n) >= threshold, axis=0)
        done += rows

    n_models, n_permutations = hsd_values.shape[1], settings.n_permutations
    orders = np.array(list(itertools.permutations(range(n_models))))
    ranges, rng, done = np.empty(n_permutations), np.random.default_rng(settings.seed), 0
    while done < n_permutations:
        rows = min(rows_per_block(n * n_models, n_permutations), n_permutations - done)
        codes = rng.integers(0, len(orders), size=(rows, n), dtype=np.int64)
        totals = hsd_values[np.arange(n)[None, :, None], orders[codes]].sum(axis=1)
        ranges[done:done + rows] = totals.max(axis=1) - totals.min(axis=1)
        done += rows
    ranges = np.sort(ranges / n)
    model_means = hsd_values.mean(axis=0)
    pairs = list(itertools.combinations(range(n_models), 2))
    gaps = np.array([abs(model_means[j] - model_means[i]) for i, j in pairs])
    beyond = n_permutations - np.searchsorted(ranges, gaps - 100.0 * np.finfo(np.float64).eps * gaps, side="left")
    rank = min(n_permutations, int(np.ceil((n_permutations + 1) * settings.confidence - 1e-9)))
    return {
        "ci_low": low, "ci_high": high, "boot_median": median, "share_above_zero": (means > 0.0).mean(axis=0),
        "p_value": (as_extreme + 1) / (settings.n_permutations + 1),
        "hsd_p_value": (beyond + 1.0) / (n_permutations + 1.0), "critical_range": np.array([ranges[rank - 1]]),
    }


def anchor_inputs(per_query: pl.DataFrame, table: pl.DataFrame, settings: ComparisonSettings,
                  report_metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The (queries x rows of ``table``) delta matrix, ties set to 0 as the project does, and the
    (queries x models) values of ``report_metric`` (baseline first, then sorted)."""
    wide = per_query.pivot(on="model", index=["query_id", "metric"], values="value").sort("metric", "query_id")
    columns = []
    for row in table.iter_rows(named=True):
        values = wide.filter(pl.col("metric") == row["metric"])
        delta = (values[row["model_b"]] - values[row["model_a"]]).to_numpy()
        columns.append(np.where(np.abs(delta) <= settings.tie_epsilon, 0.0, delta))
    models = sorted(set(per_query["model"]) - {settings.baseline})
    report = wide.filter(pl.col("metric") == report_metric)
    return np.column_stack(columns), report.select(settings.baseline, *models).to_numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=6)
    parser.add_argument("--models", type=int, default=3)
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

    # Equal outputs first: the project's tables against the anchor's, from the same draws.
    table = compare_models(per_query, queries, settings)
    models, hsd_pairs = tukey_hsd_tables(per_query, queries, settings, "metric-0")
    assert table.height == n_pairs * args.metrics and models.height == args.models
    deltas, hsd_values = anchor_inputs(per_query, table, settings, "metric-0")
    anchor = numpy_anchor(deltas, hsd_values, settings)
    project = {name: table[name].to_numpy() for name in ("ci_low", "ci_high", "boot_median", "share_above_zero", "p_value")}
    project["hsd_p_value"] = hsd_pairs["p_value"].to_numpy()
    project["critical_range"] = models["critical_range"].unique().to_numpy()
    differences = {name: float(np.abs(project[name] - anchor[name]).max()) for name in project}
    same = all(value <= EQUAL_TOLERANCE for value in differences.values())
    print(f"  same statistics as the numpy anchor (max |diff| <= {EQUAL_TOLERANCE:g}): {'PASS' if same else 'FAIL'} "
          f"({', '.join(f'{name} {value:.1e}' for name, value in differences.items())})")
    if not same:
        raise SystemExit("the project and the numpy anchor compute different statistics: timing them would compare "
                         "different work")

    runs, anchor_runs, statistics, hsd_seconds = [], [], 0.0, 0.0
    for _ in range(args.repeats):  # in turn, so a load spike on a shared machine hits both
        start = time.perf_counter()
        compare_models(per_query, queries, settings)
        middle = time.perf_counter()
        tukey_hsd_tables(per_query, queries, settings, "metric-0")
        end = time.perf_counter()
        runs.append(end - start)
        if end - start == min(runs):
            statistics, hsd_seconds = middle - start, end - middle
        start = time.perf_counter()
        numpy_anchor(deltas, hsd_values, settings)
        anchor_runs.append(time.perf_counter() - start)
    vectorized, anchor_seconds = min(runs), min(anchor_runs)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  comparisons (bootstrap, sign-flip, t-test, d_z, MC errors, families): {statistics:.2f} s")
    print(f"  randomized Tukey HSD: {hsd_seconds:.2f} s")
    print(f"  total: {vectorized:.2f} s (runs: {', '.join(f'{s:.2f}' for s in runs)}), peak RSS {peak_rss_mib:.0f} MiB")
    print(f"  numpy anchor (bootstrap sums, sign flips, HSD ranges only): {anchor_seconds:.2f} s "
          f"(runs: {', '.join(f'{s:.2f}' for s in anchor_runs)})")

    speedup = anchor_seconds / vectorized
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
        "numpy_anchor_seconds": round(anchor_seconds, 3),
        "speedup_vs_numpy_anchor": round(speedup, 2),
        "max_difference_vs_numpy_anchor": differences,
        "peak_rss_mib": round(peak_rss_mib, 1),
        "targets": {
            "speedup_vs_numpy_anchor_min": SPEEDUP_TARGET,
            "vectorized_seconds_max": SECONDS_TARGET,
        },
        "met": {
            "same_statistics": same,
            "speedup_vs_numpy_anchor": speedup >= SPEEDUP_TARGET,
            "vectorized_seconds": vectorized < SECONDS_TARGET,
        },
    }
    print(f"  speedup vs the numpy anchor: {speedup:.2f}x (target >= {SPEEDUP_TARGET:.1f}x): "
          f"{'PASS' if figures['met']['speedup_vs_numpy_anchor'] else 'FAIL'}; total {vectorized:.2f} s "
          f"(target < {SECONDS_TARGET:.0f} s): {'PASS' if figures['met']['vectorized_seconds'] else 'FAIL'}")
    print(json.dumps(record_result("bench_bootstrap", figures)))
    return 0 if all(figures["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
