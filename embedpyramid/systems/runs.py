"""Runs as integer arrays: what every L5 stage reads and writes, in the project's ranking order.

A :class:`CodedRun` is a run whose query and document ids are replaced by their positions in
the frozen queries and corpus tables (both sorted by id), so "ties go to the smaller doc_id" —
the convention every metric of the project assumes — is "ties go to the smaller document
index". :func:`ranked` puts any set of (query, document, score) rows into that order and cuts
each query to a depth; :meth:`CodedRun.table` writes the project's long run format
(``query_id, rank, doc_id, score``) with ranks 1..n following that order.

Scores are float32, as in every stored run; stages that compute in float64 round to float32
*before* ranking, so the stored order is exactly the order the metrics re-derive from the
stored scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from embedpyramid.retrieval.search import RUN_SCHEMA


@dataclass(frozen=True, eq=False)
class CodedRun:
    """Rows of a run: ``query`` and ``doc`` (int64 positions) and ``score`` (float32).

    After :func:`ranked`, rows are grouped by query (ascending) and, within a query, ordered by
    score descending then document index ascending.
    """

    query: np.ndarray
    doc: np.ndarray
    score: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "query", np.asarray(self.query, dtype=np.int64))
        object.__setattr__(self, "doc", np.asarray(self.doc, dtype=np.int64))
        object.__setattr__(self, "score", np.asarray(self.score, dtype=np.float32))
        if not self.query.shape == self.doc.shape == self.score.shape or self.query.ndim != 1:
            raise ValueError("query, doc and score must be 1-d arrays of one length")

    def __len__(self) -> int:
        return int(self.query.size)

    def ranks(self) -> np.ndarray:
        """1-based rank of each row within its query (rows must be grouped by query)."""
        return rank_within_query(self.query) + 1

    def mid_ranks(self) -> np.ndarray:
        """1-based rank of each row within its query, rows tied in score sharing the mean of the
        ranks they occupy (the fractional or "mid" rank; rows must be ranked). Unlike
        :meth:`ranks` it does not depend on the order ties were put in, that is on document ids."""
        ranks = self.ranks().astype(np.float64)
        if len(self) == 0:
            return ranks
        new_group = np.empty(len(self), dtype=bool)
        new_group[0] = True
        new_group[1:] = (self.query[1:] != self.query[:-1]) | (self.score[1:] != self.score[:-1])
        starts = np.flatnonzero(new_group)
        counts = np.diff(starts, append=len(self))
        return np.repeat(ranks[starts] + (counts - 1) / 2.0, counts)

    def query_slice(self, query: int) -> CodedRun:
        """The rows of one query (rows must be sorted by query)."""
        start, end = np.searchsorted(self.query, [query, query + 1])
        return CodedRun(self.query[start:end], self.doc[start:end], self.score[start:end])

    def table(self, query_ids: Sequence[str], doc_ids: Sequence[str]) -> pa.Table:
        """The long-format run (RUN_SCHEMA) with ranks 1..n per query, in row order."""
        return pa.table(
            {
                "query_id": pa.array(query_ids, pa.string()).take(pa.array(self.query)),
                "rank": pa.array(self.ranks().astype(np.int32)),
                "doc_id": pa.array(doc_ids, pa.string()).take(pa.array(self.doc)),
                "score": pa.array(self.score, pa.float32()),
            },
            schema=RUN_SCHEMA,
        )


def group_starts(keys: np.ndarray) -> np.ndarray:
    """Positions where a run of equal values begins, for values grouped together (e.g. by query)."""
    change = np.empty(keys.size, dtype=bool)
    change[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=change[1:])
    return np.flatnonzero(change)


def rank_within_query(query: np.ndarray) -> np.ndarray:
    """0-based position of each row within its query, for rows grouped by query."""
    starts = group_starts(query)
    return np.arange(query.size) - np.repeat(starts, np.diff(starts, append=query.size))


def descending_key(score: np.ndarray) -> np.ndarray:
    """uint32 keys whose ascending order is the float32 scores' descending order (IEEE-754 bit
    order; -0.0 counts as 0.0)."""
    bits = (np.asarray(score, dtype=np.float32) + np.float32(0.0)).view(np.uint32)
    ascending = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))
    return ~ascending


class RepeatedPairError(ValueError):
    """A run holds one (query, document) pair twice; ``query`` and ``doc`` are its positions."""

    def __init__(self, query: int, doc: int):
        super().__init__(f"query {query} holds document {doc} twice; a run holds each document once per query")
        self.query, self.doc = query, doc


def ranked(query: np.ndarray, doc: np.ndarray, score: np.ndarray, depth: int | None = None) -> CodedRun:
    """Rows ordered by (query ascending, score descending, document index ascending), each query
    cut to its first ``depth`` rows (None: no cut). Scores are rounded to float32 first. A
    repeated (query, document) pair raises :class:`RepeatedPairError`."""
    query, doc = np.asarray(query, dtype=np.int64), np.asarray(doc, dtype=np.int64)
    score = np.asarray(score, dtype=np.float32)
    if np.isnan(score).any():
        raise ValueError(f"{int(np.isnan(score).sum())} scores are NaN; a run needs comparable scores")
    # Two integer sorts beat a three-key lexsort: by (query, doc), then stably by (query, score desc).
    stride = max(int(doc.max(initial=-1)) + 1, 1)
    pairs = query * stride + doc
    in_order = bool((pairs[1:] > pairs[:-1]).all())
    order = np.arange(pairs.size) if in_order else np.argsort(pairs, kind="stable")
    if not in_order:
        repeated = np.flatnonzero(pairs[order][1:] == pairs[order][:-1])
        if repeated.size:
            first = order[repeated[0]]
            raise RepeatedPairError(int(query[first]), int(doc[first]))
    key = (query[order].astype(np.uint64) << np.uint64(32)) | descending_key(score[order]).astype(np.uint64)
    order = order[np.argsort(key, kind="stable")]
    run = CodedRun(query[order], doc[order], score[order])
    if depth is None:
        return run
    keep = rank_within_query(run.query) < depth
    return CodedRun(run.query[keep], run.doc[keep], run.score[keep])


def encode_run(run: pl.DataFrame, query_ids: Sequence[str], doc_ids: Sequence[str], *, name: str) -> CodedRun:
    """A stored run (``query_id, doc_id, score``; other columns ignored) as a ranked CodedRun.

    Rows of queries outside ``query_ids`` are dropped (a run may cover more queries than are
    evaluated); a document outside ``doc_ids`` or a repeated (query, document) pair is an error
    naming the run ``name``.
    """
    missing = [c for c in ("query_id", "doc_id", "score") if c not in run.columns]
    if missing:
        raise ValueError(f"run {name!r} lacks columns {missing}; a run has query_id, rank, doc_id, score")
    # An Enum's physical value is the position in its categories: one hash lookup per row.
    coded = run.select(
        pl.col("query_id").cast(pl.String).cast(pl.Enum(list(query_ids)), strict=False).to_physical().alias("query"),
        pl.col("doc_id").cast(pl.String).cast(pl.Enum(list(doc_ids)), strict=False).to_physical().alias("doc"),
        "score", "query_id", "doc_id",
    ).filter(pl.col("query").is_not_null())
    unknown = coded.filter(pl.col("doc").is_null())
    if unknown.height:
        first = unknown.row(0, named=True)
        raise ValueError(
            f"run {name!r} names {unknown.height} documents that are not in the corpus, e.g. {first['doc_id']!r} "
            f"for query {first['query_id']!r}; recompute that run on the current frozen dataset"
        )
    try:
        return ranked(coded["query"].to_numpy(), coded["doc"].to_numpy(), coded["score"].to_numpy())
    except RepeatedPairError as error:
        raise ValueError(
            f"run {name!r} repeats (query, document) pairs, e.g. ({query_ids[error.query]!r}, "
            f"{doc_ids[error.doc]!r}); a run holds each document at most once per query"
        ) from None


def queries_with_ties(run: CodedRun) -> int:
    """Queries in which two adjacent ranks share a score (their order is by document index)."""
    same_query = run.query[1:] == run.query[:-1]
    tied = same_query & (run.score[1:] == run.score[:-1])
    return int(np.unique(run.query[1:][tied]).size)


def empty_queries(run: CodedRun, n_queries: int) -> int:
    """Queries with no row in the run."""
    return n_queries - int(np.unique(run.query).size)
