"""Fusion of ranked runs: reciprocal rank fusion and weighted score fusion (pyramid L5).

Every input run is first put in the project's order (score descending, then doc_id) and cut to
its top ``depth`` candidates per query (the candidate depth, recorded with the numbers), keeping
every document tied in score with the ``depth``-th. The fused run is cut the same way to
``output_depth`` per query (with the documents tied with the last one), ordered by the fused
score rounded to float32, ties to the smaller doc_id.

Ties are ties: no fused score depends on document ids. Tied input scores share their mean rank
(the fractional rank, :meth:`~embedpyramid.systems.runs.CodedRun.mid_ranks`: two documents tied
at ranks 2 and 3 both get 2.5), and a cut never splits a tie group, so renaming or permuting
the documents leaves every fused score — and, with the metrics' tie-aware ``expected``
convention, every L5 number — unchanged. (A stored input run that was itself cut by doc_id at
its own depth may have dropped documents tied with its last one; no fusion can recover those.)

Reciprocal rank fusion (Cormack, Clarke and Büttcher, "Reciprocal rank fusion outperforms
Condorcet and individual rank learning methods", SIGIR 2009), with the mid rank of tied scores
(the convention of rank statistics with ties, e.g. Kendall, "Rank Correlation Methods", 1948,
ch. 3, and of ``scipy.stats.rankdata(method="average")``):

    RRF(q, d) = Σ_i 1 / (k + r_i(q, d)),   k = 60 by default,
    r_i(q, d) = the mean of the 1-based positions of the candidates tied with d in input i

A document missing from input i's candidates for q contributes nothing for that input.

Weighted score fusion: each input's candidate scores are normalized per query, then

    W(q, d) = Σ_i w_i · s̃_i(q, d)

with ``minmax``: s̃ = (s − min) / (max − min) over the query's candidates (every candidate 1
when they all tie), and ``zscore``: s̃ = (s − mean) / sd with the population sd (every
candidate 0 when they all tie). A document missing from input i's candidates takes input i's
lowest normalized value for q — 0 under min-max, the lowest candidate's z under z-score — so it
never beats a document that input did retrieve (it may tie the last one). An input with no
candidate for q contributes nothing to q.

:func:`choose_weight` picks the first input's weight w (the second's 1 − w) from a grid by the
mean of a metric on a dev split; ties go to the smallest w.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from embedpyramid.systems.runs import CodedRun, group_starts, rank_within_query, ranked

Normalization = Literal["minmax", "zscore"]


def candidates(run: CodedRun, depth: int) -> CodedRun:
    """A ranked run's first ``depth`` rows per query, and every later row tied in score with the
    ``depth``-th (so which documents are candidates never depends on their ids)."""
    if depth < 1:
        raise ValueError(f"candidate depth must be positive, got {depth}")
    position = rank_within_query(run.query)
    keep = position < depth
    past = np.flatnonzero(~keep)
    keep[past] = run.score[past] == run.score[past - position[past] + depth - 1]
    return CodedRun(run.query[keep], run.doc[keep], run.score[keep])


def reciprocal_rank_fusion(
    runs: Sequence[CodedRun], *, k: float = 60.0, depth: int = 100, output_depth: int = 100
) -> CodedRun:
    """RRF of ranked runs (see the module docstring): ``depth`` candidates per input and query."""
    if k < 0:
        raise ValueError(f"the RRF constant k must be >= 0, got {k}")
    _check_inputs(runs)
    cut = [candidates(run, depth) for run in runs]
    contributions = [1.0 / (k + run.mid_ranks()) for run in cut]
    return _combine(cut, contributions, [np.zeros(0)] * len(cut), output_depth)


def normalized_scores(run: CodedRun, normalization: Normalization) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-query normalized scores of a ranked run (float64, row order), with the queries present
    and each one's value for a missing document (see the module docstring)."""
    if len(run) == 0:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0)
    starts = group_starts(run.query)
    counts = np.diff(starts, append=len(run))
    scores = run.score.astype(np.float64)
    if normalization == "minmax":
        # Ranked rows put each query's maximum first and its minimum last.
        high, low = scores[starts], scores[starts + counts - 1]
        spread = np.repeat(high - low, counts)
        values = np.divide(scores - np.repeat(low, counts), spread, out=np.ones_like(scores), where=spread > 0)
        missing = np.zeros(starts.size)
    elif normalization == "zscore":
        mean = np.add.reduceat(scores, starts) / counts
        centred = scores - np.repeat(mean, counts)
        sd = np.sqrt(np.add.reduceat(centred * centred, starts) / counts)
        per_row_sd = np.repeat(sd, counts)
        values = np.divide(centred, per_row_sd, out=np.zeros_like(scores), where=per_row_sd > 0)
        missing = np.minimum.reduceat(values, starts)
    else:
        raise ValueError(f"unknown normalization {normalization!r}; allowed: minmax, zscore")
    return values, run.query[starts], missing


