"""The normalization ablation: what each normalization mistake costs.

A model's vectors can be L2-normalized at encode time or not, and then compared by dot product,
cosine or (negative squared) euclidean distance: six combinations. Two of them are one
computation: cosine on vectors normalized at encode normalizes unit vectors again, so
``normalized+cosine`` is ``normalized+dot`` (:attr:`Variant.canonical`). That leaves the five
:data:`DISTINCT_VARIANTS`, the baseline ``normalized+dot`` first. Two of the others rank
exactly as the baseline in exact arithmetic and are kept to show it on real vectors:
``raw+cosine`` normalizes at query time with the same function as at encode, so its vectors,
scores and rankings equal the baseline's bit for bit; ``normalized+euclidean`` scores
``-||q - d||^2 = 2 q.d - 2`` on unit vectors, the same order up to float32 rounding of
near-ties. ``raw+dot`` and ``raw+euclidean`` are the mistakes with a price: the first favours
documents with large norms, the second documents whose norm is close to the query's.

:func:`normalization_price` runs all five over the same raw vectors and reports, per variant,
the retrieval metrics and their paired difference from the baseline, and how the rankings moved
(top-10 kept, top-1 changed, length and norm of what is retrieved, length-quintile pick ratios).

Precision: vectors are float32, as stored; normalization is the encoder's own
(:func:`embedpyramid.encode.postprocess`); scores are float32 inner products
(:func:`embedpyramid.retrieval.search.exact_topk`); squared norms are accumulated in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import polars as pl
import pyarrow as pa

from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.measures import Measure
from embedpyramid.encode import postprocess
from embedpyramid.geometry.norms import N_QUINTILES, length_quintiles, vector_norms
from embedpyramid.retrieval.metrics.evaluate import evaluate_run
from embedpyramid.retrieval.search import exact_topk, run_table
from embedpyramid.stats.bootstrap import paired_bootstrap

Similarity = Literal["dot", "cosine", "euclidean"]
SIMILARITIES: tuple[Similarity, ...] = get_args(Similarity)

EUCLIDEAN_CHECK_QUERIES = 32
"""Queries whose retrieved euclidean scores :func:`normalization_price` checks against
literal distances."""


@dataclass(frozen=True)
class Variant:
    """One combination: vectors L2-normalized at encode (``normalized``) or raw, and the
    similarity used to rank them; ``name`` is e.g. ``"normalized+dot"`` or ``"raw+euclidean"``."""

    normalized: bool
    similarity: Similarity

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ValueError(
                f"unknown similarity {self.similarity!r}; allowed: {', '.join(SIMILARITIES)}"
            )

    @property
    def name(self) -> str:
        return f"{'normalized' if self.normalized else 'raw'}+{self.similarity}"

    @property
    def canonical(self) -> Variant:
        """The distinct variant computing the same thing: cosine on vectors normalized at
        encode is their dot product, so ``normalized+cosine`` maps to ``normalized+dot``."""
        if self.normalized and self.similarity == "cosine":
            return Variant(normalized=True, similarity="dot")
        return self


ALL_VARIANTS: tuple[Variant, ...] = tuple(
    Variant(normalized, similarity) for normalized in (True, False) for similarity in SIMILARITIES
)
DISTINCT_VARIANTS: tuple[Variant, ...] = tuple(dict.fromkeys(v.canonical for v in ALL_VARIANTS))
"""``normalized+dot`` (the baseline), ``normalized+euclidean``, ``raw+dot``, ``raw+cosine``,
``raw+euclidean``."""
BASELINE: Variant = DISTINCT_VARIANTS[0]

PRICE_SCHEMA: dict[str, pl.DataType] = {
    "variant": pl.String(),
    "metric": pl.String(),
    "n_queries": pl.Int64(),
    "mean": pl.Float64(),
    "delta": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
}


@dataclass(frozen=True, eq=False)
class NormalizationPrice:
    """The five variants over one model's raw vectors on one dataset.

    - ``runs``: per variant name, the run (``query_id, rank, doc_id, score``) at ``depth``.
    - ``per_query``: columns variant, query_id, metric, value (:func:`evaluate_run` of each run).
    - ``price``: one row per variant x metric (columns of :data:`PRICE_SCHEMA`): the mean over
      the evaluated queries, the mean per-query delta against the baseline and its paired
      interval (:func:`~embedpyramid.stats.paired_bootstrap`'s default, the hybrid: t where half
      the deltas or more tie at 0, bootstrap-t otherwise); the baseline's rows have delta 0 and
      interval [0, 0].
    - ``behaviour``: one row per variant, computed on every query's top ``behaviour_k``:
      ``top_overlap`` = mean |top-k ∩ baseline top-k| / k, ``top1_changed_share``,
      ``mean_retrieved_chars`` (over all retrieved slots), ``corpus_mean_chars``,
      ``mean_retrieved_norm`` (raw document norm) and ``pick_ratio_q1..q5``
      (:func:`pick_ratios`, q1 the shortest length quintile).
    - ``euclidean_check``: per euclidean variant, max |score − (−||q − d||²)| over the
      retrieved documents of the first :data:`EUCLIDEAN_CHECK_QUERIES` queries, the literal
      distance in float64; expect about 1e-7 × (||q||² + ||d||²).
    - ``settings``: everything the numbers depend on.
    """

    runs: dict[str, pa.Table]
    per_query: pl.DataFrame
    price: pl.DataFrame
    behaviour: pl.DataFrame
    euclidean_check: dict[str, float]
    settings: dict[str, Any]


def euclidean_scores(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Dense (n_queries, n_docs) ``-(||q||^2 - 2 q.d + ||d||^2)``, in float64.

    The expansion of the negative squared distance ``-||q - d||^2`` that the ranking uses; a
    reference for small blocks (memory n_queries x n_docs).
    """
    query_sq = vector_norms(queries) ** 2
    doc_sq = vector_norms(docs) ** 2
    cross = queries.astype(np.float64) @ docs.astype(np.float64).T
    return -(query_sq[:, None] - 2.0 * cross + doc_sq[None, :])


