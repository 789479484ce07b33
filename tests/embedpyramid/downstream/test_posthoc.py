import numpy as np
import polars as pl
import pytest
from scipy import stats
from simulated_grades import simulated_grades

from embedpyramid.downstream.design import grade_design, grade_table
from embedpyramid.downstream.glm import CANDIDATES, fit_candidate
from embedpyramid.downstream.posthoc import letter_groups, model_means, pairwise_comparisons
from embedpyramid.stats import holm_adjust


def test_identity_contrasts_are_mean_differences_with_the_least_squares_standard_error():
    design = grade_design(grade_table(simulated_grades(7, (0.0, 0.4, 0.1), criteria=("relevance", "coverage"))),
                          ["m0", "m1", "m2"], interaction=False)
    fit = fit_candidate(CANDIDATES[0], design, design.full, "model")
    pairs = pairwise_comparisons(fit, design, alpha=0.05, covariance="model")
    means = model_means(design)
    assert pairs.select("model_a", "model_b").rows() == [("m0", "m1"), ("m0", "m2"), ("m1", "m2")]
    # Balanced additive design: each contrast is the difference of the models' mean grades, with
    # se = sqrt(s^2 (1/N + 1/N)), N = 120 grades per model, s^2 = RSS / (n - p).
    residuals = design.grades - design.full @ fit.beta
    s2 = residuals @ residuals / (design.grades.size - design.full.shape[1])
    for row in pairs.iter_rows(named=True):
        assert row["estimate"] == pytest.approx(means[row["model_b"]] - means[row["model_a"]])
        assert row["se"] == pytest.approx(np.sqrt(s2 * 2 / 120))
    assert pairs["p_holm"].to_list() == pytest.approx(holm_adjust(pairs["p_value"].to_numpy()).tolist())
    assert pairs["scale"].unique().to_list() == ["difference of mean grades"]
    # The model covariance refers z to the normal; the clustered one to t with (queries - 1) df.
    assert pairs["p_value"].to_list() == pytest.approx([2 * stats.norm.sf(abs(z)) for z in pairs["z"]], rel=1e-12)
    clustered = pairwise_comparisons(fit_candidate(CANDIDATES[0], design, design.full, "cluster"), design, alpha=0.05,
                                     covariance="cluster")
    assert clustered["p_value"].to_list() == pytest.approx(
        [2 * stats.t.sf(abs(z), len(design.query_ids) - 1) for z in clustered["z"]], rel=1e-12)
    assert len(design.query_ids) == 60 and (clustered["p_value"] > 2 * stats.norm.sf(clustered["z"].abs())).all()


def test_letters_group_the_models_the_pairs_cannot_tell_apart_best_first():
    # m2 gets exactly m0's grades, so only m1 (one grade point better) differs.
    grades = grade_table(simulated_grades(8, (0.0, 1.0)))
    grades = pl.concat([grades, grades.filter(pl.col("model") == "m0").with_columns(model=pl.lit("m2"))])
    design = grade_design(grades, ["m0", "m1", "m2"], interaction=False)
    fit = fit_candidate(CANDIDATES[0], design, design.full, "cluster")
    pairs = pairwise_comparisons(fit, design, alpha=0.05, covariance="cluster")
    assert pairs.filter(pl.col("significant")).select("model_a", "model_b").rows() == [("m0", "m1"), ("m1", "m2")]
    letters = letter_groups(pairs, design)
    assert letters["model"][0] == "m1" and dict(zip(letters["model"], letters["letters"], strict=True)) == {
        "m1": "a", "m0": "b", "m2": "b"}
