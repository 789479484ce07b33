"""Measures that are identical by construction, so a comparison tests them once.

For every query, whatever the run and the tie rule:

* P@1 = Hit@1 = MRR@1 (all three are "the first document is relevant") and Recall@1 = MAP@1
  (both are rel_1 / R);
* with grades that are binary per query (every document with a positive grade has the same
  grade, at or above the threshold), nDCG@1 = P@1 too (gain_1 / ideal gain_1 = rel_1);
* with one relevant document per query (R = 1), Recall@k = Hit@k = CompleteEvidence@k,
  MAP@k = MRR@k and RPrec = P@1;
* when every judged document is relevant (no qrel below the threshold), Judged@k = P@k;
* at cutoffs at or past the run's depth (the most documents any query retrieved), Recall, Hit,
  MRR, MAP and CompleteEvidence no longer change with k, and MRR@k equals the uncut MRR.

Each group of identical measures is named by its first member in the order the measures were
given (the canonical one); :func:`measure_aliases` maps every other member to it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from embedpyramid.config.measures import Measure

_SATURATING = ("Recall", "Hit", "MRR", "MAP", "CompleteEvidence")


def measure_aliases(
    measures: Sequence[Measure],
    *,
    binary_grades: bool,
    single_relevant: bool,
    all_judged_relevant: bool,
    run_depth: int,
) -> dict[str, str]:
    """``{alias: canonical}`` among ``measures`` (canonical names), by the rules above.

    ``binary_grades``: every evaluated query's positive grades are one value at or above the
    threshold; ``single_relevant``: every evaluated query has R = 1; ``all_judged_relevant``:
    no evaluated query has a qrel below the threshold; ``run_depth``: the most documents any
    evaluated query retrieved.
    """
    names = [str(m) for m in dict.fromkeys(measures)]
    parent = {name: name for name in names}

    def find(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    def join(*group: str) -> None:
        present = [name for name in group if name in parent]
        for name in present[1:]:
            first, other = find(present[0]), find(name)
            if first != other:
                parent[other] = first

    join("P@1", "Hit@1", "MRR@1")
    join("Recall@1", "MAP@1")
    if binary_grades:
        join("P@1", "nDCG@1")
    cutoffs = sorted({m.cutoff for m in measures if m.cutoff is not None})
    if all_judged_relevant:
        for k in cutoffs:
            join(f"P@{k}", f"Judged@{k}")
    if single_relevant:
        join("P@1", "RPrec", "Recall@1")
        for k in cutoffs:
            join(f"Recall@{k}", f"Hit@{k}", f"CompleteEvidence@{k}")
            join(f"MAP@{k}", f"MRR@{k}")
    saturated = [k for k in cutoffs if k >= run_depth]
    for name in _SATURATING:
        join(*(f"{name}@{k}" for k in saturated), *(["MRR"] if name == "MRR" else []))

    canonical: dict[str, str] = {}
    for name in names:
        canonical.setdefault(find(name), name)  # the first member met in measure order
    return {name: canonical[find(name)] for name in names if canonical[find(name)] != name}


def grade_structure(
    query_index: np.ndarray, grades: np.ndarray, n_queries: int, threshold: int
) -> dict[str, bool]:
    """``binary_grades``, ``single_relevant`` and ``all_judged_relevant`` of the evaluated
    queries' qrels (the keyword arguments of :func:`measure_aliases`)."""
    positive = grades > 0
    highest = np.full(n_queries, -np.inf)
    lowest = np.full(n_queries, np.inf)
    np.maximum.at(highest, query_index[positive], grades[positive])
    np.minimum.at(lowest, query_index[positive], grades[positive])
    has_positive = np.isfinite(highest)
    binary = bool(((highest == lowest) & (lowest >= threshold))[has_positive].all())
    relevant = np.bincount(query_index[grades >= threshold], minlength=n_queries)
    return {
        "binary_grades": binary,
        "single_relevant": bool((relevant == 1).all()),
        "all_judged_relevant": bool((grades >= threshold).all()),
    }
