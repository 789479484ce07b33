"""Per-query retrieval metrics of a run against graded qrels, under recorded conventions."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.retrieval.metrics.average_precision import average_precision_at_k
from embedpyramid.retrieval.metrics.conventions import MetricConventions
from embedpyramid.retrieval.metrics.hit import hit_at_k
from embedpyramid.retrieval.metrics.measures import Measure
from embedpyramid.retrieval.metrics.ndcg import graded_gain, ndcg_at_k
from embedpyramid.retrieval.metrics.precision import precision_at_k
from embedpyramid.retrieval.metrics.r_precision import r_precision
from embedpyramid.retrieval.metrics.recall import recall_at_k
from embedpyramid.retrieval.metrics.reciprocal_rank import reciprocal_rank_at_k


@dataclass(frozen=True)
class RetrievalEvaluation:
    """Per-query values of every measure, the query sets behind them and their conventions.

    ``per_query`` has columns query_id (str), metric (str, canonical measure name) and value
    (float64), sorted by query_id then metric; it holds one row per evaluated query and measure.
    """

    per_query: pl.DataFrame
    evaluated_query_ids: list[str]
    excluded_query_ids: list[str]
    conventions: MetricConventions


@dataclass(frozen=True)
class _JudgedRanking:
    """Dense view of a run against its qrels: row q is the q-th evaluated query, zero-padded."""

    gains: np.ndarray  # [n_queries, depth] nDCG gain of the document at each rank
    relevant: np.ndarray  # [n_queries, depth] grade >= threshold at each rank
    n_relevant: np.ndarray  # [n_queries] qrels with grade >= threshold, all >= 1
    ideal_gains: np.ndarray  # [n_queries, max nDCG cutoff] judged gains sorted descending


_CUT_KERNELS: dict[str, Callable[[_JudgedRanking, int], np.ndarray]] = {
    "nDCG": lambda r, k: ndcg_at_k(r.gains, r.ideal_gains, k),
    "P": lambda r, k: precision_at_k(r.relevant, k),
    "Recall": lambda r, k: recall_at_k(r.relevant, r.n_relevant, k),
    "Hit": lambda r, k: hit_at_k(r.relevant, k),
    "MRR": lambda r, k: reciprocal_rank_at_k(r.relevant, k),
    "MAP": lambda r, k: average_precision_at_k(r.relevant, r.n_relevant, k),
}

_DTYPE_CHECKS: dict[str, Callable[[pl.DataType], bool]] = {
    "string": lambda dtype: dtype == pl.String,
    "numeric": lambda dtype: dtype.is_numeric(),
    "integer": lambda dtype: dtype.is_integer(),
}


def evaluate_run(
    run: pl.DataFrame,
    qrels: pl.DataFrame,
    measures: Sequence[Measure],
    conventions: MetricConventions = MetricConventions(),
    query_ids: Sequence[str] | None = None,
) -> RetrievalEvaluation:
    """Score every query of a run on every measure, with trec_eval-equivalent definitions.

    Conventions (DESIGN.md, "Metric conventions"): each query's retrieved documents are
    re-ordered by (score descending, doc_id ascending) whatever the rank column says, after
    dropping self-hits (doc_id == query_id) if ``conventions.drop_self_hits``; unjudged
    documents are non-relevant; nDCG gains are graded (``conventions.gain``) and its ideal
    ranking uses all the query's qrels; binary measures count grade >= ``relevance_threshold``
    as relevant. Queries in ``query_ids`` without any such qrel are excluded and listed;
    queries with relevant qrels but no retrieved documents score 0 on every measure.

    Args:
        run: columns query_id (str), doc_id (str), score (numeric); other columns (rank) are
            ignored. Rows of queries outside ``query_ids`` are ignored.
        qrels: columns query_id (str), doc_id (str), relevance (integer grade; <= 0 means
            judged non-relevant).
        measures: the measures to compute (duplicates are computed once).
        conventions: the metric conventions, recorded in the result.
        query_ids: every query to evaluate; default: the queries appearing in ``qrels``.

    Returns:
        The per-query long table with the evaluated and excluded query ids.
    """
    _check_frame(run, "run", {"query_id": "string", "doc_id": "string", "score": "numeric"})
    _check_frame(
        qrels, "qrels", {"query_id": "string", "doc_id": "string", "relevance": "integer"}
    )
    if run["score"].dtype.is_float() and run["score"].is_nan().any():
        raise ValueError(f"run.score has {run['score'].is_nan().sum()} NaN values")
    unique_measures = list(dict.fromkeys(measures))
    not_measures = [m for m in unique_measures if not isinstance(m, Measure)]
    if not_measures:
        raise TypeError(
            f"measures must be Measure objects, got {not_measures[0]!r}; "
            "turn strings into measures with parse_measure"
        )
    universe = _query_universe(qrels, query_ids)
    threshold = conventions.relevance_threshold
    with_positive = set(qrels.filter(pl.col("relevance") >= threshold)["query_id"].to_list())
    evaluated = sorted(q for q in universe if q in with_positive)
    excluded = sorted(q for q in universe if q not in with_positive)

    ranking = _judged_ranking(run, qrels, evaluated, unique_measures, conventions)
    evaluated_ids = pl.Series("query_id", evaluated, dtype=pl.String)
    tables = [
        pl.DataFrame(
            {
                "query_id": evaluated_ids,
                "metric": pl.repeat(str(measure), len(evaluated), dtype=pl.String, eager=True),
                "value": _measure_values(measure, ranking),
            }
        )
        for measure in unique_measures
    ]
    per_query = (
        pl.concat(tables)
        if tables
        else pl.DataFrame(schema={"query_id": pl.String, "metric": pl.String, "value": pl.Float64})
    )
    return RetrievalEvaluation(
        per_query=per_query.sort("query_id", "metric"),
        evaluated_query_ids=evaluated,
        excluded_query_ids=excluded,
        conventions=conventions,
    )


def _check_frame(frame: pl.DataFrame, frame_name: str, columns: dict[str, str]) -> None:
    """Raise if a column is missing, of the wrong kind or null, or a (query, doc) pair repeats."""
    for column, kind in columns.items():
        if column not in frame.columns:
            raise ValueError(
                f"{frame_name} has no column {column!r} (columns: {frame.columns}); "
                f"expected {', '.join(columns)}"
            )
        if not _DTYPE_CHECKS[kind](frame.schema[column]):
            raise ValueError(
                f"{frame_name}.{column} has dtype {frame.schema[column]}, expected {kind}; "
                "cast it before evaluating"
            )
        n_missing = frame[column].null_count()
        if n_missing:
            raise ValueError(f"{frame_name}.{column} has {n_missing} null values")
    duplicated = frame.filter(frame.select("query_id", "doc_id").is_duplicated())
    if duplicated.height:
        first = duplicated.row(0, named=True)
        raise ValueError(
            f"{frame_name} has {duplicated.height} rows sharing a (query_id, doc_id) pair, "
            f"e.g. query_id={first['query_id']!r}, doc_id={first['doc_id']!r}; "
            "keep one row per pair"
        )


def _measure_values(measure: Measure, ranking: _JudgedRanking) -> np.ndarray:
    if measure.cutoff is None:  # RPrec, the one measure without a cutoff
        return r_precision(ranking.relevant, ranking.n_relevant)
    return _CUT_KERNELS[measure.name](ranking, measure.cutoff)


def _query_universe(qrels: pl.DataFrame, query_ids: Sequence[str] | None) -> list[str]:
    if query_ids is None:
        return qrels["query_id"].unique().to_list()
    universe = list(query_ids)
    if len(set(universe)) != len(universe):
        raise ValueError("query_ids has duplicates; give each query once")
    return universe


def _needed_depth(measures: Sequence[Measure], n_relevant: np.ndarray) -> int:
    """Deepest rank any measure reads: the largest cutoff, or the largest R for RPrec."""
    cutoffs = [m.cutoff for m in measures if m.cutoff is not None]
    depth = max(cutoffs, default=0)
    if any(m.cutoff is None for m in measures) and n_relevant.size:
        depth = max(depth, int(n_relevant.max()))
    return depth


def _rank_within_query(query_index: np.ndarray) -> np.ndarray:
    """0-based position of each row within its query, for rows sorted by query index."""
    return np.arange(query_index.size) - np.searchsorted(query_index, query_index, side="left")


def _judged_ranking(
    run: pl.DataFrame,
    qrels: pl.DataFrame,
    evaluated: list[str],
    measures: Sequence[Measure],
    conventions: MetricConventions,
) -> _JudgedRanking:
    query_index = pl.DataFrame(
        {"query_id": evaluated, "query_index": np.arange(len(evaluated), dtype=np.int64)},
        schema={"query_id": pl.String, "query_index": pl.Int64},
    )
    judged = qrels.select("query_id", "doc_id", "relevance")
    judged_query_grade = judged.join(query_index, on="query_id").select("query_index", "relevance")
    judged_query = judged_query_grade["query_index"].to_numpy()
    judged_grade = judged_query_grade["relevance"].to_numpy()
    n_relevant = np.bincount(
        judged_query[judged_grade >= conventions.relevance_threshold], minlength=len(evaluated)
    )
    ideal_depth = max((m.cutoff or 0 for m in measures if m.name == "nDCG"), default=0)
    ideal_gains = _ideal_gains(
        judged_query, graded_gain(judged_grade, conventions.gain), len(evaluated), ideal_depth
    )
    grades = _retrieved_grades(
        run, judged, query_index, conventions.drop_self_hits, _needed_depth(measures, n_relevant)
    )
    return _JudgedRanking(
        gains=graded_gain(grades, conventions.gain),
        relevant=grades >= conventions.relevance_threshold,
        n_relevant=n_relevant,
        ideal_gains=ideal_gains,
    )


def _ideal_gains(
    judged_query: np.ndarray, judged_gain: np.ndarray, n_queries: int, depth: int
) -> np.ndarray:
    """[n_queries, depth] each query's judged gains sorted descending, zero-padded."""
    order = np.lexsort((-judged_gain, judged_query))
    query = judged_query[order]
    rank = _rank_within_query(query)
    kept = rank < depth
    ideal = np.zeros((n_queries, depth))
    ideal[query[kept], rank[kept]] = judged_gain[order][kept]
    return ideal


