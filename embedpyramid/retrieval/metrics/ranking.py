"""A run's ranking against its qrels, as per-rank expectations under the tie rule.

Documents with equal scores form a *tie group*. Under the ``trec_eval`` and ``doc_id`` rules a
group is put in a fixed order (doc_id descending or ascending) and every document is its own
group of one. Under ``expected`` (McSherry & Najork, "Computing information retrieval
performance measures efficiently in the presence of tied scores", ECIR 2008) every order of a
group is equally likely, and each measure is its expected value over those orders. Take a
group of ``n`` documents holding ranks ``s+1 .. s+n``, ``r`` of them relevant (grade >=
threshold), ``j`` judged, with gains summing to ``g``; ``R_before`` relevant documents rank above
it and ``R`` are relevant in all. At its ``t``-th rank (``t = 1..n``):

* ``E[gain] = g / n``, ``P(relevant) = r / n``, ``P(judged) = j / n`` — so DCG, P, Recall,
  Judged and RPrec, linear in the ranks, are their values with these expectations;
* ``E[rel_i * #relevant at ranks <= i] = (r/n) (1 + R_before) + (t - 1) r (r - 1) / (n (n - 1))``
  — two distinct ranks of one group are both relevant with probability ``r(r-1)/(n(n-1))``;
  AP@k is ``(1/R) sum_{i<=k} (this) / i``;
* ``P(no relevant at ranks <= i) = [R_before = 0] C(n - r, t) / C(n, t)`` — Hit@k is one minus
  it at k, and RR@k is ``sum_{i<=k} (P(none by i-1) - P(none by i)) / i``;
* ``P(every relevant document at ranks <= i) = [R_before + r = R] C(t, r) / C(n, r)`` —
  CompleteEvidence@k is its value at k.

A group of one gives back the deterministic values exactly (0 or 1, the usual cumulative
counts): a run's ranks take those values from counts along its ordered documents, and only its
groups of two or more, under ``expected``, take the algebra. The ratios of binomial coefficients are
computed from log-gamma; a group whose ranks reach past the run's depth (the random-ranking
floor's single group of the whole corpus) needs nothing else.

Per query the number of tie groups (two or more documents with one score) that straddle a cutoff
(a measure's k, or R for RPrec) is recorded: those are the queries whose numbers the rule decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.retrieval.metrics.ndcg import graded_gain


@dataclass(frozen=True, eq=False)
class JudgedRanking:
    """Row q is the q-th evaluated query, columns ranks 1..width (width >= 1).

    ``gains``, ``relevant`` and ``judged`` are the expected gain, P(relevant) and P(judged) at
    each rank (0 past the last retrieved document); ``relevant_pairs`` is
    E[rel_i * #relevant at ranks <= i]; ``missed`` is P(no relevant document at ranks <= i) and
    ``found_all`` P(every relevant document at ranks <= i), both carried past the last
    retrieved document. ``n_relevant`` is R per query (0 only for the queries without a relevant
    qrel that ``queries: with_qrels`` evaluates); ``ideal_gains`` the judged
    gains sorted descending; ``retrieved`` the number of retrieved documents per query.
    """

    gains: np.ndarray
    relevant: np.ndarray
    judged: np.ndarray
    relevant_pairs: np.ndarray
    missed: np.ndarray
    found_all: np.ndarray
    n_relevant: np.ndarray
    ideal_gains: np.ndarray
    retrieved: np.ndarray

    @property
    def width(self) -> int:
        return int(self.gains.shape[1])


@dataclass(frozen=True, eq=False)
class TieGroups:
    """Tie groups as parallel arrays, one entry per group, ordered by query then rank."""

    query: np.ndarray
    start: np.ndarray  # 0-based rank of the group's first document
    size: np.ndarray
    relevant: np.ndarray
    gain: np.ndarray
    judged: np.ndarray


def counted_queries(
    qrels: pl.DataFrame, universe: Sequence[str], conventions: MetricConventions
) -> tuple[list[str], list[str]]:
    """(evaluated, excluded) query ids of ``universe``, both sorted: under ``queries:
    with_positive`` the queries with a qrel at or above the relevance threshold are evaluated,
    under ``with_qrels`` every query with any qrel row (MTEB keeps a query whose qrels are all
    grade 0 and averages its zeros)."""
    if conventions.queries == "with_positive":
        qrels = qrels.filter(pl.col("relevance") >= conventions.relevance_threshold)
    counted = set(qrels["query_id"].to_list())
    return sorted(q for q in universe if q in counted), sorted(q for q in universe if q not in counted)


def cut_run(run: pl.DataFrame, top_k: int) -> pl.DataFrame:
    """Each query's first ``top_k`` rows by score descending, then doc_id descending: the
    documents MTEB's search keeps (its heap of ``(score, doc_id)`` pops the smallest pair)."""
    ordered = run.sort("query_id", "score", "doc_id", descending=[False, True, True])
    return ordered.filter(pl.int_range(pl.len()).over("query_id") < top_k)


def skip_first_result(run: pl.DataFrame, *, drop_self_hits: bool) -> pl.DataFrame:
    """Each query's rows but its best-scored one (score descending, then doc_id descending), after
    its self-hits when ``drop_self_hits``: MTEB's ``skip_first_result`` (``calculate_retrieval_scores``
    drops the first of each query's results sorted by score, once ``ignore_identical_ids`` removed
    the self-hits)."""
    if drop_self_hits:
        run = run.filter(pl.col("doc_id") != pl.col("query_id"))
    ordered = run.sort("query_id", "score", "doc_id", descending=[False, True, True])
    return ordered.filter(pl.int_range(pl.len()).over("query_id") > 0)


def judged_qrels(qrels: pl.DataFrame, evaluated: Sequence[str]) -> pl.DataFrame:
    """query_index, doc_id, relevance of the evaluated queries' qrels (query_index = position in
    ``evaluated``)."""
    index = _query_index(evaluated)
    return qrels.select("query_id", "doc_id", "relevance").join(index, on="query_id").select(
        "query_index", "query_id", "doc_id", "relevance"
    )


def judged_ranking(
    run: pl.DataFrame,
    judged: pl.DataFrame,
    evaluated: Sequence[str],
    conventions: MetricConventions,
    *,
    depth: int,
    ideal_depth: int,
) -> tuple[JudgedRanking, TieGroups]:
    """The ranking of the evaluated queries to ``depth`` ranks, and the run's tie groups of two
    or more documents.

    ``run`` has query_id, doc_id, score; ``judged`` is :func:`judged_qrels` of the evaluated
    queries. Query ids are coded as integers once (the enumeration of the evaluated queries),
    (query, document) pairs as integer keys (:func:`_run_grades`); the run's rows are ordered
    and looked up in the qrels on those, and only rows of tied scores are ordered by their
    doc_id strings. Every matrix of the ranking
    comes from the ordered rows' grades and cumulative counts along each query's ranks; under
    ``expected`` the ranks of tie groups then take the tie algebra.
    """
    n_queries = len(evaluated)
    judged_query = judged["query_index"].to_numpy()
    judged_grade = judged["relevance"].to_numpy()
    n_relevant = np.bincount(
        judged_query[judged_grade >= conventions.relevance_threshold], minlength=n_queries
    )
    ideal = ideal_gains(judged_query, graded_gain(judged_grade, conventions.gain), n_queries, ideal_depth)

    query = _codes(run["query_id"], list(evaluated))
    kept = query >= 0
    if conventions.drop_self_hits:
        kept &= (run["doc_id"] != run["query_id"]).to_numpy()
    rows = np.flatnonzero(kept)
    query, score = query[rows], run["score"].to_numpy()[rows]
    order = _by_query_then_score(query, score)
    if order is not None:
        rows, query, score = rows[order], query[order], score[order]
    tied = np.zeros(rows.size, dtype=bool)  # same query and score as the row before
    tied[1:] = (query[1:] == query[:-1]) & (score[1:] == score[:-1])
    if conventions.ties != "expected":
        rows = _tied_rows_by_doc_id(rows, tied, run["doc_id"], descending=conventions.ties == "trec_eval")
    grade, is_judged = _run_grades(run["doc_id"], rows, query, judged)
    retrieved = np.bincount(query, minlength=n_queries)
    rank = np.arange(query.size) - (np.cumsum(retrieved) - retrieved)[query]
    groups = _tie_groups(tied, query, rank, grade, is_judged, conventions)
    width = max(1, min(depth, int(retrieved.max(initial=0))))
    ranking = _ranking_from_ranks(
        query, rank, grade, is_judged, groups if conventions.ties == "expected" else None,
        n_relevant, ideal, retrieved, width, conventions,
    )
    return ranking, groups


def _codes(values: pl.Series, categories: list[str]) -> np.ndarray:
    """Position of each value among the distinct ``categories`` (int64), -1 where absent. Runs of
    equal values (a run's query ids) are coded once per run."""
    if not categories or not values.len():
        return np.full(values.len(), -1, np.int64)
    starts = np.flatnonzero((values != values.shift(1)).fill_null(True).to_numpy())
    coded = values.gather(starts).cast(pl.Enum(categories), strict=False).to_physical()
    return np.repeat(coded.cast(pl.Int64).fill_null(-1).to_numpy(), np.diff(starts, append=values.len()))


def _by_query_then_score(query: np.ndarray, score: np.ndarray) -> np.ndarray | None:
    """Order of rows by query code, then score descending (ties in any order); None when the
    rows come in that order, as :func:`embedpyramid.retrieval.search.run_table` writes a run
    whose queries are in the evaluated (sorted) order. A run grouped by query in score order
    needs one stable pass over runs of equal codes."""
    same_query = query[1:] == query[:-1]
    if (query[1:] >= query[:-1]).all() and not ((score[1:] > score[:-1]) & same_query).any():
        return None
    order = np.argsort(query, kind="stable")
    same_query = query[order][1:] == query[order][:-1]
    ranked = score[order]
    if (ranked[1:][same_query] > ranked[:-1][same_query]).any():
        by_score = np.argsort(score, kind="stable")[::-1]
        order = by_score[np.argsort(query[by_score], kind="stable")]
    return order


def _tie_members(tied: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the rows in tie groups of two or more (``tied``: the row ties the one before
    it), and which of them start a group."""
    in_group = tied.copy()
    in_group[:-1] |= tied[1:]
    positions = np.flatnonzero(in_group)
    return positions, ~tied[positions]


def _tied_rows_by_doc_id(rows: np.ndarray, tied: np.ndarray, doc_ids: pl.Series, *, descending: bool) -> np.ndarray:
    """``rows`` (ordered by query, then score) with each group of equal scores ordered by doc_id."""
    if not tied.any():
        return rows
    positions, starts = _tie_members(tied)
    ordered = pl.DataFrame(
        {"group": np.cumsum(starts), "doc_id": doc_ids.gather(rows[positions]), "row": rows[positions]}
    ).sort("group", "doc_id", descending=[False, descending])
    rows = rows.copy()
    rows[positions] = ordered["row"].to_numpy()
    return rows


# Odd 64-bit multiplier (2^64 / golden ratio) that spreads a query's code over a pair key's bits.
_QUERY_SPREAD = np.uint64(0x9E3779B97F4A7C15)


def _run_grades(
    doc_ids: pl.Series, rows: np.ndarray, query: np.ndarray, judged: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Grade (0 where unjudged) and judged flag of each run row (``rows`` of ``doc_ids``, of query
    codes ``query``). A (query, document) pair is keyed by an integer, the doc_id's 64-bit hash
    mixed with the query code, and the run's keys are joined to the qrels' keys on integers;
    a key can collide, so every match is confirmed on the query code and the doc_id itself."""
    grade = np.zeros(rows.size, dtype=np.int64)
    is_judged = np.zeros(rows.size, dtype=bool)
    if not judged.height or not rows.size:
        return grade, is_judged
    judged_query = judged["query_index"].to_numpy()
    matches = pl.DataFrame({"key": pair_keys(query, doc_ids.hash().to_numpy()[rows])}).with_row_index("at").join(
        pl.DataFrame({"key": pair_keys(judged_query, judged["doc_id"].hash().to_numpy())}).with_row_index("qrel"),
        on="key",
    )
    at, qrel = matches["at"].to_numpy(), matches["qrel"].to_numpy()
    same = (query[at] == judged_query[qrel]) & (
        doc_ids.gather(rows[at]) == judged["doc_id"].gather(qrel)
    ).to_numpy()
    at, qrel = at[same], qrel[same]
    is_judged[at] = True
    grade[at] = judged["relevance"].to_numpy()[qrel]
    return grade, is_judged


def pair_keys(query: np.ndarray, doc_hash: np.ndarray) -> np.ndarray:
    """An integer key per (query, document) pair from the query's code (or hash) and the
    doc_id's 64-bit hash: equal pairs, equal keys; unequal pairs collide with odds of 2^-64."""
    return doc_hash ^ (query.astype(np.uint64) * _QUERY_SPREAD)


def _tie_groups(
    tied: np.ndarray, query: np.ndarray, rank: np.ndarray, grade: np.ndarray, is_judged: np.ndarray,
    conventions: MetricConventions,
) -> TieGroups:
    """Tie groups of two or more documents: runs of equal scores within a query (rows ordered by
    query, then score descending; ``tied``: the row ties the one before it)."""
    positions, starts = _tie_members(tied)
    group = np.cumsum(starts) - 1
    first = positions[starts]
    grade = grade[positions]
    return TieGroups(
        query=query[first],
        start=rank[first],
        size=np.bincount(group, minlength=first.size),
        relevant=np.bincount(group, weights=grade >= conventions.relevance_threshold, minlength=first.size),
        gain=np.bincount(group, weights=graded_gain(grade, conventions.gain), minlength=first.size),
        judged=np.bincount(group, weights=is_judged[positions], minlength=first.size),
    )


def _ranking_from_ranks(
    query: np.ndarray, rank: np.ndarray, grade: np.ndarray, is_judged: np.ndarray, groups: TieGroups | None,
    n_relevant: np.ndarray, ideal: np.ndarray, retrieved: np.ndarray, width: int, conventions: MetricConventions,
) -> JudgedRanking:
    """The ranking of ordered documents (``query``, 0-based ``rank``, ``grade``, judged flag):
    each query's relevant count up to each rank gives the relevant pairs, ``missed`` and
    ``found_all`` (carried past the last retrieved document by the count itself); the ranks of
    ``groups`` then take the tie algebra's expectations (a group of one would take its own
    values back)."""
    n_queries = n_relevant.shape[0]
    shown = rank < width
    cells = query[shown] * width + rank[shown]
    shown_grade = grade[shown]

    def matrix(entries: np.ndarray) -> np.ndarray:
        dense = np.zeros(n_queries * width)
        dense[cells] = entries
        return dense.reshape(n_queries, width)

    relevant = matrix(shown_grade >= conventions.relevance_threshold)
    gains = matrix(graded_gain(shown_grade, conventions.gain))
    judged = matrix(is_judged[shown])
    found = np.cumsum(relevant, axis=1)
    pairs = relevant * found
    missed = (found == 0).astype(np.float64)
    found_all = ((found == n_relevant[:, None]) & (retrieved > 0)[:, None]).astype(np.float64)
    if groups is not None and groups.size.size:
        before = np.where(groups.start > 0, found[groups.query, np.clip(groups.start - 1, 0, width - 1)], 0.0)
        group_query, group_rank, *values = _tied_entries(groups, before, n_relevant, width)
        for dense, entries in zip((gains, relevant, judged, pairs, missed, found_all), values, strict=True):
            dense[group_query, group_rank] = entries
    return JudgedRanking(
        gains=gains, relevant=relevant, judged=judged, relevant_pairs=pairs, missed=missed,
        found_all=found_all, n_relevant=n_relevant, ideal_gains=ideal, retrieved=retrieved,
    )


def ranking_from_groups(
    groups: TieGroups, n_relevant: np.ndarray, ideal: np.ndarray, retrieved: np.ndarray, width: int
) -> JudgedRanking:
    """Expand tie groups that hold every retrieved document (the random-ranking floor: one group
    per query) into the per-rank expectations of :class:`JudgedRanking`."""
    query, rank, *values = _tied_entries(groups, _relevant_before(groups), n_relevant, width)
    return _dense_ranking(query, rank, tuple(values), n_relevant, ideal, retrieved, width)


def _tied_entries(
    groups: TieGroups, before: np.ndarray, n_relevant: np.ndarray, width: int
) -> tuple[np.ndarray, ...]:
    """(query, rank, gain, P(relevant), P(judged), relevant pairs, missed, found_all) of every
    group's ranks inside the first ``width`` (``before``: each group's R_before)."""
    shown = np.clip(np.minimum(groups.size, width - groups.start), 0, None)
    member = np.repeat(np.arange(shown.size), shown)
    offset = np.arange(member.shape[0]) - np.repeat(np.cumsum(shown) - shown, shown) + 1  # t, 1-based
    query = groups.query[member]
    rank = groups.start[member] + offset - 1
    size = groups.size[member].astype(np.float64)
    relevant = groups.relevant[member].astype(np.float64)
    before = before[member]

    p_relevant = relevant / size
    with np.errstate(divide="ignore", invalid="ignore"):
        both = np.where(size > 1, relevant * (relevant - 1) / (size * (size - 1)), 0.0)
    pairs = p_relevant * (1.0 + before) + (offset - 1) * both
    missed = np.where(before == 0, _none_in_first(size, relevant, offset), 0.0)
    found_all = np.where(before + relevant == n_relevant[query], _all_in_first(size, relevant, offset), 0.0)
    return query, rank, groups.gain[member] / size, p_relevant, groups.judged[member] / size, pairs, missed, found_all


def _dense_ranking(
    query: np.ndarray, rank: np.ndarray, values: tuple[np.ndarray, ...], n_relevant: np.ndarray,
    ideal: np.ndarray, retrieved: np.ndarray, width: int,
) -> JudgedRanking:
    """The [n_queries, width] matrices of a ranking from its (query, rank) entries: gains,
    P(relevant), P(judged), relevant pairs, then missed and found_all (carried past the last
    retrieved document)."""
    n_queries = n_relevant.shape[0]

    def matrix(entries: np.ndarray) -> np.ndarray:
        dense = np.zeros((n_queries, width))
        dense[query, rank] = entries
        return dense

    last = np.clip(np.minimum(retrieved, width) - 1, 0, None)
    carry = np.minimum(np.arange(width)[None, :], last[:, None])
    nothing = (retrieved == 0)[:, None]

    def carried(entries: np.ndarray, when_nothing: float) -> np.ndarray:
        return np.where(nothing, when_nothing, np.take_along_axis(matrix(entries), carry, axis=1))

    gains, relevant, judged, pairs, missed, found_all = values
    return JudgedRanking(
        gains=matrix(gains),
        relevant=matrix(relevant),
        judged=matrix(judged),
        relevant_pairs=matrix(pairs),
        missed=carried(missed, 1.0),
        found_all=carried(found_all, 0.0),
        n_relevant=n_relevant,
        ideal_gains=ideal,
        retrieved=retrieved,
    )


def straddling_groups(
    groups: TieGroups, cutoffs: Sequence[int], n_queries: int, n_relevant: np.ndarray | None = None
) -> np.ndarray:
    """Per query, the number of tie groups of two or more documents that hold both rank k and
    rank k + 1 for some cutoff k in ``cutoffs`` (or k = R of the query, given ``n_relevant``)."""
    start, end = groups.start, groups.start + groups.size  # ranks start+1 .. end
    straddles = np.zeros(groups.size.shape[0], dtype=bool)
    for cutoff in cutoffs:
        straddles |= (start < cutoff) & (cutoff < end)
    if n_relevant is not None:
        at_r = n_relevant[groups.query]
        straddles |= (start < at_r) & (at_r < end)
    straddles &= groups.size > 1
    return np.bincount(groups.query[straddles], minlength=n_queries)


def _query_index(evaluated: Sequence[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"query_id": list(evaluated), "query_index": np.arange(len(evaluated), dtype=np.int64)},
        schema={"query_id": pl.String, "query_index": pl.Int64},
    )


def _relevant_before(groups: TieGroups) -> np.ndarray:
    """Relevant documents in the earlier groups of the same query."""
    total = np.cumsum(groups.relevant) - groups.relevant
    return total - total[_run_start(groups.query)]


def _run_start(keys: np.ndarray) -> np.ndarray:
    """For each element of sorted ``keys``, the index of the first element equal to it."""
    starts = np.flatnonzero(np.diff(keys, prepend=keys[:1] - 1)) if keys.size else np.zeros(0, np.int64)
    return np.repeat(starts, np.diff(starts, append=keys.size))


def _none_in_first(n: np.ndarray, r: np.ndarray, t: np.ndarray) -> np.ndarray:
    """C(n - r, t) / C(n, t): no relevant document among the first t of a random order."""
    from scipy.special import gammaln  # imported here: scipy costs a warm CLI start that scores nothing

    # A document alone (n = 1) is missed exactly when it is not relevant: no log-gamma needed.
    none = np.where(r == 0, 1.0, 0.0)
    many = np.flatnonzero((n > 1) & (r > 0))
    n, r, t = n[many], r[many], t[many]
    possible = t <= n - r
    safe = np.where(possible, n - r - t, 0.0)
    log = gammaln(n - r + 1) - gammaln(safe + 1) - gammaln(n + 1) + gammaln(n - t + 1)
    none[many] = np.where(possible, np.exp(log), 0.0)
    return none


def _all_in_first(n: np.ndarray, r: np.ndarray, t: np.ndarray) -> np.ndarray:
    """C(t, r) / C(n, r): every relevant document among the first t of a random order."""
    from scipy.special import gammaln

    found = np.ones(n.shape)
    many = np.flatnonzero((r != 0) & (t != n))  # never a document alone (t = n = 1)
    n, r, t = n[many], r[many], t[many]
    possible = t >= r
    safe = np.where(possible, t - r, 0.0)
    log = gammaln(t + 1) - gammaln(safe + 1) - gammaln(n + 1) + gammaln(n - r + 1)
    found[many] = np.where(possible, np.exp(log), 0.0)
    return found


def ideal_gains(judged_query: np.ndarray, judged_gain: np.ndarray, n_queries: int, depth: int) -> np.ndarray:
    """[n_queries, depth] each query's judged gains sorted descending, zero-padded."""
    order = np.lexsort((-judged_gain, judged_query))
    query = judged_query[order]
    rank = np.arange(query.size) - np.searchsorted(query, query, side="left")
    kept = rank < depth
    ideal = np.zeros((n_queries, depth))
    ideal[query[kept], rank[kept]] = judged_gain[order][kept]
    return ideal
