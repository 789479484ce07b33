"""Models of the grade on model (and criterion), and the choice among them by AIC.

Five candidates are fitted by maximum likelihood on one :class:`~embedpyramid.downstream.design.GradeDesign`
(statsmodels ``GLM`` and ``OrderedModel``):

| candidate | response | likelihood |
|---|---|---|
| gaussian-identity, gaussian-log, gaussian-inverse | the grade g | normal density, ``-n/2 (ln(2 pi RSS/n) + 1)`` |
| binomial-logit | (g - 1) / 4 in [0, 1] | Bernoulli *quasi*-likelihood (y ln mu + (1 - y) ln(1 - mu)) |
| ordinal-logit | g as ordered categories | cumulative-logit probability mass (McCullagh 1980) |

``AIC = 2 k - 2 ln L`` with ``k`` the number of estimated parameters (the gaussian scale counts).
AIC only ranks models fitted to the same response with a likelihood of the same kind (Burnham &
Anderson 2002, §2.11.3), so the choice is made among the converged gaussian links only; the
binomial AIC is a quasi-likelihood on a rescaled response and the ordinal AIC a probability of
discrete grades (not a density of g), and both are reported beside it as not comparable. Should
no gaussian link converge, the ordinal model is taken, and the statement says so.

Every fit keeps its coefficients aligned with the design's columns (the ordinal model has no
intercept: thresholds take its place, so its intercept entry is 0) and their covariance: the
model-based one, or with ``covariance="cluster"`` the sandwich clustered on the query (every
query is graded under every model, so its grades are not independent).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from embedpyramid.downstream.design import GradeDesign

Covariance = Literal["cluster", "model"]


@dataclass(frozen=True)
class Candidate:
    name: str
    group: Literal["gaussian", "binomial", "ordinal"]
    link: str
    response: str
    likelihood: str


CANDIDATES = (
    Candidate("gaussian-identity", "gaussian", "identity", "grade", "normal density"),
    Candidate("gaussian-log", "gaussian", "log", "grade", "normal density"),
    Candidate("gaussian-inverse", "gaussian", "inverse", "grade", "normal density"),
    Candidate("binomial-logit", "binomial", "logit", "(grade - 1) / 4", "Bernoulli quasi-likelihood"),
    Candidate("ordinal-logit", "ordinal", "cumulative logit", "grade category", "multinomial probability"),
)
COMPARABLE_GROUP = "gaussian"
_LINKS = {"identity": "Identity", "log": "Log", "inverse": "InversePower"}
"""statsmodels' link classes by name: statsmodels (slow to import) loads when a model is fitted."""


@dataclass(frozen=True)
class CandidateFit:
    candidate: Candidate
    converged: bool
    loglik: float
    n_params: int
    beta: np.ndarray  # aligned with the design columns of the fitted matrix
    covariance: np.ndarray
    dispersion: float  # Pearson chi2 / df for the binomial quasi-likelihood, else 1
    note: str = ""

    @property
    def aic(self) -> float:
        return 2.0 * self.n_params - 2.0 * self.loglik


