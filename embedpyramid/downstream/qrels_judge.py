"""The offline judge: grades derived from the relevance judgements, so L6 runs with no network.

Each criterion is a score ``s`` in [0, 1] mapped to a grade ``1 + floor(4 s + 1/2)`` (1 = none,
5 = perfect, halves rounded up). With ``g(d)`` the qrel grade of document d (0 when unjudged or
negative), ``R`` the documents with ``g >= relevance_threshold`` and ``C`` the context:

- ``relevance``: ``s = max_{d cited} g(d) / max_d g(d)`` — the best cited passage against the
  best the qrels know (binary qrels: 5 when the answer cites a relevant passage, else 1; no
  citation: 1);
- ``ranking``: ``s = nDCG@k`` of the context (gains and ideal ranking as in
  :func:`~embedpyramid.retrieval.metrics.ndcg.ndcg_at_k`, ``k`` the context depth);
- ``coverage``: ``s = |C ∩ R| / |R|``, the context recall.

A query with no document in R is not graded (``skipped``), as the retrieval metrics exclude it.
Comparing an LLM judge with these grades (weighted kappa, :mod:`embedpyramid.downstream.agreement`)
is how far the LLM agrees with the human relevance judgements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from embedpyramid.config import CRITERION_DESCRIPTIONS
from embedpyramid.config.conventions import MetricConventions
from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.context import Context
from embedpyramid.downstream.judge import Judgement
from embedpyramid.retrieval.metrics.ndcg import graded_gain, ndcg_at_k

NO_RELEVANT = "no qrel at or above the relevance threshold"


def score_to_grade(score: float) -> int:
    """``1 + floor(4 score + 1/2)`` for ``score`` in [0, 1]."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"score must lie in [0, 1]; got {score}")
    return 1 + math.floor(4.0 * score + 0.5)


class QrelsJudge:
    """``qrels`` maps query id -> {doc id: grade}; ``k`` is the context depth (the nDCG cutoff)."""

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], criteria: Sequence[str], k: int,
                 conventions: MetricConventions = MetricConventions()):
        unknown = [c for c in criteria if c not in CRITERION_DESCRIPTIONS]
        if unknown:
            raise ValueError(f"the qrels judge grades only {', '.join(CRITERION_DESCRIPTIONS)}; not {unknown}")
        self.qrels, self.criteria, self.k, self.conventions = qrels, tuple(criteria), k, conventions

    def describe(self) -> dict[str, Any]:
        return {"kind": "qrels", "criteria": list(self.criteria), "k": self.k,
                "mapping": "grade = 1 + floor(4 s + 1/2); relevance: best cited grade / best grade, "
                           "ranking: nDCG@k of the context, coverage: context recall",
                "conventions": self.conventions.as_dict()}

    def judge(self, context: Context, answer: Answer) -> Judgement:
        judged = self.qrels.get(context.query_id, {})
        relevant = {d for d, g in judged.items() if g >= self.conventions.relevance_threshold}
        if not relevant:
            return Judgement(context.query_id, skipped=NO_RELEVANT)
        scores = {
            "relevance": max((max(judged.get(d, 0), 0) for d in answer.citations), default=0) / max(judged.values()),
            "ranking": self._ndcg(context.doc_ids, judged),
            "coverage": len(relevant & set(context.doc_ids)) / len(relevant),
        }
        grades = {criterion: score_to_grade(scores[criterion]) for criterion in self.criteria}
        rationale = "; ".join(f"{criterion} {scores[criterion]:.3f}" for criterion in self.criteria)
        return Judgement(context.query_id, grades, rationale)

    def _ndcg(self, doc_ids: Sequence[str], judged: Mapping[str, int]) -> float:
        gains = graded_gain(np.array([[judged.get(d, 0) for d in doc_ids[: self.k]] or [0]]), self.conventions.gain)
        ideal = graded_gain(np.array([sorted(judged.values(), reverse=True)]), self.conventions.gain)
        return float(ndcg_at_k(gains, ideal, self.k)[0])
