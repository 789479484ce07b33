"""Simulated coverage of the three bootstrap intervals at small n: the evidence behind the default.

For each population of deltas and each sample size n, draw ``--samples`` independent samples
(fixed seed), bootstrap each (``paired_bootstrap``, all samples as the columns of one call) with
the studentized, BCa and percentile intervals, and count how often the interval covers the
population mean. Populations: exponential deltas (skewness 2), lognormal deltas (heavier
tail), and, with ``--deltas``, the per-query deltas of a real run (e.g.
``data/comparisons/deltas.parquet``, the report metric of every pair), sampled with
replacement — the run's own deltas, zeros and ties included.

Prints a table and ends with ONE JSON line of the coverages.

    python benchmarks/interval_coverage.py [--samples 2000] [--deltas data/comparisons/deltas.parquet]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import numpy as np
import polars as pl

from embedpyramid.stats import INTERVAL_METHODS, paired_bootstrap

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]


def populations(deltas_path: str | None) -> dict[str, tuple[Sampler, float, tuple[float, float] | None]]:
    """name -> (sampler, population mean, bounds of the mean)."""
    chosen: dict[str, tuple[Sampler, float, tuple[float, float] | None]] = {
        "exponential": (lambda rng, shape: rng.exponential(1.0, shape) - 0.5, 0.5, None),
        "lognormal": (lambda rng, shape: rng.lognormal(0.0, 1.0, shape), float(np.exp(0.5)), None),
    }
    if deltas_path:
        deltas = pl.read_parquet(deltas_path)
        for (model_a, model_b, metric), pair in deltas.partition_by(["model_a", "model_b", "metric"], as_dict=True).items():
            values = pair["delta"].to_numpy()
            chosen[f"{metric} {model_b} - {model_a}"] = (
                lambda rng, shape, values=values: rng.choice(values, size=shape, replace=True),
                float(values.mean()),
                (-1.0, 1.0),
            )
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2_000)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--sizes", default="2,6,10,20,50")
    parser.add_argument("--deltas", help="a deltas.parquet of a run (columns model_a, model_b, metric, delta)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    sizes = [int(size) for size in args.sizes.split(",")]
    results: dict[str, dict[str, dict[str, float]]] = {}
    print(f"coverage of 95% intervals over {args.samples} samples per cell ({args.resamples} resamples each)")
    header = f"{'population':<48} {'n':>4}  " + "  ".join(f"{method:>11}" for method in INTERVAL_METHODS)
    print(header)
    for name, (sampler, mean, bounds) in populations(args.deltas).items():
        results[name] = {}
        for n in sizes:
            rng = np.random.default_rng(args.seed)
            samples = sampler(rng, (n, args.samples))
            covered = {}
            for method in INTERVAL_METHODS:
                result = paired_bootstrap(samples, n_resamples=args.resamples, seed=args.seed + 1, method=method,
                                          bounds=bounds)
                covered[method] = float(((result.ci_low <= mean) & (mean <= result.ci_high)).mean())
            results[name][str(n)] = covered
            print(f"{name[:48]:<48} {n:>4}  " + "  ".join(f"{covered[m]:>11.3f}" for m in INTERVAL_METHODS))
    print(json.dumps({"benchmark": "interval_coverage", "samples": args.samples, "coverage": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
