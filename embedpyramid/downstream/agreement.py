"""Agreement of a judge with the relevance judgements: Cohen's weighted kappa on 1-5 grades.

With ``O`` the 5 x 5 table of grade pairs (judge, reference) as proportions, ``E`` the table
expected from its margins (``E_ij = O_i. O_.j``) and disagreement weights ``w_ij = |i - j|``
(``linear``) or ``(i - j)^2`` (``quadratic``):

    kappa_w = 1 - sum(w O) / sum(w E)

(Cohen 1968, "Weighted kappa", Psychol. Bull. 70(4)); computed with statsmodels'
``cohens_kappa`` on the full 1..5 table, so that grades neither rater used still set the
distances. 1 is perfect agreement, 0 what chance gives. It is undefined (NaN, stated) when the
margins leave no room for disagreement, e.g. both raters always give the same grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import polars as pl

from embedpyramid.downstream.judge import GRADES

Weights = Literal["linear", "quadratic"]


def weighted_kappa(grades: Sequence[int], reference: Sequence[int], weights: Weights = "linear") -> float:
    """Weighted kappa of two raters' paired grades (1-5); NaN when undefined."""
    if len(grades) != len(reference) or not grades:
        raise ValueError(f"need the same positive number of grades from both raters; got {len(grades)} and {len(reference)}")
    table = np.zeros((len(GRADES), len(GRADES)))
    for judged, expected in zip(grades, reference, strict=True):
        if judged not in GRADES or expected not in GRADES:
            raise ValueError(f"grades must be integers from 1 to 5; got ({judged!r}, {expected!r})")
        table[judged - 1, expected - 1] += 1
    probabilities = table / table.sum()
    distance = np.abs(np.subtract.outer(np.arange(5), np.arange(5))) ** (1 if weights == "linear" else 2)
    if not (distance * np.outer(probabilities.sum(1), probabilities.sum(0))).sum() > 0:
        return float("nan")
    from statsmodels.stats.inter_rater import cohens_kappa  # slow to import: only where a kappa is computed

    return float(cohens_kappa(table, wt=weights).kappa)


def judge_agreement(judgements: pl.DataFrame, weights: Weights = "linear") -> pl.DataFrame:
    """``criterion, n, kappa, weights`` over rows that have both a ``grade`` and a
    ``reference_grade`` (the qrels judge's), one row per criterion in first-seen order."""
    paired = judgements.filter(pl.col("grade").is_not_null() & pl.col("reference_grade").is_not_null())
    rows = []
    for (criterion,), part in paired.partition_by("criterion", as_dict=True, maintain_order=True).items():
        kappa = weighted_kappa(part["grade"].to_list(), part["reference_grade"].to_list(), weights)
        rows.append({"criterion": criterion, "n": part.height, "kappa": kappa, "weights": weights})
    return pl.DataFrame(rows, schema={"criterion": pl.String, "n": pl.Int64, "kappa": pl.Float64, "weights": pl.String})
