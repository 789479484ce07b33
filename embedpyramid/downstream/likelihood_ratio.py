"""The omnibus test of "the grade does not depend on the model": a likelihood-ratio test, and
the Wald test of the same null with the configured covariance.

Both compare the full design with the null design that drops every column involving the model
(main effects and, with an interaction, the model x criterion terms), ``df = p - p0``:

- likelihood ratio: ``LR = 2 (ln L_full - ln L_null)``, referred to chi2(df) (Wilks 1938). For
  the binomial quasi-likelihood it is divided by the full model's Pearson dispersion (the
  quasi-likelihood ratio, McCullagh & Nelder 1989, §9.3). It treats every grade as independent:
  with each query graded under every model, positive within-query correlation makes it
  conservative for the model effect;
- Wald: ``W = b' V^-1 b`` over the model coefficients ``b`` with their covariance ``V`` —
  clustered on the query by default, which accounts for the repeated grades of a query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from embedpyramid.downstream.design import GradeDesign
from embedpyramid.downstream.glm import CandidateFit, Covariance, fit_candidate


@dataclass(frozen=True)
class OmnibusTest:
    test: str
    candidate: str
    statistic: float
    df: int
    p_value: float
    covariance: str
    note: str = ""


def likelihood_ratio_test(full: CandidateFit, design: GradeDesign, covariance: Covariance) -> OmnibusTest:
    """LR test of ``full`` (fitted to ``design.full``) against the same candidate on ``design.null``."""
    null = fit_candidate(full.candidate, design, design.null, covariance)
    df = design.full.shape[1] - design.null.shape[1]
    name = full.candidate.name
    if not (full.converged and null.converged):
        return OmnibusTest("likelihood ratio", name, float("nan"), df, float("nan"), "model",
                           f"not computed: a fit did not converge ({full.note or null.note})")
    statistic = max(2.0 * (full.loglik - null.loglik), 0.0)
    note = "independent grades assumed"
    if full.candidate.group == "binomial":
        statistic /= full.dispersion
        note += f"; quasi-likelihood ratio scaled by the Pearson dispersion {full.dispersion:.4g}"
    return OmnibusTest("likelihood ratio", name, statistic, df, float(stats.chi2.sf(statistic, df)), "model", note)


def wald_test(fit: CandidateFit, design: GradeDesign, covariance: Covariance) -> OmnibusTest:
    """Wald test that every model coefficient of ``fit`` is 0, with the covariance it was fitted with."""
    columns = design.model_columns
    b = fit.beta[columns]
    v = fit.covariance[np.ix_(columns, columns)]
    if not fit.converged or not np.isfinite(v).all():
        return OmnibusTest("wald", fit.candidate.name, float("nan"), columns.size, float("nan"), covariance,
                           "not computed: the fit did not converge")
    df = int(np.linalg.matrix_rank(v))
    statistic = float(b @ np.linalg.pinv(v) @ b)
    note = f"covariance clustered on {len(design.query_ids)} queries" if covariance == "cluster" else "model covariance"
    return OmnibusTest("wald", fit.candidate.name, statistic, df, float(stats.chi2.sf(statistic, df)), covariance, note)
