"""Reranking: does the model order each query's given candidates well?

Each query comes with its candidates (MTEB's ``top_ranked``; AskUbuntuDupQuestions, SciDocsRR,
StackOverflowDupQuestions…) and graded judgements. Every candidate is scored by the card's
similarity to the query (the query encoded with the card's query prompt, the candidate with its
document prompt), the candidates of a query form its run, and the run is scored per query by the
retrieval metrics (:func:`embedpyramid.retrieval.metrics.evaluate.evaluate_run`; a judged document
outside the candidates counts in the ideal ranking and the number of relevant documents, never
in the run). The per-query values are the family's per-item rows, so the task summary compares
models with the same paired statistics as retrieval (bootstrap interval, sign-flip test, Holm,
verdict); the summary holds each measure's mean over the evaluated queries.

* ``protocol: project``: ``measures`` under the settings' conventions — ``ties`` (``expected``:
  each measure's expected value over the orders of tied candidates, McSherry & Najork 2008),
  ``gain``, ``relevance_threshold``; a query without a relevant judgement is excluded and counted;
  the card's similarity in float64 (:func:`embedpyramid.vectors.pair_similarities`).
* ``protocol: mteb``: mteb 2.26's reranking (``AbsTaskRetrieval`` with ``top_ranked``,
  ``rerank_top_ranked_documents`` then ``calculate_retrieval_scores``): the similarity in float32
  as MTEB's encoders compute it, each query's candidates cut at the largest of ``k_values``,
  pytrec_eval's measures (ties by doc id descending, linear gain, relevance >= 1) and MTEB's MRR,
  at every k of ``k_values``, averaged over every query with judgements. The main score of
  MTEB's reranking tasks is ``MAP@1000`` (``map_at_1000``), beside ``MRR@10`` and ``nDCG@10``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import parse_measure
from embedpyramid.config.tasks import MTEB_VERSION, RerankingSettings, reranking_mteb_measures
from embedpyramid.data import TaskError
from embedpyramid.data.mteb_retrieval import DOCUMENT_PREFIX, QUERY_PREFIX
from embedpyramid.retrieval.metrics.evaluate import evaluate_run
from embedpyramid.store import PER_QUERY_SCHEMA
from embedpyramid.tasks.common import (
    ALL,
    SCORE_RULE,
    STATISTIC_COMPARISON_SCHEMA,
    SUMMARY_SCHEMA,
    TaskResult,
    empty_per_seed,
    mteb_pair_similarity,
    system_name,
)
from embedpyramid.vectors import TextVectors, pair_similarities


def reranking_conventions(settings: RerankingSettings) -> MetricConventions:
    """The metric conventions of the settings' protocol (recorded with the numbers)."""
    if settings.protocol == "mteb":
        return MetricConventions.mteb(drop_self_hits=False, top_k=max(settings.mteb.k_values),
                                      mteb_version=MTEB_VERSION)
    return MetricConventions(gain=settings.gain, relevance_threshold=settings.relevance_threshold, ties=settings.ties)


def reranking_measures(settings: RerankingSettings) -> list[str]:
    """The per-query measures the settings' protocol computes."""
    return reranking_mteb_measures(settings.mteb.k_values) if settings.protocol == "mteb" else list(settings.measures)


