"""The omnibus test of "the grade does not depend on the model": a likelihood-ratio test, and
the Wald test of the same null with the configured covariance.

Both compare the full design with the null design that drops every column involving the model
(main effects and, with an interaction, the model x criterion terms), ``df = p - p0``:

- likelihood ratio: ``LR = 2 (ln L_full - ln L_null)``, referred to chi2(df) (Wilks 1938). For
  the binomial quasi-likelihood it is divided by the full model's Pearson dispersion (the
  quasi-likelihood ratio, McCullagh & Nelder 1989, §9.3). It treats every grade as independent.
  A query effect shared by every model only makes it conservative, but the criteria grade the
  *same answer*, so a (query, model) effect shared by the criteria inflates the model means'
  variance beyond what it assumes: with three criteria it rejects a true null far above its
  level (``benchmarks/l6_level.py``: 0.25 at alpha 0.05 when that effect dominates). It stays in
  the tables, labelled with its assumption;
- Wald: ``W = b' V^-1 b`` over the model coefficients ``b`` with their covariance ``V`` —
  clustered on the query by default (the cluster-robust sandwich, Liang & Zeger 1986), which
  accounts for every dependence among a query's grades. With the clustered covariance ``W / df``
  is referred to ``F(df, G - 1)`` for ``G`` queries, not ``W`` to chi2(df): the sandwich is
  estimated from G clusters only, and the chi2 reference rejects a true null at about 0.066
  with 60 queries (Cameron & Miller 2015, "A practitioner's guide to cluster-robust inference",
  J. Human Resources 50(2), §VI). So it holds its level with one criterion and with several
  correlated ones (``benchmarks/l6_level.py``). It is :data:`VERDICT_TEST`, the test the L6
  verdict reads; the pairwise contrasts use the same covariance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from embedpyramid.downstream.design import GradeDesign
from embedpyramid.downstream.glm import CandidateFit, Covariance, fit_candidate

LIKELIHOOD_RATIO, WALD = "likelihood ratio", "wald"
"""``OmnibusTest.test`` of the two tests."""
VERDICT_TEST = WALD
"""The omnibus test the L6 verdict reads."""


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
        return OmnibusTest(LIKELIHOOD_RATIO, name, float("nan"), df, float("nan"), "model",
                           f"not computed: a fit did not converge ({full.note or null.note})")
    statistic = max(2.0 * (full.loglik - null.loglik), 0.0)
    note = "independent grades assumed (over-rejects when the criteria of one answer are correlated)"
    if full.candidate.group == "binomial":
        statistic /= full.dispersion
        note += f"; quasi-likelihood ratio scaled by the Pearson dispersion {full.dispersion:.4g}"
    return OmnibusTest(LIKELIHOOD_RATIO, name, statistic, df, float(stats.chi2.sf(statistic, df)), "model", note)


def wald_test(fit: CandidateFit, design: GradeDesign, covariance: Covariance) -> OmnibusTest:
    """Wald test that every model coefficient of ``fit`` is 0, with the covariance it was fitted with."""
    columns = design.model_columns
    b = fit.beta[columns]
    v = fit.covariance[np.ix_(columns, columns)]
    if not fit.converged or not np.isfinite(v).all():
        return OmnibusTest(WALD, fit.candidate.name, float("nan"), columns.size, float("nan"), covariance,
                           "not computed: the fit did not converge")
    df = int(np.linalg.matrix_rank(v))
    statistic = float(b @ np.linalg.pinv(v) @ b)
    if covariance != "cluster":
        return OmnibusTest(WALD, fit.candidate.name, statistic, df, float(stats.chi2.sf(statistic, df)), covariance,
                           "model covariance")
    clusters = len(design.query_ids)
    p_value = float(stats.f.sf(statistic / df, df, clusters - 1)) if clusters > 1 and df else float("nan")
    note = (f"covariance clustered on {clusters} queries; p from F({df}, {clusters - 1}) of W/{df}, the "
            "small-sample reference of a cluster-robust Wald test")
    return OmnibusTest(WALD, fit.candidate.name, statistic, df, p_value, covariance, note)
