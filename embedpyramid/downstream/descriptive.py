"""Descriptive statistics of the grades: mean (SD) per model x criterion, with a t interval.

For each (model, criterion): n grades, mean, sample standard deviation (ddof = 1), median and
the ``confidence`` interval ``mean ± t_{(1+c)/2, n-1} sd / sqrt n``. The ``all`` row of a model
first averages each query's grades over the criteria and then summarises the n per-query
means, so its interval respects that the criteria of one query are not independent grades.
Computed on the modelled (complete) queries, the same ones the models see.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from embedpyramid.downstream.design import GradeDesign

ALL_CRITERIA = "all"


def _summary(values: np.ndarray, confidence: float) -> dict[str, float | int]:
    n = values.size
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
    return {"n": n, "mean": mean, "sd": sd, "median": float(np.median(values)), "ci_low": mean - half,
            "ci_high": mean + half}


def per_query_means(design: GradeDesign) -> dict[str, np.ndarray]:
    """Each model's per-query grade averaged over the criteria, in query order."""
    sums = np.zeros((len(design.models), len(design.query_ids)))
    np.add.at(sums, (design.model_codes, design.query_codes), design.grades)
    return {model: sums[index] / len(design.criteria) for index, model in enumerate(design.models)}


def describe_grades(design: GradeDesign, confidence: float = 0.95) -> pl.DataFrame:
    """``model, criterion, n, mean, sd, median, ci_low, ci_high, confidence``; models in design
    order, criteria in design order then ``all``."""
    rows = []
    means = per_query_means(design)
    for index, model in enumerate(design.models):
        for code, criterion in enumerate(design.criteria):
            mask = (design.model_codes == index) & (design.criterion_codes == code)
            rows.append({"model": model, "criterion": criterion, **_summary(design.grades[mask], confidence)})
        rows.append({"model": model, "criterion": ALL_CRITERIA, **_summary(means[model], confidence)})
    return pl.DataFrame(rows).with_columns(pl.lit(confidence).alias("confidence"))
