import math

import numpy as np
import polars as pl
import pytest
from simulated_grades import simulated_grades

from embedpyramid.downstream.design import grade_design, grade_table
from embedpyramid.downstream.glm import CANDIDATES, fit_candidate, fit_candidates, select_by_aic
from embedpyramid.downstream.likelihood_ratio import VERDICT_TEST, likelihood_ratio_test, wald_test
from embedpyramid.downstream.posthoc import pairwise_comparisons

MODELS = ["m0", "m1", "m2"]
GAUSSIAN = CANDIDATES[:3]


def design_of(seed, effects, **kwargs):
    return grade_design(grade_table(simulated_grades(seed, effects, **kwargs)), MODELS[: len(effects)], interaction=False)


def test_the_gaussian_likelihood_ratio_is_n_log_of_the_rss_ratio():
    table = pl.DataFrame([(m, f"q{i}", "rel", float(g)) for m, values in (("a", (1, 2, 3)), ("b", (3, 4, 5)))
                          for i, g in enumerate(values)], schema=["model", "query_id", "criterion", "grade"], orient="row")
    design = grade_design(table, ["a", "b"], interaction=False)
    test = likelihood_ratio_test(fit_candidate(CANDIDATES[0], design, design.full, "model"), design, "model")
    # RSS under the null (grand mean 3): 4 + 1 + 0 + 0 + 1 + 4 = 10; full: 4.
    assert test.statistic == pytest.approx(6 * math.log(10 / 4)) and test.df == 1


def test_a_known_model_effect_is_detected_by_every_test():
    design = design_of(11, (0.0, 0.6, 0.0), criteria=("relevance", "coverage"))
    fits = fit_candidates(design, "cluster")
    selected, _ = select_by_aic(fits)
    for test in (likelihood_ratio_test(selected, design, "cluster"), wald_test(selected, design, "cluster"),
                 likelihood_ratio_test(fits[3], design, "cluster"), likelihood_ratio_test(fits[4], design, "cluster")):
        assert test.df == 2 and test.p_value < 0.01, test
    assert "Pearson dispersion" in likelihood_ratio_test(fits[3], design, "cluster").note


def test_without_an_effect_the_lrt_of_the_aic_chosen_glm_rejects_at_its_nominal_rate():
    p_values = []
    for seed in range(200):
        design = design_of(seed, (0.0, 0.0, 0.0), n_queries=40, criteria=("relevance", "coverage"))
        selected, _ = select_by_aic([fit_candidate(c, design, design.full, "model") for c in GAUSSIAN])
        p_values.append(likelihood_ratio_test(selected, design, "model").p_value)
    p_values = np.array(p_values)
    assert 0.02 <= np.mean(p_values < 0.05) <= 0.08
    assert 0.4 <= np.mean(p_values < 0.5) <= 0.6  # roughly uniform, not only in the tail


def test_with_grades_paired_by_query_the_clustered_wald_test_keeps_its_rate_too():
    rejections = 0
    for seed in range(200):
        design = design_of(seed, (0.0, 0.0, 0.0), n_queries=40, criteria=("relevance", "coverage"), query_sd=0.8,
                           noise_sd=0.7)
        fit = fit_candidate(CANDIDATES[0], design, design.full, "cluster")
        rejections += wald_test(fit, design, "cluster").p_value < 0.05
    assert 0.02 <= rejections / 200 <= 0.08


def test_the_ordinal_lrt_matches_twice_the_log_likelihood_gain():
    design = design_of(5, (0.0, 0.3), criteria=("relevance",))
    full = fit_candidate(CANDIDATES[4], design, design.full, "model")
    null = fit_candidate(CANDIDATES[4], design, design.null, "model")
    test = likelihood_ratio_test(full, design, "model")
    assert test.statistic == pytest.approx(2 * (full.loglik - null.loglik)) and test.df == 1


def test_when_the_criteria_grade_one_answer_the_lrt_over_rejects_and_the_verdicts_wald_test_holds():
    """200 null data sets (seeded) with three criteria sharing a (query, model) effect: the
    clustered Wald test the verdict reads and the Holm pairwise contrasts stay within the 99%
    binomial band of alpha = 0.05 (0.010-0.090 at 200 simulations), while the LRT, which assumes
    independent grades, rejects several times too often: a model's three grades of one answer
    share the answer effect (correlation 0.64 / (0.64 + 0.25) = 0.72 before rounding), so its mean
    varies more than three independent grades would. benchmarks/l6_level.py runs 1,000
    simulations per scenario."""
    counts = {"lrt": 0, "wald": 0, "pairs": 0}
    for seed in range(200):
        design = design_of(seed, (0.0, 0.0, 0.0), criteria=("relevance", "ranking", "coverage"), query_sd=0.5,
                           cell_sd=0.8, noise_sd=0.5)
        selected, _ = select_by_aic([fit_candidate(c, design, design.full, "cluster") for c in GAUSSIAN])
        counts["lrt"] += likelihood_ratio_test(selected, design, "cluster").p_value <= 0.05
        counts["wald"] += wald_test(selected, design, "cluster").p_value <= 0.05
        counts["pairs"] += bool(pairwise_comparisons(selected, design, 0.05, "cluster")["significant"].any())
    assert VERDICT_TEST == "wald"
    assert 0.010 <= counts["wald"] / 200 <= 0.090 and 0.010 <= counts["pairs"] / 200 <= 0.090
    assert counts["lrt"] / 200 >= 0.15