def evaluate_reranking(pairs: pl.DataFrame, vectors: TextVectors, settings: RerankingSettings, *, dataset: str,
                       model: str, similarity: str = "cosine") -> TaskResult:
    """Rank each query's candidates by the card's similarity and score the run per query (see the
    module docstring), under the dataset's own query and document ids (behind the text ids'
    ``q:`` / ``d:`` prefixes), on which ties are ordered. ``pairs`` holds one row per (query,
    document) that is a candidate or judged:
    ``text_id_1`` the query's text id, ``text_id_2`` the document's, ``gold`` the grade (0 when
    unjudged), ``judged`` and ``candidate`` (``yes`` or ``no``), ``split``; every query it names
    has a judgement."""
    if pairs.is_empty():
        raise TaskError(f"{dataset}: no query with candidates to rerank")
    candidates = pairs.filter(pl.col("candidate") == "yes")
    first, second = candidates["text_id_1"].to_list(), candidates["text_id_2"].to_list()
    if settings.protocol == "mteb":
        scores = mteb_pair_similarity(vectors.rows(first), vectors.rows(second), similarity).astype(np.float64)
    else:
        scores = pair_similarities(vectors, first, second, similarity)
    run = candidates.select(pl.col("text_id_1").str.strip_prefix(QUERY_PREFIX).alias("query_id"),
                            pl.col("text_id_2").str.strip_prefix(DOCUMENT_PREFIX).alias("doc_id"),
                            pl.Series("score", scores), "gold")
    qrels = pairs.filter(pl.col("judged") == "yes").select(
        pl.col("text_id_1").str.strip_prefix(QUERY_PREFIX).alias("query_id"),
        pl.col("text_id_2").str.strip_prefix(DOCUMENT_PREFIX).alias("doc_id"),
        pl.col("gold").cast(pl.Int64).alias("relevance"))
    query_ids = sorted(pairs["text_id_1"].str.strip_prefix(QUERY_PREFIX).unique().to_list())
    conventions = reranking_conventions(settings)
    measures = reranking_measures(settings)
    evaluation = evaluate_run(run.select("query_id", "doc_id", "score"), qrels,
                              [parse_measure(name) for name in measures], conventions, query_ids)
    system = system_name(similarity)
    per_item = evaluation.per_query.select(pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"),
                                           pl.lit(system).alias("system"), "query_id", "metric", "value"
                                           ).cast(PER_QUERY_SCHEMA)
    split = pairs["split"][0]
    summary = per_item.group_by("metric", maintain_order=True).agg(pl.col("value").mean()).select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(system).alias("system"),
        pl.lit(ALL).alias("subset"), pl.lit(split).alias("split"), "metric", "value",
        pl.lit(None, pl.Float64).alias("sd"), pl.lit(None, pl.Int64).alias("n_seeds"),
        pl.lit(len(evaluation.evaluated_query_ids), pl.Int64).alias("n_items")).cast(SUMMARY_SCHEMA)
    predictions = run.select(pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"),
                             pl.lit(system).alias("system"), pl.lit(ALL).alias("subset"),
                             pl.col("query_id").alias("item_id"), "doc_id", "score", "gold")
    result_settings: dict[str, Any] = {
        "task": "reranking", **settings.model_dump(), "similarity": similarity,
        "score": (f"{SCORE_RULE[similarity]}, float32 as MTEB's encoders" if settings.protocol == "mteb" else
                  f"{SCORE_RULE[similarity]}, float64"),
        "conventions": conventions.as_dict(), "measures": measures, "primary_metric": settings.primary_metric,
        "queries": len(evaluation.evaluated_query_ids), "excluded_queries": len(evaluation.excluded_query_ids),
        "candidates": candidates.height, "tied_queries": len(evaluation.tied_queries),
    }
    if settings.protocol == "mteb":
        result_settings.update({"mteb_version": MTEB_VERSION, "main_score": {
            "system": system, "metric": settings.primary_metric, "mteb_key": mteb_key(settings.primary_metric)}})
    return TaskResult("reranking", per_item, predictions, summary, empty_per_seed(), result_settings)


MTEB_KEYS = {"nDCG": "ndcg_at_{k}", "MAP": "map_at_{k}", "Recall": "recall_at_{k}", "P": "precision_at_{k}",
             "Hit": "hit_rate_at_{k}", "MRR": "mrr_at_{k}"}
"""The key of MTEB's score dict for each measure of its reranking (``make_score_dict``)."""


def mteb_key(measure: str) -> str:
    """MTEB's score key of a measure (``MAP@1000`` → ``map_at_1000``)."""
    parsed = parse_measure(measure)
    return MTEB_KEYS[parsed.name].format(k=parsed.cutoff)


def compare_reranking(predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                      confidence: float = 0.95, seed: int = 42, groups: dict[str, str] | None = None) -> pl.DataFrame:
    """No statistic comparison: every reranking measure is a mean of per-query values, which the
    task summary's paired comparisons compare (as retrieval's)."""
    return pl.DataFrame(schema=STATISTIC_COMPARISON_SCHEMA)
