"""The random-ranking floor: what each measure scores, per query, when the corpus is ranked at
random.

A uniformly random order of the corpus is one tie group holding every document: for a query
with ``N`` candidate documents (the corpus, less the query itself when self-hits are dropped),
``R`` of them relevant, ``J`` judged and judged gains summing to ``g``, the measures are the
expectations of :mod:`embedpyramid.retrieval.metrics.ranking` for a group of size ``N`` cut at
the run's depth — in closed form, e.g. ``E[P@k] = R / N``, ``E[Hit@k] = 1 - C(N - R, k) /
C(N, k)``, ``E[nDCG@k] = (g / N) * sum_{i<=k} 1/log2(i + 1) / IDCG@k`` (McSherry & Najork 2008
for the expectations over tied orders; the floor is the all-tied case). Evaluating a constant
scorer that returns the whole corpus under ``ties="expected"`` gives the same numbers, which is
what the tie rule is for: a model's number means something only above its floor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure
from embedpyramid.retrieval.metrics.aliases import grade_structure, measure_aliases
from embedpyramid.retrieval.metrics.evaluate import RetrievalEvaluation, score_ranking
from embedpyramid.retrieval.metrics.ndcg import graded_gain
from embedpyramid.retrieval.metrics.ranking import (
    TieGroups,
    counted_queries,
    ideal_gains,
    judged_qrels,
    ranking_from_groups,
)


def random_ranking_floor(
    qrels: pl.DataFrame,
    corpus_ids: Sequence[str],
    measures: Sequence[Measure],
    conventions: MetricConventions = MetricConventions(),
    *,
    depth: int,
    query_ids: Sequence[str] | None = None,
) -> RetrievalEvaluation:
    """Per-query expected values of ``measures`` under a random ranking of ``corpus_ids`` cut at
    ``depth`` (the run's depth), with the same conventions, queries and aliases as
    :func:`embedpyramid.retrieval.metrics.evaluate_run`. qrels of documents outside the corpus
    count towards R but can never be retrieved."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1; got {depth}")
    unique_measures = list(dict.fromkeys(measures))
    threshold = conventions.relevance_threshold
    universe = qrels["query_id"].unique().to_list() if query_ids is None else list(query_ids)
    evaluated, excluded = counted_queries(qrels, universe, conventions)

    judged = judged_qrels(qrels, evaluated)
    n_queries = len(evaluated)
    query = judged["query_index"].to_numpy()
    grade = judged["relevance"].to_numpy()
    n_relevant = np.bincount(query[grade >= threshold], minlength=n_queries)
    corpus = pl.Series("doc_id", list(dict.fromkeys(corpus_ids)), dtype=pl.String)
    candidates = judged.filter(pl.col("doc_id").is_in(corpus.implode()))
    if conventions.drop_self_hits:
        candidates = candidates.filter(pl.col("doc_id") != pl.col("query_id"))
    in_query = candidates["query_index"].to_numpy()
    in_grade = candidates["relevance"].to_numpy()
    size = np.full(n_queries, corpus.len())
    if conventions.drop_self_hits:
        size -= np.isin(np.asarray(evaluated, dtype=object), corpus.to_numpy()).astype(np.int64)
    groups = TieGroups(
        query=np.arange(n_queries),
        start=np.zeros(n_queries, dtype=np.int64),
        size=size,
        relevant=np.bincount(in_query, weights=in_grade >= threshold, minlength=n_queries),
        gain=np.bincount(in_query, weights=graded_gain(in_grade, conventions.gain), minlength=n_queries),
        judged=np.bincount(in_query, minlength=n_queries).astype(np.float64),
    )
    retrieved = np.minimum(size, depth)
    ideal_depth = max((m.cutoff or 0 for m in unique_measures if m.name == "nDCG"), default=0)
    ideal = ideal_gains(query, graded_gain(grade, conventions.gain), n_queries, ideal_depth)
    width = max(1, int(retrieved.max(initial=0)))
    ranking = ranking_from_groups(groups, n_relevant, ideal, retrieved, width)
    aliases = measure_aliases(unique_measures, **grade_structure(query, grade, n_queries, threshold), run_depth=width)
    per_query = score_ranking(ranking, unique_measures, evaluated, aliases)
    return RetrievalEvaluation(
        per_query=per_query.sort("query_id", "metric"),
        evaluated_query_ids=evaluated,
        excluded_query_ids=excluded,
        conventions=conventions,
        aliases=aliases,
        tied_queries={},
    )