def weighted_score_fusion(
    runs: Sequence[CodedRun], weights: Sequence[float], *, normalization: Normalization = "minmax",
    depth: int = 100, output_depth: int = 100,
) -> CodedRun:
    """Weighted sum of per-query normalized scores (see the module docstring)."""
    _check_inputs(runs)
    if len(weights) != len(runs) or any(w < 0 for w in weights):
        raise ValueError(f"give one non-negative weight per input: {len(runs)} inputs, weights {list(weights)}")
    cut = [candidates(run, depth) for run in runs]
    contributions, fills = [], []
    for run, weight in zip(cut, weights, strict=True):
        values, queries, missing = normalized_scores(run, normalization)
        fill = np.zeros(int(run.query.max(initial=-1)) + 1)
        fill[queries] = weight * missing
        contributions.append(weight * values)
        fills.append(fill)
    return _combine(cut, contributions, fills, output_depth)


def _check_inputs(runs: Sequence[CodedRun]) -> None:
    if len(runs) < 2:
        raise ValueError(f"fusion needs at least two runs, got {len(runs)}")


def _combine(
    runs: Sequence[CodedRun], contributions: Sequence[np.ndarray], fills: Sequence[np.ndarray], output_depth: int
) -> CodedRun:
    """Sum each document's contributions over the inputs; a document missing from input i adds
    ``fills[i][query]`` (absent entries: 0)."""
    queries = np.concatenate([run.query for run in runs])
    docs = np.concatenate([run.doc for run in runs])
    n_queries = int(queries.max(initial=-1)) + 1
    total_fill = np.zeros(n_queries)
    own_fill = []
    for run, fill in zip(runs, fills, strict=True):
        padded = np.zeros(n_queries)
        padded[: fill.size] = fill
        total_fill += padded
        own_fill.append(padded[run.query])
    # A present document's value replaces the fill it would otherwise get for that input.
    values = np.concatenate([c - f for c, f in zip(contributions, own_fill, strict=True)])
    stride = max(int(docs.max(initial=-1)) + 1, 1)
    keys = queries * stride + docs
    order = np.argsort(keys, kind="stable")  # timsort: the inputs arrive grouped by query
    keys = keys[order]
    starts = group_starts(keys)
    fused = np.add.reduceat(values[order], starts) if keys.size else np.zeros(0)
    fused_queries = keys[starts] // stride
    return candidates(ranked(fused_queries, keys[starts] % stride, fused + total_fill[fused_queries]), output_depth)


@dataclass(frozen=True)
class WeightChoice:
    """The chosen first-input weight and the dev sweep it came from (``weight``, ``value``)."""

    weight: float
    metric: str
    sweep: pl.DataFrame


def choose_weight(
    dev_runs: Sequence[CodedRun], grid: Sequence[float], *, metric: str, score: Callable[[CodedRun], float],
    normalization: Normalization, depth: int, output_depth: int,
) -> WeightChoice:
    """The first input's weight w from ``grid`` (the second gets 1 − w) with the highest
    ``score`` (the mean of ``metric`` over the dev queries) of the fused dev run; ties go to the
    smallest w."""
    if len(dev_runs) != 2:
        raise ValueError(f"a weight sweep fuses exactly two runs, got {len(dev_runs)}")
    if not grid:
        raise ValueError("the weight grid is empty")
    values = [
        score(weighted_score_fusion(dev_runs, (w, 1.0 - w), normalization=normalization, depth=depth,
                                    output_depth=output_depth))
        for w in grid
    ]
    best = int(np.argmax(values))
    return WeightChoice(float(grid[best]), metric, pl.DataFrame({"weight": list(grid), "value": values},
                                                                 schema={"weight": pl.Float64, "value": pl.Float64}))
