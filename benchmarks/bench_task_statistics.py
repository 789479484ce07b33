"""Paired statistic bootstrap of the L2 task families: vectorized kernels vs scikit-learn/scipy per resample.

Each family's whole-set statistics (Spearman/Pearson for STS; AP, F1, precision, recall for pair
classification; seed-mean V-measure, ARI, AMI for clustering) are compared over 10,000
resamples with the kernels of ``embedpyramid.tasks``; the reference is the same comparison with
the maintained implementations called once per resample (scipy ``spearmanr``/``pearsonr``,
scikit-learn metrics), timed over fewer resamples in the same run and compared per resample.
Sizes are those of the embedded data (1,225 Lee pairs; 748 chatterbot questions in 19 classes
with 5 k-means seeds; 30 test pairs scaled up to 300). Target: each family's 10,000-resample
comparison under 10 s; the speedup over the per-resample reference is reported beside it (for
STS the reference is scipy's compiled Spearman, so the gain is smallest there). Before a kernel
is timed, it and the reference run on the same 200 resamples must give the same observed
statistics, intervals, medians, shares and p-values (max |difference| <= 1e-9); otherwise the
script stops. Ends with one JSON line.
"""

from __future__ import annotations

import json
import time

import numpy as np
from results import record_result
from scipy import stats
from sklearn import metrics as skm

from embedpyramid.stats.statistic import paired_statistic_bootstrap
from embedpyramid.tasks.clustering import seed_mean_scores
from embedpyramid.tasks.pair_classification import compared_statistics
from embedpyramid.tasks.sts import correlations, rank_codes

RESAMPLES = 10_000
REFERENCE_RESAMPLES = 200
EQUAL_TOLERANCE = 1e-9


def sts_reference(gold_codes, gold, score_codes, score):
    return [stats.spearmanr(gold, score).statistic, stats.pearsonr(gold, score).statistic]


def pair_reference(gold, score, predicted):
    return [skm.average_precision_score(gold, score), skm.f1_score(gold, predicted, zero_division=0),
            skm.precision_score(gold, predicted, zero_division=0), skm.recall_score(gold, predicted, zero_division=0)]


def clustering_reference(gold, clusters):
    return np.mean([[skm.v_measure_score(gold, c), skm.adjusted_rand_score(gold, c),
                     skm.adjusted_mutual_info_score(gold, c)] for c in clusters.T], axis=0)


def timed(statistic, data_a, data_b, *, vectorized: bool, n_resamples: int):
    start = time.perf_counter()
    result = paired_statistic_bootstrap(statistic, data_a, data_b, vectorized=vectorized, n_resamples=n_resamples, seed=0)
    return time.perf_counter() - start, result


def largest_difference(mine, theirs) -> float:
    """The largest |difference| of the two comparisons' observed values and bootstrap summaries."""
    return max(float(np.abs(np.asarray(getattr(mine, name)) - np.asarray(getattr(theirs, name))).max())
               for name in ("value_a", "value_b", "ci_low", "ci_high", "median", "share_above_zero", "p_value"))


def main() -> None:
    rng = np.random.default_rng(0)
    gold_sts = rng.integers(1, 26, 1225) / 25
    sts_a, sts_b = gold_sts + rng.normal(size=1225), gold_sts + rng.normal(size=1225)
    gold_pairs = np.repeat([1, 0], 150)
    labels = rng.integers(0, 19, 748)
    cases = {
        "sts": (correlations, sts_reference, (rank_codes(gold_sts), gold_sts, rank_codes(sts_a), sts_a),
                (rank_codes(gold_sts), gold_sts, rank_codes(sts_b), sts_b)),
        "pair_classification": (compared_statistics, pair_reference,
                                (gold_pairs, gold_pairs + rng.normal(size=300), rng.integers(0, 2, 300)),
                                (gold_pairs, gold_pairs + rng.normal(size=300), rng.integers(0, 2, 300))),
        "clustering": (seed_mean_scores, clustering_reference,
                       (labels, np.where(rng.random((748, 5)) < 0.6, labels[:, None], rng.integers(0, 19, (748, 5)))),
                       (labels, np.where(rng.random((748, 5)) < 0.5, labels[:, None], rng.integers(0, 19, (748, 5))))),
    }
    figures, met = {}, {}
    for family, (kernel, reference, data_a, data_b) in cases.items():
        slow, expected = timed(reference, data_a, data_b, vectorized=False, n_resamples=REFERENCE_RESAMPLES)
        # Equal outputs before the kernel is timed: the same resamples through both.
        difference = largest_difference(
            timed(kernel, data_a, data_b, vectorized=True, n_resamples=REFERENCE_RESAMPLES)[1], expected)
        if not difference <= EQUAL_TOLERANCE:
            raise SystemExit(f"{family}: the vectorized kernel and the per-resample reference differ by {difference:.2e} "
                             f"on the same {REFERENCE_RESAMPLES} resamples (tolerance {EQUAL_TOLERANCE:g})")
        fast, _ = timed(kernel, data_a, data_b, vectorized=True, n_resamples=RESAMPLES)
        ratio = (slow / REFERENCE_RESAMPLES) / (fast / RESAMPLES)
        figures[family] = {"seconds_10000": round(fast, 3), "reference_seconds_per_resample": slow / REFERENCE_RESAMPLES,
                           "speedup_per_resample": round(ratio, 1), "max_difference_vs_reference": difference}
        met[family] = fast < 10.0
        print(f"{family:20s} same as the reference on {REFERENCE_RESAMPLES} resamples (max |diff| {difference:.1e}); "
              f"vectorized {RESAMPLES} resamples: {fast:6.2f} s (target < 10 s: {'PASS' if met[family] else 'FAIL'}); "
              f"per-resample reference {1000 * slow / REFERENCE_RESAMPLES:7.2f} ms/resample; speedup {ratio:6.1f}x")
    print(json.dumps(record_result("bench_task_statistics", {"benchmark": "task_statistics", "figures": figures,
                                                             "targets": {"seconds_10000": "< 10"}, "met": met})))


if __name__ == "__main__":
    main()
