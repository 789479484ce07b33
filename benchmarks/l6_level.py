"""Level of the L6 tests under a true null: how often each rejects "the grade does not depend on
the model" at alpha = 0.05 when it does not.

Grades are simulated by ``tests/fixtures/simulated_grades.py`` (three models with no effect, 1-5
grades rounded from a latent score with a query effect shared by every model and, where the
criteria grade the same answer, a (query, model) effect shared by its criteria). Each
simulation takes the verdict's path: the gaussian links fitted with the query-clustered
covariance, the one with the lowest AIC (:func:`~embedpyramid.downstream.glm.select_by_aic`; the
binomial and ordinal candidates are never chosen by AIC, so they are not fitted here), then the
likelihood-ratio test, the Wald test (:data:`~embedpyramid.downstream.likelihood_ratio.VERDICT_TEST`)
and the Holm-corrected pairwise contrasts (a rejection: any pair significant). A test holds its
level when its rate lies in [0.035, 0.065] (1,000 simulations: Monte-Carlo SE 0.007).

Prints a table and ends with ONE JSON line of the rates.

    python benchmarks/l6_level.py [--simulations 1000] [--queries 60]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))

from results import record_result  # noqa: E402
from simulated_grades import simulated_grades  # noqa: E402

from embedpyramid.downstream.design import grade_design, grade_table  # noqa: E402
from embedpyramid.downstream.glm import CANDIDATES, COMPARABLE_GROUP, fit_candidate, select_by_aic  # noqa: E402
from embedpyramid.downstream.likelihood_ratio import likelihood_ratio_test, wald_test  # noqa: E402
from embedpyramid.downstream.posthoc import pairwise_comparisons  # noqa: E402

ALPHA, LEVEL_BAND = 0.05, (0.035, 0.065)
MODELS = ("m0", "m1", "m2")
SCENARIOS: dict[str, dict] = {
    "one criterion": {"criteria": ("relevance",), "query_sd": 0.5, "noise_sd": 1.0},
    "three criteria, independent": {"criteria": ("relevance", "ranking", "coverage"), "query_sd": 0.5,
                                    "noise_sd": 1.0},
    "three criteria sharing a (query, model) effect": {"criteria": ("relevance", "ranking", "coverage"),
                                                       "query_sd": 0.5, "cell_sd": 0.8, "noise_sd": 0.5},
}
"""name -> keyword arguments of ``simulated_grades`` (no model effect in any)."""
TESTS = ("likelihood ratio", "wald", "pairwise (Holm, any pair)")


def rejections(seed: int, n_queries: int, scenario: dict) -> dict[str, bool]:
    """Whether each test rejects at ALPHA on one simulated data set."""
    grades = simulated_grades(seed, (0.0,) * len(MODELS), n_queries=n_queries, **scenario)
    design = grade_design(grade_table(grades), list(MODELS), interaction=False)
    fits = [fit_candidate(c, design, design.full, "cluster") for c in CANDIDATES if c.group == COMPARABLE_GROUP]
    selected, _ = select_by_aic(fits)
    return {
        TESTS[0]: likelihood_ratio_test(selected, design, "cluster").p_value <= ALPHA,
        TESTS[1]: wald_test(selected, design, "cluster").p_value <= ALPHA,
        TESTS[2]: bool(pairwise_comparisons(selected, design, ALPHA, "cluster")["significant"].any()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rates: dict[str, dict[str, float]] = {}
    for name, scenario in SCENARIOS.items():
        counts = dict.fromkeys(TESTS, 0)
        for seed in range(args.simulations):
            for test, rejected in rejections(seed, args.queries, scenario).items():
                counts[test] += rejected
        rates[name] = {test: count / args.simulations for test, count in counts.items()}
    se = np.sqrt(ALPHA * (1 - ALPHA) / args.simulations)
    print(f"rejection rate of a true null at alpha {ALPHA} ({args.simulations:,} simulations, {args.queries} queries, "
          f"{len(MODELS)} models; Monte-Carlo SE {se:.3f}; held: within {list(LEVEL_BAND)})")
    print(f"| scenario | {' | '.join(TESTS)} |")
    print("|---|" + "---:|" * len(TESTS))
    for name, row in rates.items():
        cells = [f"{row[t]:.3f}{'' if LEVEL_BAND[0] <= row[t] <= LEVEL_BAND[1] else ' ✗'}" for t in TESTS]
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"({time.perf_counter() - started:.0f} s)")
    print(json.dumps(record_result("l6_level", {"simulations": args.simulations, "queries": args.queries, "alpha": ALPHA,
                                                "rates": rates})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
