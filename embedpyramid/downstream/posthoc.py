"""Post-hoc pairwise comparisons of the models, Holm-corrected, with compact letter groups.

For models i and j the contrast is the difference of their linear predictors averaged over the
criteria, ``(x_bar_i - x_bar_j) . beta`` (:meth:`~embedpyramid.downstream.design.GradeDesign.marginal_contrast`),
on the link scale of the chosen model: grade points for the identity link, a log ratio of mean
grades for the log link, a difference of inverse means for the inverse link, a log odds ratio
(cumulative, for the ordinal model). Its Wald test ``z = estimate / se`` uses the fit's
covariance (clustered on the query by default). With the clustered covariance ``z`` is referred
to Student's t with ``G - 1`` degrees of freedom for ``G`` queries, the small-sample reference of
a cluster-robust Wald test (Cameron & Miller 2015, §VI; the omnibus test's F(df, G - 1) for one
contrast): the normal reference rejects a true null too often with 30 queries
(``benchmarks/l6_level.py``); with the model covariance it is the normal. The p-values of all M(M-1)/2 pairs form one Holm family
(:func:`embedpyramid.stats.holm_adjust`), and models whose pairs are not significant at alpha
share a letter (:func:`embedpyramid.stats.compact_letter_display`), the best mean grade first.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
from scipy import stats

from embedpyramid.downstream.design import GradeDesign
from embedpyramid.downstream.glm import CandidateFit, Covariance
from embedpyramid.stats.letters import compact_letter_display
from embedpyramid.stats.multiple import holm_adjust

_TOLERANCE = 1e-9
LINK_SCALES = {
    "identity": "difference of mean grades",
    "log": "log ratio of mean grades",
    "inverse": "difference of inverse mean grades",
    "logit": "log odds ratio of the rescaled grade",
    "cumulative logit": "cumulative log odds ratio",
}


def model_means(design: GradeDesign) -> dict[str, float]:
    """Each model's observed mean grade over the modelled (complete) queries and criteria."""
    return {model: float(design.grades[design.model_codes == index].mean()) for index, model in enumerate(design.models)}


def pairwise_comparisons(fit: CandidateFit, design: GradeDesign, alpha: float, covariance: Covariance) -> pl.DataFrame:
    """``model_a, model_b, mean_a, mean_b, estimate, se, z, p_value, p_holm, significant, scale``
    for every pair of models (in design order); ``covariance`` is the one ``fit`` was fitted with."""
    means = model_means(design)
    reference = stats.t(len(design.query_ids) - 1) if covariance == "cluster" else stats.norm
    rows = []
    for i, j in itertools.combinations(range(len(design.models)), 2):
        contrast = design.marginal_contrast(j) - design.marginal_contrast(i)
        estimate = float(contrast @ fit.beta)
        se = float(np.sqrt(max(contrast @ fit.covariance @ contrast, 0.0)))
        if se > _TOLERANCE:
            z = estimate / se
        else:  # no variance in the contrast, e.g. two models with the very same grades
            z = 0.0 if abs(estimate) <= _TOLERANCE else np.sign(estimate) * np.inf
        a, b = design.models[i], design.models[j]
        rows.append({"model_a": a, "model_b": b, "mean_a": means[a], "mean_b": means[b], "estimate": estimate,
                     "se": se, "z": float(z), "p_value": float(2 * reference.sf(abs(z)))})
    frame = pl.DataFrame(rows)
    adjusted = holm_adjust(frame["p_value"].to_numpy())
    return frame.with_columns(
        pl.Series("p_holm", adjusted), pl.Series("significant", adjusted <= alpha),
        pl.lit(LINK_SCALES[fit.candidate.link]).alias("scale"),
    )


def letter_groups(pairs: pl.DataFrame, design: GradeDesign) -> pl.DataFrame:
    """``model, mean, letters``: best mean grade first; models sharing a letter do not differ
    significantly."""
    means = model_means(design)
    order = sorted(design.models, key=lambda model: (-means[model], design.models.index(model)))
    significant = pairs.filter(pl.col("significant")).select("model_a", "model_b").rows()
    letters = compact_letter_display(order, significant)
    return pl.DataFrame({"model": order, "mean": [means[m] for m in order], "letters": [letters[m] for m in order]})
