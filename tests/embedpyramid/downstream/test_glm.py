import math

import numpy as np
import polars as pl
import pytest
from simulated_grades import simulated_grades

from embedpyramid.downstream.design import grade_design, grade_table
from embedpyramid.downstream.glm import CANDIDATES, fit_candidate, fit_candidates, select_by_aic

GAUSSIAN_IDENTITY, ORDINAL = CANDIDATES[0], CANDIDATES[4]


def grades(rows):
    return pl.DataFrame(rows, schema=["model", "query_id", "criterion", "grade"], orient="row")


def test_the_design_keeps_complete_queries_and_codes_treatments():
    table = grades([(m, q, c, 3.0) for m in ("a", "b") for q in ("q1", "q2", "q3") for c in ("rel", "cov")
                    if (m, q, c) != ("b", "q3", "cov")])
    design = grade_design(table, ["b", "a"], interaction=True)
    assert design.query_ids == ("q1", "q2") and design.incomplete_queries == 1  # q3 lacks (b, cov)
    # Criteria keep their first-seen order (rel, cov): cov is the second level.
    assert design.names == ("intercept", "model[a]", "criterion[cov]", "model[a]:criterion[cov]")
    assert design.full.shape == (8, 4) and design.null.shape == (8, 2)
    assert design.model_columns.tolist() == [1, 3]
    assert design.row(1, 0).tolist() == [1, 1, 0, 0] and design.row(1, 1).tolist() == [1, 1, 1, 1]
    assert design.row(0, 1).tolist() == [1, 0, 1, 0]
    assert design.marginal_contrast(1).tolist() == [1, 1, 0.5, 0.5]


def test_bad_grade_tables_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="two grades for one"):
        grade_design(grades([("a", "q1", "rel", 3.0), ("a", "q1", "rel", 4.0)]), ["a"], interaction=False)
    with pytest.raises(ValueError, match="integers from 1 to 5"):
        grade_design(grades([("a", "q1", "rel", 3.5)]), ["a"], interaction=False)
    with pytest.raises(ValueError, match="not among the models"):
        grade_design(grades([("z", "q1", "rel", 3.0)]), ["a"], interaction=False)


def test_gaussian_identity_is_least_squares_by_hand():
    # One criterion, model a: 1, 2, 3; model b: 3, 4, 5 -> beta = (2, 2), RSS = 4, n = 6.
    table = grades([(m, f"q{i}", "rel", float(g)) for m, values in (("a", (1, 2, 3)), ("b", (3, 4, 5)))
                    for i, g in enumerate(values)])
    design = grade_design(table, ["a", "b"], interaction=False)
    fit = fit_candidate(GAUSSIAN_IDENTITY, design, design.full, "model")
    assert fit.beta == pytest.approx([2.0, 2.0])
    assert fit.loglik == pytest.approx(-3 * (math.log(2 * math.pi * 4 / 6) + 1))
    assert fit.n_params == 3 and fit.aic == pytest.approx(6 - 2 * fit.loglik)
    # Model covariance: s^2 = RSS / (n - p) = 1; var(beta_b) = s^2 (1/3 + 1/3).
    assert fit.covariance[1, 1] == pytest.approx(2 / 3)


def test_the_thresholds_only_ordinal_model_is_the_category_shares():
    table = grades([("a", f"q{i}", "rel", float(g)) for i, g in enumerate((1, 1, 2, 5, 5, 5))])
    design = grade_design(table, ["a"], interaction=False)
    fit = fit_candidate(ORDINAL, design, design.null, "model")
    assert fit.loglik == pytest.approx(2 * math.log(2 / 6) + math.log(1 / 6) + 3 * math.log(3 / 6))
    assert fit.n_params == 2


def test_aic_chooses_among_gaussian_links_only_and_says_what_is_not_comparable():
    design = grade_design(grade_table(simulated_grades(3, (0.0, 0.5))), ["m0", "m1"], interaction=False)
    fits = fit_candidates(design, "cluster")
    assert [f.candidate.name for f in fits] == [c.name for c in CANDIDATES] and all(f.converged for f in fits)
    selected, statement = select_by_aic(fits)
    gaussian = [f for f in fits if f.candidate.group == "gaussian"]
    assert selected is min(gaussian, key=lambda f: f.aic)
    assert "not comparable by AIC" in statement and "binomial-logit" in statement and "ordinal-logit" in statement
    # The cluster covariance differs from the model one, the estimates do not.
    model_based = fit_candidate(selected.candidate, design, design.full, "model")
    assert np.allclose(model_based.beta, selected.beta) and not np.allclose(model_based.covariance, selected.covariance)


def test_with_a_full_interaction_every_gaussian_link_fits_the_cell_means_and_ties_are_said():
    # Equal AICs also check that every link's log-likelihood uses the same (MLE) scale.
    design = grade_design(grade_table(simulated_grades(4, (0.0, 0.5))), ["m0", "m1"], interaction=True)
    fits = fit_candidates(design, "model")
    aics = [f.aic for f in fits[:3]]
    assert max(aics) - min(aics) < 1e-6
    selected, statement = select_by_aic(fits)
    assert selected.candidate.name == "gaussian-identity" and "tied with gaussian-log, gaussian-inverse" in statement


def test_a_fit_that_cannot_work_is_recorded_not_raised():
    table = grades([(m, f"q{i}", "rel", 4.0) for m in ("a", "b") for i in range(5)])
    design = grade_design(table, ["a", "b"], interaction=False)
    ordinal = fit_candidate(ORDINAL, design, design.full, "model")
    assert not ordinal.converged and "at least two observed grades" in ordinal.note
    fits = [ordinal, ordinal]
    assert select_by_aic(fits) == (None, "no candidate converged: nothing to test.")