def _retrieved_grades(
    run: pl.DataFrame,
    judged: pl.DataFrame,
    query_index: pl.DataFrame,
    drop_self_hits: bool,
    needed_depth: int,
) -> np.ndarray:
    """[n_queries, depth] grade at each rank of the re-ordered run (0: unjudged or past the end).

    depth is the needed depth, or less when no query retrieved that many documents.
    """
    retrieved = run.select("query_id", "doc_id", "score").join(query_index, on="query_id")
    if drop_self_hits:
        retrieved = retrieved.filter(pl.col("doc_id") != pl.col("query_id"))
    retrieved = retrieved.sort("query_index", "score", "doc_id", descending=[False, True, False])
    rank = _rank_within_query(retrieved["query_index"].to_numpy())
    depth = min(needed_depth, int(rank.max(initial=-1)) + 1)
    cut = (
        retrieved.with_columns(pl.Series("rank_index", rank))
        .filter(pl.col("rank_index") < depth)
        .join(judged, on=["query_id", "doc_id"], how="left")
        .with_columns(pl.col("relevance").fill_null(0))
    )
    grades = np.zeros((query_index.height, depth), dtype=np.int64)
    grades[cut["query_index"].to_numpy(), cut["rank_index"].to_numpy()] = (
        cut["relevance"].to_numpy()
    )
    return grades