def fit_candidate(candidate: Candidate, design: GradeDesign, exog: np.ndarray, covariance: Covariance) -> CandidateFit:
    """Fit one candidate with design matrix ``exog`` (``design.full`` or ``design.null``, whose
    first column is the intercept). A fit that fails or does not converge comes back with
    ``converged=False`` and the reason in ``note``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = _FITTERS[candidate.group](candidate, design, exog, covariance)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError, ZeroDivisionError) as error:
            nan = np.full(exog.shape[1], np.nan)
            return CandidateFit(candidate, False, float("nan"), exog.shape[1], nan, np.diag(nan), 1.0,
                                f"fit failed: {type(error).__name__}: {error}")
    relevant = sorted({str(w.message).splitlines()[0] for w in caught if not issubclass(w.category, DeprecationWarning)})
    if relevant:
        fit = replace(fit, note="; ".join(filter(None, [fit.note, *relevant]))[:500])
    finite = np.isfinite(fit.loglik) and np.isfinite(fit.beta).all()
    return fit if finite else replace(fit, converged=False)


def _cov_kwargs(design: GradeDesign, covariance: Covariance) -> dict:
    return {"cov_type": "cluster", "cov_kwds": {"groups": design.query_codes}} if covariance == "cluster" else {}


def _fit_gaussian(candidate: Candidate, design: GradeDesign, exog: np.ndarray, covariance: Covariance) -> CandidateFit:
    import statsmodels.api as sm

    family = sm.families.Gaussian(getattr(sm.families.links, _LINKS[candidate.link])())
    model = sm.GLM(design.grades, exog, family=family)
    result = model.fit(**_cov_kwargs(design, covariance))
    # The maximised log-likelihood, with the MLE scale RSS / n for every link: statsmodels' llf
    # uses it for the identity link only (RSS / (n - p) otherwise), which would tilt the AIC.
    n = design.grades.size
    rss = float(np.sum((design.grades - np.asarray(result.fittedvalues)) ** 2))
    loglik = -0.5 * n * (np.log(2.0 * np.pi * rss / n) + 1.0)
    return CandidateFit(candidate, bool(result.converged), float(loglik), exog.shape[1] + 1,
                        np.asarray(result.params), np.asarray(result.cov_params()), 1.0)


def _fit_binomial(candidate: Candidate, design: GradeDesign, exog: np.ndarray, covariance: Covariance) -> CandidateFit:
    import statsmodels.api as sm

    response = (design.grades - 1.0) / 4.0
    model = sm.GLM(response, exog, family=sm.families.Binomial())
    kwargs = _cov_kwargs(design, covariance) or {"scale": "X2"}  # quasi-binomial: Pearson dispersion
    result = model.fit(**kwargs)
    mu = np.clip(np.asarray(result.fittedvalues), 1e-12, 1 - 1e-12)
    quasi = float(np.sum(response * np.log(mu) + (1 - response) * np.log1p(-mu)))
    dispersion = float(result.pearson_chi2 / result.df_resid) if result.df_resid > 0 else float("nan")
    return CandidateFit(candidate, bool(result.converged), quasi, exog.shape[1], np.asarray(result.params),
                        np.asarray(result.cov_params()), dispersion)


def _fit_ordinal(candidate: Candidate, design: GradeDesign, exog: np.ndarray, covariance: Covariance) -> CandidateFit:
    grades = design.grades.astype(int)
    levels = np.unique(grades)
    if levels.size < 2:
        raise ValueError(f"every grade is {levels[0]}: an ordinal model needs at least two observed grades")
    p = exog.shape[1]
    if p == 1:  # thresholds only: the fit is the observed category shares, in closed form
        counts = np.bincount(np.searchsorted(levels, grades))
        loglik = float(np.sum(counts * np.log(counts / counts.sum())))
        return CandidateFit(candidate, True, loglik, levels.size - 1, np.zeros(1), np.zeros((1, 1)), 1.0)
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    model = OrderedModel(grades, exog[:, 1:], distr="logit")
    result = model.fit(method="bfgs", disp=False, maxiter=2000, **_cov_kwargs(design, covariance))
    beta = np.concatenate([[0.0], np.asarray(result.params)[: p - 1]])
    cov = np.zeros((p, p))
    cov[1:, 1:] = np.asarray(result.cov_params())[: p - 1, : p - 1]
    return CandidateFit(candidate, bool(result.mle_retvals.get("converged", False)), float(result.llf),
                        len(result.params), beta, cov, 1.0)


_FITTERS = {"gaussian": _fit_gaussian, "binomial": _fit_binomial, "ordinal": _fit_ordinal}


def fit_candidates(design: GradeDesign, covariance: Covariance) -> list[CandidateFit]:
    """Every candidate fitted to the full design, in :data:`CANDIDATES` order."""
    return [fit_candidate(candidate, design, design.full, covariance) for candidate in CANDIDATES]


def select_by_aic(fits: list[CandidateFit]) -> tuple[CandidateFit | None, str]:
    """The chosen fit and a sentence saying how it was chosen and what was not compared."""
    gaussian = [fit for fit in fits if fit.candidate.group == COMPARABLE_GROUP and fit.converged]
    others = ", ".join(f"{fit.candidate.name} ({fit.candidate.likelihood} on {fit.candidate.response})"
                       for fit in fits if fit.candidate.group != COMPARABLE_GROUP)
    caveat = f"not comparable by AIC with them, reported only: {others}"
    if gaussian:
        best = min(gaussian, key=lambda fit: fit.aic)
        tied = [fit.candidate.name for fit in gaussian if fit is not best and abs(fit.aic - best.aic) < 1e-6]
        failed = [fit.candidate.name for fit in fits if fit.candidate.group == COMPARABLE_GROUP and not fit.converged]
        statement = (f"{best.candidate.name} has the lowest AIC ({best.aic:.2f}) among the gaussian links fitted "
                     f"to the grade ({', '.join(f.candidate.name for f in gaussian)})")
        if tied:
            statement += f"; tied with {', '.join(tied)} (the first in the fixed order is taken)"
        if failed:
            statement += f"; not converged: {', '.join(failed)}"
        return best, f"{statement}; {caveat}."
    ordinal = next((fit for fit in fits if fit.candidate.group == "ordinal" and fit.converged), None)
    if ordinal is not None:
        return ordinal, "no gaussian link converged: the ordinal model is used, without an AIC choice."
    return None, "no candidate converged: nothing to test."
