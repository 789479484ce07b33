"""Retrieval metrics with trec_eval-equivalent definitions.

One module per measure (``ndcg``, ``precision``, ``recall``, ``hit``, ``reciprocal_rank``,
``average_precision``, ``r_precision``, ``complete_evidence``, ``judged``), each a vectorised
kernel over a dense [n_queries, depth] matrix; :func:`evaluate_run` builds those matrices once
from a run and qrels (``ranking``: the tie rules), tests each group of measures identical by
construction once (``aliases``), and :func:`random_ranking_floor` gives every measure's value
under a random ranking (``floor``). The measure names and the conventions every number follows
are settings, parsed and validated with the config (:mod:`embedpyramid.config.measures`,
:mod:`embedpyramid.config.conventions`).
"""

from embedpyramid.retrieval.metrics.evaluate import RetrievalEvaluation, evaluate_run
from embedpyramid.retrieval.metrics.floor import random_ranking_floor

__all__ = ["RetrievalEvaluation", "evaluate_run", "random_ranking_floor"]
