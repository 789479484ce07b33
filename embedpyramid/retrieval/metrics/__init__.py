"""Retrieval metrics with trec_eval-equivalent definitions and recorded conventions.

One module per measure (``ndcg``, ``precision``, ``recall``, ``hit``, ``reciprocal_rank``,
``average_precision``, ``r_precision``), each a vectorised kernel over a dense
[n_queries, depth] matrix; :func:`evaluate_run` builds those matrices once from a run and qrels.
"""

from embedpyramid.retrieval.metrics.conventions import MetricConventions
from embedpyramid.retrieval.metrics.evaluate import RetrievalEvaluation, evaluate_run
from embedpyramid.retrieval.metrics.measures import Measure, default_measures, parse_measure

__all__ = [
    "Measure",
    "MetricConventions",
    "RetrievalEvaluation",
    "default_measures",
    "evaluate_run",
    "parse_measure",
]
