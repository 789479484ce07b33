"""The grade table and its design matrices: grade ~ model + criterion (+ model x criterion).

Rows are (model, query, criterion) grades. Only *complete* queries are modelled — graded under
every model and every criterion — so each query contributes the same cells to every model and a
missing grade (a malformed judgement) cannot tilt one model's mean; the others are counted.
Factors use treatment coding: an intercept, one indicator per model after the first (the
reference, e.g. the baseline), one per criterion after the first, and with ``interaction`` their
products. The null design of the omnibus test drops every column that involves the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.downstream.judge import judge_metric

JUDGE_PREFIX = judge_metric("")


def grade_table(per_query: pl.DataFrame) -> pl.DataFrame:
    """``model, query_id, criterion, grade`` from the ``judge:<criterion>`` rows of a per-query
    metric table."""
    judged = per_query.filter(pl.col("metric").str.starts_with(JUDGE_PREFIX))
    return judged.select(
        "model", "query_id", pl.col("metric").str.strip_prefix(JUDGE_PREFIX).alias("criterion"),
        pl.col("value").alias("grade"),
    )


@dataclass(frozen=True)
class GradeDesign:
    grades: np.ndarray  # [n] float64, 1..5
    model_codes: np.ndarray  # [n] index into models
    criterion_codes: np.ndarray  # [n] index into criteria
    query_codes: np.ndarray  # [n] index into query_ids (the clusters)
    models: tuple[str, ...]
    criteria: tuple[str, ...]
    query_ids: tuple[str, ...]
    interaction: bool
    full: np.ndarray  # [n, p] with intercept
    null: np.ndarray  # [n, p0] the columns that do not involve the model
    model_columns: np.ndarray  # indices of ``full``'s columns that involve the model
    names: tuple[str, ...]
    incomplete_queries: int

    def row(self, model: int, criterion: int) -> np.ndarray:
        """The design row of one (model, criterion) cell."""
        return _rows(np.array([model]), np.array([criterion]), len(self.models), len(self.criteria), self.interaction)[0]

    def marginal_contrast(self, model: int) -> np.ndarray:
        """The design row averaged over criteria: ``x_bar_m . beta`` is model m's linear predictor
        averaged over the criteria (its main effect when there is no interaction)."""
        return np.mean([self.row(model, c) for c in range(len(self.criteria))], axis=0)


def _rows(models: np.ndarray, criteria: np.ndarray, n_models: int, n_criteria: int, interaction: bool) -> np.ndarray:
    model_dummies = (models[:, None] == np.arange(1, n_models)[None, :]).astype(np.float64)
    criterion_dummies = (criteria[:, None] == np.arange(1, n_criteria)[None, :]).astype(np.float64)
    parts = [np.ones((models.shape[0], 1)), model_dummies, criterion_dummies]
    if interaction:
        parts.append((model_dummies[:, :, None] * criterion_dummies[:, None, :]).reshape(models.shape[0], -1))
    return np.hstack(parts)


def grade_design(grades: pl.DataFrame, models: Sequence[str], *, interaction: bool) -> GradeDesign:
    """The design of a grade table (``model, query_id, criterion, grade``) over ``models``, in
    that order (the first is the reference). Criteria keep their first-seen order."""
    if not models or len(set(models)) != len(models):
        raise ValueError(f"models must be a non-empty list of distinct names; got {list(models)}")
    unknown = set(grades["model"].unique().to_list()) - set(models)
    if unknown:
        raise ValueError(f"grades of models {sorted(unknown)} are not among the models to compare {list(models)}")
    values = grades["grade"].to_numpy()
    if not np.isin(values, np.arange(1, 6)).all():
        raise ValueError("grades must be integers from 1 to 5; got " + repr(sorted(set(values.tolist()) - set(range(1, 6)))[:5]))
    criteria = tuple(grades["criterion"].unique(maintain_order=True).to_list())
    cells = len(models) * len(criteria)
    counts = grades.group_by("query_id").agg(pl.struct("model", "criterion").n_unique().alias("cells"), pl.len().alias("rows"))
    duplicated = counts.filter(pl.col("rows") > pl.col("cells"))
    if duplicated.height:
        raise ValueError(f"query {duplicated['query_id'][0]!r} has two grades for one (model, criterion); "
                         "each judgement must appear once")
    complete = counts.filter(pl.col("cells") == cells)["query_id"].sort()
    kept = grades.filter(pl.col("query_id").is_in(complete.implode())).sort("query_id", "model", "criterion")
    if kept.is_empty():
        raise ValueError(f"no query is graded under all {len(models)} models and {len(criteria)} criteria")
    model_codes = kept["model"].replace_strict({m: i for i, m in enumerate(models)}, return_dtype=pl.Int64).to_numpy()
    criterion_codes = kept["criterion"].replace_strict({c: i for i, c in enumerate(criteria)},
                                                       return_dtype=pl.Int64).to_numpy()
    query_ids = tuple(complete.to_list())
    query_codes = kept["query_id"].replace_strict({q: i for i, q in enumerate(query_ids)}, return_dtype=pl.Int64).to_numpy()
    full = _rows(model_codes, criterion_codes, len(models), len(criteria), interaction)
    names = ["intercept", *(f"model[{m}]" for m in models[1:]), *(f"criterion[{c}]" for c in criteria[1:])]
    if interaction:
        names += [f"model[{m}]:criterion[{c}]" for m in models[1:] for c in criteria[1:]]
    involves_model = np.array(["model[" in name for name in names])
    return GradeDesign(
        grades=kept["grade"].to_numpy().astype(np.float64), model_codes=model_codes, criterion_codes=criterion_codes,
        query_codes=query_codes, models=tuple(models), criteria=criteria, query_ids=query_ids, interaction=interaction,
        full=full, null=full[:, ~involves_model], model_columns=np.flatnonzero(involves_model), names=tuple(names),
        incomplete_queries=counts.height - complete.len(),
    )
