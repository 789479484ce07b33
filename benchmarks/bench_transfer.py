"""Benchmark the L3 transfer analysis against a per-resample loop, in one run.

Default workload: 2 public x 2 own datasets of 10,000 queries each, 5 models, 10,000 bootstrap
resamples: every dataset resampled, every public x own pair's Kendall tau_b, Spearman rho,
same-winner probability and flip shares. The reference is the straightforward loop: per
resample, gather each dataset's resampled queries with numpy, then ``scipy.stats.kendalltau`` and
``spearmanr`` per pair. It draws the very same resamples (same seeds), so the two must agree on
every tau_b — checked before the project's analysis is timed (the script stops otherwise); its
cost is linear in the resamples, so it is timed on ``--loop-resamples`` and scaled.

Prints a summary, then ONE JSON line with the figures, the targets (>= 10x faster than the
loop, under 10 s) and whether each was met.

    python benchmarks/bench_transfer.py [--queries N] [--resamples B] [--models M]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from results import record_result
from scipy.stats import kendalltau, spearmanr

from embedpyramid.config.transfer import TransferSettings
from embedpyramid.stats.bootstrap import bootstrap_indices
from embedpyramid.transfer import QueryMeanScores, dataset_seed, transfer_analysis

SPEEDUP_TARGET = 10.0
SECONDS_TARGET = 10.0
ROLES = {"public-a": "public", "public-b": "public", "own-a": "own", "own-b": "own"}


def synthetic(n_queries: int, n_models: int, seed: int) -> list[QueryMeanScores]:
    """Per-query values shaped like nDCG: many zeros, the rest spread over (0, 1]."""
    rng = np.random.default_rng(seed)
    models = tuple(f"model-{i}" for i in range(n_models))
    datasets = []
    for name, role in ROLES.items():
        quality = rng.uniform(0.3, 0.6, n_models)
        values = np.where(rng.random((n_queries, n_models)) < quality, rng.random((n_queries, n_models)), 0.0)
        datasets.append(QueryMeanScores(name, "nDCG@10", role, models, tuple(map(str, range(n_queries))), values))
    return datasets


def loop(datasets: list[QueryMeanScores], n_resamples: int, seed: int) -> dict[tuple[str, str], list[float]]:
    """tau_b (and rho) of every pair, one resample at a time, with scipy."""
    draws = {d.dataset: np.concatenate(list(bootstrap_indices(d.n_items, n_resamples=n_resamples,
                                                              seed=dataset_seed(seed, d.dataset))))
             for d in datasets}
    taus: dict[tuple[str, str], list[float]] = {}
    for b in range(n_resamples):
        means = {d.dataset: d.values[draws[d.dataset][b]].mean(axis=0) for d in datasets}
        for public in (d for d in datasets if d.role == "public"):
            for own in (d for d in datasets if d.role == "own"):
                taus.setdefault((public.dataset, own.dataset), []).append(
                    kendalltau(means[public.dataset], means[own.dataset]).statistic)
                spearmanr(means[public.dataset], means[own.dataset])
    return taus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--loop-resamples", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="vectorised runs; the best counts")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    datasets = synthetic(args.queries, args.models, args.seed)
    print(f"transfer analysis, 4 datasets x {args.queries} queries x {args.models} models x "
          f"{args.resamples} resamples, {os.cpu_count()} CPUs")
    settings = TransferSettings(n_resamples=args.resamples, seed=args.seed)
    start = time.perf_counter()
    loop_taus = loop(datasets, args.loop_resamples, args.seed)
    loop_seconds = (time.perf_counter() - start) / args.loop_resamples * args.resamples
    print(f"  per-resample loop (numpy gather + scipy), scaled from {args.loop_resamples} resamples: "
          f"{loop_seconds:.1f} s")

    check = transfer_analysis(datasets, TransferSettings(n_resamples=args.loop_resamples, seed=args.seed,
                                                        confidence=0.5))
    mismatch = 0.0  # the largest |difference| between our interval endpoints and the loop's order statistics
    for row in check.pairs.iter_rows(named=True):
        ours = np.sort(np.array(loop_taus[(row["public_dataset"], row["own_dataset"])]))
        k = int(np.floor((args.loop_resamples + 1) * 0.25 + 1e-9))
        mismatch = float(max(mismatch, abs(ours[k - 1] - row["tau_b_ci_low"]), abs(ours[len(ours) - k] - row["tau_b_ci_high"])))
    print(f"  interval endpoints vs the loop's scipy tau_b on the same resamples: max |diff| {mismatch:.2e}: "
          f"{'PASS' if mismatch < 1e-12 else 'FAIL'}")
    if not mismatch < 1e-12:
        raise SystemExit("transfer_analysis and the per-resample loop disagree: timing them would compare different work")
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = transfer_analysis(datasets, settings)
        runs.append(time.perf_counter() - start)
    vectorised = min(runs)
    print(f"  transfer_analysis: {vectorised:.2f} s (runs: {', '.join(f'{s:.2f}' for s in runs)})")

    speedup = loop_seconds / vectorised
    print(f"  speedup {speedup:.1f}x (target >= {SPEEDUP_TARGET:.0f}x): {'PASS' if speedup >= SPEEDUP_TARGET else 'FAIL'}; "
          f"{vectorised:.2f} s (target < {SECONDS_TARGET:.0f} s): {'PASS' if vectorised < SECONDS_TARGET else 'FAIL'}")
    figures = {
        "benchmark": "transfer", "queries": args.queries, "models": args.models, "resamples": args.resamples,
        "datasets": len(datasets), "pairs": result.pairs.height, "seconds": round(vectorised, 3),
        "loop_seconds": round(loop_seconds, 1), "speedup": round(speedup, 1), "max_tau_difference": mismatch,
        "targets": {"speedup": SPEEDUP_TARGET, "seconds": SECONDS_TARGET},
        "met": {"speedup": bool(speedup >= SPEEDUP_TARGET), "seconds": bool(vectorised < SECONDS_TARGET),
                "same_tau": bool(mismatch < 1e-12)},
    }
    print(json.dumps(record_result("bench_transfer", figures)))
    return 0 if all(figures["met"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