def variant_topk(
    raw_queries: np.ndarray,
    raw_docs: np.ndarray,
    variant: Variant,
    k: int,
    *,
    doc_block_size: int = 16384,
    query_block_size: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of every query under one variant, as :func:`exact_topk` returns it.

    Normalized variants first L2-normalize the raw vectors as the encoder does; then

    * dot: ``q.d``;
    * cosine: both sides normalized (again), then ``q.d``;
    * euclidean: ``-(||q||^2 - 2 q.d + ||d||^2)``, searched as the inner product of the
      augmented float32 vectors ``q' = [q, 1]`` and ``d' = [2d, -||d||^2]`` (``= 2 q.d -
      ||d||^2``, the same order for each query), after which ``||q||^2`` (float64) is
      subtracted so the reported score is the exact expansion, rounded to float32.

    Ties break to the smaller document index. The vectors must be finite. The documents are
    normalized (and, for euclidean, augmented) block by block as the search reads them: every
    step is row-wise and the blocks are the search's own, so the scores are those of the whole
    transformed matrix to the last bit, and the search holds the raw matrix and one transformed
    block, never a transformed copy of the corpus.
    """
    normalized = _unit if variant.normalized else _same
    queries = normalized(raw_queries)
    blocks = {"doc_block_size": doc_block_size, "query_block_size": query_block_size, "n_documents": len(raw_docs)}

    def documents(transform):
        return (transform(normalized(raw_docs[start : start + doc_block_size]))
                for start in range(0, len(raw_docs), doc_block_size))

    if variant.similarity == "dot":
        return exact_topk(queries, documents(_same), k, **blocks)
    if variant.similarity == "cosine":
        return exact_topk(_unit(queries), documents(_unit), k, **blocks)
    scores, indices = exact_topk(
        _augmented(queries, scale=1.0, last_column=1.0),
        documents(lambda block: _augmented(block, scale=2.0, last_column=-(vector_norms(block) ** 2))),
        k,
        **blocks,
    )
    return (scores - vector_norms(queries)[:, None] ** 2).astype(np.float32), indices


def pick_ratios(
    variant_labels: np.ndarray, baseline_labels: np.ndarray, n_bins: int = N_QUINTILES
) -> np.ndarray:
    """Per bin b: (share of the variant's retrieved documents in b) / (the baseline's share).

    Labels are the bins (0..n_bins-1, e.g. length quintiles) of every retrieved slot. 1 means
    the variant picks from the bin as often as the baseline; when the baseline never picks from
    a bin the ratio is 1 if the variant does not either (nothing changed) and inf if it does.
    The baseline against itself is exactly 1 in every bin.
    """
    variant_share = np.bincount(np.ravel(variant_labels), minlength=n_bins) / np.size(variant_labels)
    baseline_share = np.bincount(np.ravel(baseline_labels), minlength=n_bins) / np.size(baseline_labels)
    ratios = np.where(variant_share > 0.0, np.inf, 1.0)
    np.divide(variant_share, baseline_share, out=ratios, where=baseline_share > 0.0)
    return ratios


def normalization_price(
    raw_queries: np.ndarray,
    raw_docs: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    doc_chars: np.ndarray,
    qrels: pl.DataFrame,
    measures: Sequence[Measure],
    conventions: MetricConventions,
    *,
    depth: int,
    behaviour_k: int = 10,
    n_resamples: int = 10_000,
    seed: int = 42,
    confidence: float = 0.95,
    doc_block_size: int = 16384,
    query_block_size: int = 1024,
) -> NormalizationPrice:
    """Run the five :data:`DISTINCT_VARIANTS` over raw (unnormalized) vectors and price each.

    Every variant retrieves ``depth`` documents per query (:func:`variant_topk`) and is scored
    with :func:`evaluate_run` over ``query_ids`` under ``conventions``. The per-query deltas
    ``value(variant) - value(baseline)`` of every non-baseline variant and every metric form
    one (evaluated queries x variants·metrics) matrix given to one
    :func:`~embedpyramid.stats.paired_bootstrap` call (``n_resamples``, ``confidence``,
    ``seed``): every variant and metric sees the same resamples. Behaviour statistics use the
    top ``behaviour_k`` of every query, judged or not. ``doc_ids`` are in corpus order (sorted by
    doc_id, as the frozen corpus is), so ties in score go to the smaller doc_id;
    ``doc_chars`` gives each document's length in characters.
    """
    _check_inputs(raw_queries, raw_docs, query_ids, doc_ids, doc_chars, depth, behaviour_k)
    metric_names = [str(measure) for measure in dict.fromkeys(measures)]
    runs: dict[str, pa.Table] = {}
    per_query_tables: list[pl.DataFrame] = []
    top: dict[str, np.ndarray] = {}
    euclidean_check: dict[str, float] = {}
    evaluated: list[str] = []
    for variant in DISTINCT_VARIANTS:
        scores, indices = variant_topk(
            raw_queries, raw_docs, variant, depth,
            doc_block_size=doc_block_size, query_block_size=query_block_size,
        )
        run = run_table(query_ids, doc_ids, scores, indices)
        evaluation = evaluate_run(pl.from_arrow(run), qrels, measures, conventions, query_ids=query_ids)
        evaluated = evaluation.evaluated_query_ids
        runs[variant.name] = run
        per_query_tables.append(
            evaluation.per_query.select(pl.lit(variant.name).alias("variant"), "query_id", "metric", "value")
        )
        top[variant.name] = indices[:, :behaviour_k]
        if variant.similarity == "euclidean":
            euclidean_check[variant.name] = _euclidean_max_error(
                raw_queries, raw_docs, variant, scores, indices
            )
    if not evaluated:
        raise ValueError(
            f"none of the {len(query_ids)} queries has a qrel with relevance >= "
            f"{conventions.relevance_threshold}; there is nothing to price"
        )
    per_query = pl.concat(per_query_tables)
    settings = {
        "baseline": BASELINE.name,
        "variants": [variant.name for variant in DISTINCT_VARIANTS],
        "depth": depth,
        "behaviour_k": behaviour_k,
        "measures": metric_names,
        "conventions": conventions.as_dict(),
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "ci_method": "paired hybrid interval (t where half the deltas tie at 0, bootstrap-t otherwise), resampling queries",
        "n_queries": len(query_ids),
        "n_evaluated_queries": len(evaluated),
        "n_documents": len(doc_ids),
        "dim": int(raw_docs.shape[1]),
        "doc_block_size": doc_block_size,
        "query_block_size": query_block_size,
        "length_quintiles": "by character-length rank, ties by corpus position: floor(5 rank / n)",
        "euclidean_check_queries": min(EUCLIDEAN_CHECK_QUERIES, len(query_ids)),
    }
    return NormalizationPrice(
        runs=runs,
        per_query=per_query,
        price=_price_table(
            per_query, metric_names, n_resamples=n_resamples, seed=seed, confidence=confidence
        ),
        behaviour=_behaviour_table(top, raw_docs, np.asarray(doc_chars)),
        euclidean_check=euclidean_check,
        settings=settings,
    )


def _unit(vectors: np.ndarray) -> np.ndarray:
    return postprocess(vectors, dimension=None, normalize=True, name="normalization ablation")


def _same(vectors: np.ndarray) -> np.ndarray:
    return vectors


def _augmented(vectors: np.ndarray, *, scale: float, last_column: float | np.ndarray) -> np.ndarray:
    """float32 ``[scale * v, last_column]`` in one allocation (scaling by 2 is exact)."""
    augmented = np.empty((vectors.shape[0], vectors.shape[1] + 1), np.float32)
    np.multiply(vectors, scale, out=augmented[:, :-1], casting="same_kind")
    augmented[:, -1] = last_column
    return augmented


def _check_inputs(
    raw_queries: np.ndarray,
    raw_docs: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    doc_chars: np.ndarray,
    depth: int,
    behaviour_k: int,
) -> None:
    if raw_queries.ndim != 2 or raw_docs.ndim != 2 or raw_queries.shape[1] != raw_docs.shape[1]:
        raise ValueError(
            f"query vectors {raw_queries.shape} and document vectors {raw_docs.shape} must be 2-D "
            "and share a dimension"
        )
    counts = {
        "query_ids": (len(query_ids), raw_queries.shape[0], "query vectors"),
        "doc_ids": (len(doc_ids), raw_docs.shape[0], "document vectors"),
        "doc_chars": (len(doc_chars), raw_docs.shape[0], "document vectors"),
    }
    for name, (given, expected, rows) in counts.items():
        if given != expected:
            raise ValueError(f"{name} has {given} entries for {expected} {rows}; give one per row")
    for name, vectors in (("query", raw_queries), ("document", raw_docs)):
        bad = np.flatnonzero(~np.isfinite(vector_norms(vectors)))
        if bad.size:
            raise ValueError(
                f"{bad.size} {name} vectors hold NaN or inf (first at row {bad[0]}); the "
                "blocking vector checks should stop them before the normalization ablation"
            )
    if not 1 <= behaviour_k <= depth:
        raise ValueError(f"behaviour_k must lie in 1..depth ({depth}); got {behaviour_k}")


def _euclidean_max_error(
    raw_queries: np.ndarray, raw_docs: np.ndarray, variant: Variant, scores: np.ndarray, indices: np.ndarray
) -> float:
    """Max |score - literal -||q - d||^2| over the first queries' retrieved documents."""
    n = min(EUCLIDEAN_CHECK_QUERIES, raw_queries.shape[0])
    queries, docs = raw_queries[:n], raw_docs[indices[:n].ravel()]
    if variant.normalized:  # row-wise, so normalizing the block equals normalizing everything
        queries, docs = _unit(queries), _unit(docs)
    docs = docs.reshape(n, indices.shape[1], -1).astype(np.float64)
    literal = -((queries.astype(np.float64)[:, None, :] - docs) ** 2).sum(axis=-1)
    return float(np.abs(scores[:n] - literal).max(initial=0.0))


def _metric_matrix(per_query: pl.DataFrame, variant: str, metric_names: list[str]) -> np.ndarray:
    """(evaluated queries sorted by id) x metrics values of one variant."""
    wide = (
        per_query.filter(pl.col("variant") == variant)
        .pivot(on="metric", index="query_id", values="value")
        .sort("query_id")
    )
    return wide.select(metric_names).to_numpy()


def _price_table(
    per_query: pl.DataFrame, metric_names: list[str], *, n_resamples: int, seed: int, confidence: float
) -> pl.DataFrame:
    values = {v.name: _metric_matrix(per_query, v.name, metric_names) for v in DISTINCT_VARIANTS}
    baseline = values[BASELINE.name]
    others = [v.name for v in DISTINCT_VARIANTS[1:]]
    boot = paired_bootstrap(
        np.hstack([values[name] - baseline for name in others]),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    zeros = np.zeros(len(metric_names))
    names = [BASELINE.name, *others]
    return pl.DataFrame(
        {
            "variant": np.repeat(names, len(metric_names)),
            "metric": metric_names * len(names),
            "n_queries": np.full(len(names) * len(metric_names), baseline.shape[0]),
            "mean": np.concatenate([values[name].mean(axis=0) for name in names]),
            "delta": np.concatenate([zeros, boot.mean]),
            "ci_low": np.concatenate([zeros, boot.ci_low]),
            "ci_high": np.concatenate([zeros, boot.ci_high]),
        },
        schema=PRICE_SCHEMA,
    )


def _behaviour_table(top: dict[str, np.ndarray], raw_docs: np.ndarray, doc_chars: np.ndarray) -> pl.DataFrame:
    quintiles = length_quintiles(doc_chars)
    doc_norms = vector_norms(raw_docs)
    baseline = top[BASELINE.name]
    rows = []
    for variant in DISTINCT_VARIANTS:
        picked = top[variant.name]
        shared = (picked[:, :, None] == baseline[:, None, :]).sum(axis=(1, 2))
        ratios = pick_ratios(quintiles[picked], quintiles[baseline])
        rows.append(
            {
                "variant": variant.name,
                "normalized": variant.normalized,
                "similarity": variant.similarity,
                "top_k": picked.shape[1],
                "top_overlap": float(shared.mean() / picked.shape[1]),
                "top1_changed_share": float(np.mean(picked[:, 0] != baseline[:, 0])),
                "mean_retrieved_chars": float(doc_chars[picked].mean()),
                "corpus_mean_chars": float(doc_chars.mean()),
                "mean_retrieved_norm": float(doc_norms[picked].mean()),
                **{f"pick_ratio_q{b + 1}": float(ratio) for b, ratio in enumerate(ratios)},
            }
        )
    return pl.DataFrame(rows)
