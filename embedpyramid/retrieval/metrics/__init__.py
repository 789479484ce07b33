"""Retrieval metrics with trec_eval-equivalent definitions and recorded conventions.

One module per measure (``ndcg``, ``precision``, ``recall``, ``hit``, ``reciprocal_rank``,
``average_precision``, ``r_precision``, ``complete_evidence``, ``judged``), each a vectorised
kernel over a dense [n_queries, depth] matrix; :func:`evaluate_run` builds those matrices once
from a run and qrels (``ranking``: the tie rules), tests each group of measures identical by
construction once (``aliases``), and :func:`random_ranking_floor` gives every measure's value
under a random ranking (``floor``).
"""

from typing import Any

from embedpyramid.retrieval.metrics.conventions import TIE_RULES, MetricConventions
from embedpyramid.retrieval.metrics.measures import Measure, default_measures, parse_measure

__all__ = [
    "TIE_RULES",
    "Measure",
    "MetricConventions",
    "RetrievalEvaluation",
    "default_measures",
    "evaluate_run",
    "parse_measure",
    "random_ranking_floor",
]


def __getattr__(name: str) -> Any:
    """The evaluation and the floor on first use: they need numpy and polars, which validating a
    config (it parses measures and conventions) does not."""
    if name in ("RetrievalEvaluation", "evaluate_run"):
        from embedpyramid.retrieval.metrics import evaluate

        return getattr(evaluate, name)
    if name == "random_ranking_floor":
        from embedpyramid.retrieval.metrics.floor import random_ranking_floor

        return random_ranking_floor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
