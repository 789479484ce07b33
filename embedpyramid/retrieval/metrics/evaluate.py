"""Per-query retrieval metrics of a run against graded qrels, under recorded conventions."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure
from embedpyramid.retrieval.metrics.aliases import grade_structure, measure_aliases
from embedpyramid.retrieval.metrics.average_precision import average_precision_at_k
from embedpyramid.retrieval.metrics.complete_evidence import complete_evidence_at_k
from embedpyramid.retrieval.metrics.hit import hit_at_k
from embedpyramid.retrieval.metrics.judged import judged_at_k
from embedpyramid.retrieval.metrics.ndcg import ndcg_at_k
from embedpyramid.retrieval.metrics.precision import precision_at_k
from embedpyramid.retrieval.metrics.r_precision import r_precision
from embedpyramid.retrieval.metrics.ranking import (
    JudgedRanking,
    counted_queries,
    cut_run,
    judged_qrels,
    judged_ranking,
    pair_keys,
    skip_first_result,
    straddling_groups,
)
from embedpyramid.retrieval.metrics.recall import recall_at_k
from embedpyramid.retrieval.metrics.reciprocal_rank import reciprocal_rank_at_k

PER_QUERY_SCHEMA = {"query_id": pl.String, "metric": pl.String, "value": pl.Float64}


@dataclass(frozen=True)
class RetrievalEvaluation:
    """Per-query values of every measure, the query sets behind them and their conventions.

    ``per_query`` has columns query_id (str), metric (str, canonical measure name) and value
    (float64), sorted by query_id then metric; it holds one row per evaluated query and measure.
    ``aliases`` maps each measure that is identical by construction to another one (see
    :mod:`embedpyramid.retrieval.metrics.aliases`) to that canonical measure; an alias's values
    are copied from it. ``tied_queries`` maps each evaluated query with score ties across a
    cutoff (a measure's k, or R for RPrec) to the number of such tie groups: the queries whose
    values the tie rule decides.
    """

    per_query: pl.DataFrame
    evaluated_query_ids: list[str]
    excluded_query_ids: list[str]
    conventions: MetricConventions
    aliases: dict[str, str]
    tied_queries: dict[str, int]


MeasureKernel = Callable[[JudgedRanking, int], np.ndarray]

_CUT_KERNELS: dict[str, MeasureKernel] = {
    "nDCG": lambda r, k: ndcg_at_k(r.gains, r.ideal_gains, k),
    "P": lambda r, k: precision_at_k(r.relevant, k),
    "Recall": lambda r, k: recall_at_k(r.relevant, r.n_relevant, k),
    "Hit": lambda r, k: hit_at_k(r.missed, k),
    "MRR": lambda r, k: reciprocal_rank_at_k(r.missed, k),
    "MAP": lambda r, k: average_precision_at_k(r.relevant_pairs, r.n_relevant, k),
    "CompleteEvidence": lambda r, k: complete_evidence_at_k(r.found_all, k),
    "Judged": lambda r, k: judged_at_k(r.judged, k),
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

    Conventions (DESIGN.md, "Metric conventions"): each query's retrieved documents are ordered
    by score, descending, whatever the rank column says, after dropping self-hits
    (doc_id == query_id) if ``conventions.drop_self_hits``; equal scores follow
    ``conventions.ties`` (expected values over the orders of tied documents, trec_eval's doc_id
    descending, or doc_id ascending); unjudged documents are non-relevant; nDCG gains are graded
    (``conventions.gain``) and its ideal ranking uses all the query's qrels; binary measures
    count grade >= ``relevance_threshold`` as relevant; negative grades are judged non-relevant
    (gain 0), as in trec_eval. Queries in ``query_ids`` without any relevant qrel are excluded
    and listed (under ``conventions.queries == "with_qrels"``, MTEB's rule, only those without
    any qrel: one whose qrels are all grade <= 0 scores 0 on every measure but Judged@k);
    queries with relevant qrels but no retrieved documents score 0 on every measure. With
    ``conventions.top_k`` each query's run is first cut to its top_k rows (score descending,
    doc_id descending), before self-hits are dropped; with ``conventions.skip_first_result`` each
    query's first remaining row (same order) is dropped next. Measures identical by construction
    are computed once (``aliases``).

    Args:
        run: columns query_id (str), doc_id (str), score (numeric); other columns (rank) are
            ignored. Rows of queries outside ``query_ids`` are ignored.
        qrels: columns query_id (str), doc_id (str), relevance (integer grade; <= 0 means
            judged non-relevant).
        measures: the measures to compute (duplicates are computed once).
        conventions: the metric conventions, recorded in the result.
        query_ids: every query to evaluate; default: the queries appearing in ``qrels``.

    Returns:
        The per-query long table with the evaluated and excluded query ids, the aliases and the
        queries with ties across a cutoff.
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
    evaluated, excluded = counted_queries(qrels, _query_universe(qrels, query_ids), conventions)
    if conventions.top_k is not None:
        run = cut_run(run, conventions.top_k)
    if conventions.skip_first_result:
        run = skip_first_result(run, drop_self_hits=conventions.drop_self_hits)
    threshold = conventions.relevance_threshold

    judged = judged_qrels(qrels, evaluated)
    grades = judged["relevance"].to_numpy()
    judged_query = judged["query_index"].to_numpy()
    n_relevant = np.bincount(judged_query[grades >= threshold], minlength=len(evaluated))
    ranking, tie_groups = judged_ranking(
        run, judged, evaluated, conventions,
        depth=_needed_depth(unique_measures, n_relevant, run),
        ideal_depth=max((m.cutoff or 0 for m in unique_measures if m.name == "nDCG"), default=0),
    )
    aliases = measure_aliases(
        unique_measures, **grade_structure(judged_query, grades, len(evaluated), threshold),
        run_depth=int(ranking.retrieved.max(initial=0)),
    )
    per_query = score_ranking(ranking, unique_measures, evaluated, aliases)
    cutoffs = sorted({m.cutoff for m in unique_measures if m.cutoff is not None})
    rprec = any(m.name == "RPrec" for m in unique_measures)
    straddling = straddling_groups(tie_groups, cutoffs, len(evaluated), n_relevant if rprec else None)
    return RetrievalEvaluation(
        per_query=per_query.sort("query_id", "metric"),
        evaluated_query_ids=evaluated,
        excluded_query_ids=excluded,
        conventions=conventions,
        aliases=aliases,
        tied_queries={evaluated[q]: int(straddling[q]) for q in np.flatnonzero(straddling)},
    )


def score_ranking(
    ranking: JudgedRanking, measures: Sequence[Measure], query_ids: Sequence[str], aliases: dict[str, str]
) -> pl.DataFrame:
    """The long per-query table (query_id, metric, value) of ``measures`` on a ranking whose rows
    are ``query_ids``; an alias takes its canonical measure's values."""
    computed = {str(m): _measure_values(m, ranking) for m in measures if str(m) not in aliases}
    ids = pl.Series("query_id", list(query_ids), dtype=pl.String)
    tables = [
        pl.DataFrame(
            {
                "query_id": ids,
                "metric": pl.repeat(str(measure), ids.len(), dtype=pl.String, eager=True),
                "value": computed[aliases.get(str(measure), str(measure))],
            },
            schema=PER_QUERY_SCHEMA,
        )
        for measure in measures
    ]
    return pl.concat(tables) if tables else pl.DataFrame(schema=PER_QUERY_SCHEMA)


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
    # Equal pairs have equal keys: only a frame with a repeated key needs the exact (string) check.
    keys = np.sort(pair_keys(frame["query_id"].hash().to_numpy(), frame["doc_id"].hash().to_numpy()))
    if not (keys[1:] == keys[:-1]).any():
        return
    duplicated = frame.filter(frame.select("query_id", "doc_id").is_duplicated())
    if duplicated.height:
        first = duplicated.row(0, named=True)
        raise ValueError(
            f"{frame_name} has {duplicated.height} rows sharing a (query_id, doc_id) pair, "
            f"e.g. query_id={first['query_id']!r}, doc_id={first['doc_id']!r}; "
            "keep one row per pair"
        )


def _measure_values(measure: Measure, ranking: JudgedRanking) -> np.ndarray:
    # A query without relevant qrels (evaluated under queries: with_qrels) divides by R = 0 or
    # IDCG = 0; trec_eval scores it 0 on every measure, Judged@k needs no relevant document.
    with np.errstate(divide="ignore", invalid="ignore"):
        values = _unclipped_values(measure, ranking)
    if measure.name != "Judged":
        values = np.where(ranking.n_relevant > 0, values, 0.0)
    # Every measure lies in [0, 1]; tie-aware expected values are sums of fractions, whose
    # rounding can pass 1 by an ulp (11 tied documents, 7 relevant: Recall@11 = 1 + 2e-16).
    return np.clip(values, 0.0, 1.0)


def _unclipped_values(measure: Measure, ranking: JudgedRanking) -> np.ndarray:
    if measure.name == "RPrec":
        return r_precision(ranking.relevant, ranking.n_relevant)
    if measure.cutoff is None:  # the uncut MRR reads every retrieved rank
        return reciprocal_rank_at_k(ranking.missed, ranking.width)
    return _CUT_KERNELS[measure.name](ranking, measure.cutoff)


def _query_universe(qrels: pl.DataFrame, query_ids: Sequence[str] | None) -> list[str]:
    if query_ids is None:
        return qrels["query_id"].unique().to_list()
    universe = list(query_ids)
    if len(set(universe)) != len(universe):
        raise ValueError("query_ids has duplicates; give each query once")
    return universe


def _needed_depth(measures: Sequence[Measure], n_relevant: np.ndarray, run: pl.DataFrame) -> int:
    """Deepest rank any measure reads: the largest cutoff, the largest R for RPrec, the whole run
    for the uncut MRR."""
    cutoffs = [m.cutoff for m in measures if m.cutoff is not None]
    depth = max(cutoffs, default=1)
    if any(m.name == "RPrec" for m in measures) and n_relevant.size:
        depth = max(depth, int(n_relevant.max()))
    if any(m.name == "MRR" and m.cutoff is None for m in measures):
        depth = max(depth, run.height)  # bounds every query's rows; the ranking is cut to the longest
    return depth
