"""Pyramid L1, geometry: is the vector space sane?

Per (model, dataset) this module describes the vectors a model returned, before any ranking
metric: the norm distribution of queries and documents, how document norm follows text length,
a length-quintile table, anisotropy (the mean cosine of random document pairs) and the spread of
document norms against the margin that separates a query's top-1 from its top-10 (how much an
unnormalized dot product could reorder the top of a ranking).

Conventions shared by every function here:

* norms are L2 norms accumulated in float64, whatever the vector dtype;
* a vector with a NaN or infinite component is a *NaN vector*: counted, and left out of every
  statistic (its norm is not a number); a zero vector is counted and kept (its norm, 0, is real)
  but has no direction, so it is left out of anisotropy;
* standard deviations are population standard deviations (ddof = 0): the corpus is the whole
  population being described, not a sample of one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from embedpyramid.encode import postprocess
from embedpyramid.retrieval.search import exact_topk

N_QUINTILES = 5
"""Length bins of :func:`length_quintiles`; tables number them 1 (shortest) to 5 (longest)."""

# Rows (and anisotropy pairs) per float64 block: a float32 corpus is never copied whole.
_BLOCK_ROWS = 65_536


@dataclass(frozen=True, eq=False)
class GeometryReport:
    """The L1 geometry of one model on one dataset (see the module docstring for conventions).

    - ``dim``: vector dimension.
    - ``query_norms``, ``doc_norms``: :func:`norm_summary` of the query and document vectors.
    - ``length_correlations``: :func:`length_norm_correlations` of document norm against
      characters and tokens; ``token_cap`` is the model's maximum sequence length the token
      counts were capped at (None: counts taken as given, uncapped).
    - ``quintiles``: :func:`quintile_table` of the documents.
    - ``anisotropy``: :func:`anisotropy` of the documents over ``anisotropy_pairs`` pairs drawn
      with ``seed``.
    - ``spread_margin``: :func:`spread_vs_margin` of document norms against the cosine top
      scores of every query.
    """

    dim: int
    query_norms: dict[str, float]
    doc_norms: dict[str, float]
    length_correlations: dict[str, float]
    token_cap: int | None
    quintiles: pl.DataFrame
    anisotropy: float
    anisotropy_pairs: int
    seed: int
    spread_margin: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict; non-finite numbers (JSON has none) become None."""
        return {
            "dim": self.dim,
            "query_norms": _json_numbers(self.query_norms),
            "doc_norms": _json_numbers(self.doc_norms),
            "length_correlations": _json_numbers(self.length_correlations),
            "token_cap": self.token_cap,
            "quintiles": [_json_numbers(row) for row in self.quintiles.to_dicts()],
            "anisotropy": _json_number(self.anisotropy),
            "anisotropy_pairs": self.anisotropy_pairs,
            "seed": self.seed,
            "spread_margin": _json_numbers(self.spread_margin),
        }


def vector_norms(vectors: np.ndarray) -> np.ndarray:
    """L2 norm of every row, ``sqrt(sum_j v_j^2)`` accumulated in float64.

    A row with a NaN component has a NaN norm and a row with an infinite one an infinite norm,
    so ``np.isfinite(norms)`` tells the sound rows.
    """
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be a 2-D (rows, dim) matrix; got shape {vectors.shape}")
    norms = np.empty(vectors.shape[0], np.float64)
    for start in range(0, vectors.shape[0], _BLOCK_ROWS):
        block = vectors[start : start + _BLOCK_ROWS].astype(np.float64)
        norms[start : start + block.shape[0]] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return norms


def norm_summary(vectors: np.ndarray) -> dict[str, float]:
    """Distribution of the L2 norms of the rows of ``vectors``.

    Keys: ``n`` (rows), ``nan_vectors`` (rows with a NaN or infinite component, excluded from
    every statistic below), ``zero_vectors`` (all-zero rows, included), ``mean``, ``sd``
    (population, ddof = 0), ``min``, ``max`` and ``max_over_min`` = max / min (inf when a zero
    vector makes min 0). The statistics are NaN when no row is finite.
    """
    norms = vector_norms(vectors)
    finite = norms[np.isfinite(norms)]
    summary: dict[str, float] = {
        "n": int(norms.size),
        "nan_vectors": int(norms.size - finite.size),
        "zero_vectors": int(np.count_nonzero(finite == 0.0)),
    }
    if finite.size == 0:
        return summary | dict.fromkeys(("mean", "sd", "min", "max", "max_over_min"), math.nan)
    smallest, largest = float(finite.min()), float(finite.max())
    return summary | {
        "mean": float(finite.mean()),
        "sd": float(finite.std()),
        "min": smallest,
        "max": largest,
        "max_over_min": largest / smallest if smallest > 0.0 else math.inf,
    }


def length_norm_correlations(
    norms: np.ndarray, chars: np.ndarray, tokens: np.ndarray
) -> dict[str, float]:
    """Pearson and Spearman correlation of document norm with character and token length.

    Keys ``pearson_chars``, ``spearman_chars``, ``pearson_tokens``, ``spearman_tokens``
    (``scipy.stats.pearsonr`` / ``spearmanr``, Spearman with average ranks for ties) and ``n``,
    the documents used: those with a finite norm. A correlation is NaN when fewer than two
    documents remain or either side is constant. ``tokens`` should be what the model reads,
    i.e. capped at its maximum sequence length (:func:`geometry_report` does the capping).
    """
    norms, chars, tokens = (np.asarray(a, dtype=np.float64) for a in (norms, chars, tokens))
    _require_same_length(norms=norms, chars=chars, tokens=tokens)
    finite = np.isfinite(norms)
    norms, chars, tokens = norms[finite], chars[finite], tokens[finite]
    result: dict[str, float] = {}
    for name, lengths in (("chars", chars), ("tokens", tokens)):
        result[f"pearson_{name}"] = _correlation(stats.pearsonr, norms, lengths)
        result[f"spearman_{name}"] = _correlation(stats.spearmanr, norms, lengths)
    return result | {"n": int(norms.size)}


def length_quintiles(chars: np.ndarray) -> np.ndarray:
    """Length quintile label 0 (shortest) .. 4 (longest) of every document, by rank.

    Documents are ranked by character length, ties by position (a stable sort), and the
    document of rank ``r`` (0-based) among ``n`` gets ``floor(5 r / n)``: the five bins hold
    ``n / 5`` documents each, rounded so that sizes differ by at most one. Documents of equal
    length may therefore straddle a bin edge, so adjacent bins can share a boundary length.
    """
    chars = np.asarray(chars)
    if chars.ndim != 1:
        raise ValueError(f"chars must be 1-D, one length per document; got shape {chars.shape}")
    n = chars.shape[0]
    labels = np.empty(n, np.int64)
    labels[np.argsort(chars, kind="stable")] = np.arange(n, dtype=np.int64) * N_QUINTILES // n
    return labels


def quintile_table(chars: np.ndarray, tokens: np.ndarray, norms: np.ndarray) -> pl.DataFrame:
    """Documents by length quintile (:func:`length_quintiles`), one row per quintile 1..5.

    Columns: ``quintile`` (1 = shortest fifth; label + 1), ``chars_min``, ``chars_max``, ``n``,
    ``mean_tokens`` and ``mean_norm`` (over the quintile's documents with a finite norm). All
    five rows are present; an empty quintile (fewer than five documents) has ``n`` = 0 and
    nulls elsewhere.
    """
    chars, tokens, norms = np.asarray(chars), np.asarray(tokens), np.asarray(norms, np.float64)
    _require_same_length(chars=chars, tokens=tokens, norms=norms)
    documents = pl.DataFrame(
        {"quintile": length_quintiles(chars) + 1, "chars": chars, "tokens": tokens, "norm": norms}
    )
    by_quintile = documents.group_by("quintile").agg(
        chars_min=pl.col("chars").min(),
        chars_max=pl.col("chars").max(),
        n=pl.len().cast(pl.Int64),
        mean_tokens=pl.col("tokens").cast(pl.Float64).mean(),
        mean_norm=pl.col("norm").filter(pl.col("norm").is_finite()).mean(),
    )
    every_quintile = pl.DataFrame({"quintile": np.arange(1, N_QUINTILES + 1, dtype=np.int64)})
    return (
        every_quintile.join(by_quintile, on="quintile", how="left")
        .with_columns(pl.col("n").fill_null(0))
        .sort("quintile")
    )


def anisotropy(vectors: np.ndarray, *, n_pairs: int = 10_000, seed: int = 42) -> float:
    """Mean cosine of ``n_pairs`` random pairs of distinct documents.

    With ``rng = np.random.default_rng(seed)`` over the m usable rows (finite and non-zero),
    pair p is ``(i_p, j_p)`` with ``i_p`` uniform on 0..m-1 and ``j_p`` uniform on the other
    m - 1 rows (pairs are drawn with replacement); the result is
    ``mean_p u_i . u_j`` with ``u = v / ||v||`` (float64). 0 for an isotropic space, near 1 when
    every vector points the same way (Ethayarajh 2019). NaN when fewer than two rows are usable.
    """
    if n_pairs < 1:
        raise ValueError(f"n_pairs must be at least 1; got {n_pairs}")
    norms = vector_norms(vectors)
    usable = np.flatnonzero(np.isfinite(norms) & (norms > 0.0))
    if usable.size < 2:
        return math.nan
    rng = np.random.default_rng(seed)
    first = rng.integers(0, usable.size, n_pairs)
    second = rng.integers(0, usable.size - 1, n_pairs)
    second += second >= first
    left, right = usable[first], usable[second]
    total = 0.0
    for start in range(0, n_pairs, _BLOCK_ROWS):
        i, j = left[start : start + _BLOCK_ROWS], right[start : start + _BLOCK_ROWS]
        dots = np.einsum("ij,ij->i", vectors[i].astype(np.float64), vectors[j].astype(np.float64))
        total += float((dots / (norms[i] * norms[j])).sum())
    return total / n_pairs


def spread_vs_margin(
    doc_norms: np.ndarray, top_scores: np.ndarray, *, margin_rank: int = 10
) -> dict[str, float]:
    """Document norm spread against the cosine margin at the top of the ranking.

    * ``spread`` = sd / mean of the finite document norms (population sd);
    * ``margin`` = mean over queries of ``(s_1 - s_r) / s_1``, with ``s`` a query's cosine
      scores in descending order and r = ``margin_rank`` (10: top-1 against top-10); queries
      whose top-1 cosine is not positive have no meaningful relative margin and are left out
      (``margin_queries`` counts those kept);
    * ``ratio`` = spread / margin.

    An unnormalized dot product scores ``||q|| ||d|| cos(q, d)``: multiplying cosines by
    document norms that vary by a relative ``spread`` reorders candidates whose cosines differ
    by a relative margin smaller than that. A ratio above 1 predicts that dot without
    normalization reshuffles the top ``margin_rank``; far below 1, it barely matters.

    ``top_scores`` is the (n_queries, >= margin_rank) score matrix of the cosine baseline
    (normalized vectors, dot product), each row descending.
    """
    scores = np.asarray(top_scores, dtype=np.float64)
    if margin_rank < 2:
        raise ValueError(f"margin_rank must be at least 2; got {margin_rank}")
    if scores.ndim != 2 or scores.shape[1] < margin_rank:
        raise ValueError(
            f"top_scores must be (n_queries, >= {margin_rank}) cosine scores; got shape "
            f"{scores.shape}; search at least {margin_rank} deep or lower margin_rank"
        )
    norms = np.asarray(doc_norms, dtype=np.float64)
    norms = norms[np.isfinite(norms)]
    spread = float(norms.std() / norms.mean()) if norms.size and norms.mean() > 0 else math.nan
    top1, top_r = scores[:, 0], scores[:, margin_rank - 1]
    positive = top1 > 0.0
    relative_margins = (top1[positive] - top_r[positive]) / top1[positive]
    margin = float(relative_margins.mean()) if positive.any() else math.nan
    if margin > 0.0:
        ratio = spread / margin
    else:
        ratio = math.inf if margin == 0.0 and spread > 0.0 else math.nan
    return {
        "spread": spread,
        "margin": margin,
        "ratio": ratio,
        "margin_rank": margin_rank,
        "margin_queries": int(positive.sum()),
    }


def geometry_report(
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray,
    doc_chars: np.ndarray,
    doc_tokens: np.ndarray,
    *,
    max_tokens: int | None = None,
    n_pairs: int = 10_000,
    seed: int = 42,
    margin_rank: int = 10,
    cosine_top_scores: np.ndarray | None = None,
) -> GeometryReport:
    """The L1 geometry of one model on one dataset, from its query and document vectors.

    ``doc_tokens`` are per-document token counts; with ``max_tokens`` (the model's maximum
    sequence length) they are capped at it, since the model never reads past it, and the cap
    is recorded as ``token_cap``. ``cosine_top_scores`` is the cosine baseline's
    (n_queries, >= margin_rank) top scores when the caller already has them (the
    ``normalized+dot`` run of :func:`embedpyramid.geometry.normalization.normalization_price`);
    otherwise the top ``margin_rank`` cosines are searched here over the finite vectors.
    """
    if query_vectors.ndim != 2 or doc_vectors.ndim != 2 or query_vectors.shape[1] != doc_vectors.shape[1]:
        raise ValueError(
            f"query vectors {query_vectors.shape} and document vectors {doc_vectors.shape} "
            "must be 2-D and share a dimension"
        )
    tokens = np.asarray(doc_tokens)
    _require_same_length(doc_vectors=doc_vectors, doc_chars=np.asarray(doc_chars), doc_tokens=tokens)
    if max_tokens is not None:
        tokens = np.minimum(tokens, max_tokens)
    doc_norms = vector_norms(doc_vectors)
    if cosine_top_scores is None:
        cosine_top_scores, _ = exact_topk(
            _unit_rows(query_vectors), _unit_rows(doc_vectors), margin_rank
        )
    return GeometryReport(
        dim=int(doc_vectors.shape[1]),
        query_norms=norm_summary(query_vectors),
        doc_norms=norm_summary(doc_vectors),
        length_correlations=length_norm_correlations(doc_norms, doc_chars, tokens),
        token_cap=max_tokens,
        quintiles=quintile_table(doc_chars, tokens, doc_norms),
        anisotropy=anisotropy(doc_vectors, n_pairs=n_pairs, seed=seed),
        anisotropy_pairs=n_pairs,
        seed=seed,
        spread_margin=spread_vs_margin(doc_norms, cosine_top_scores, margin_rank=margin_rank),
    )


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """The finite rows, L2-normalized exactly as at encode time (zero rows stay zero)."""
    finite = vectors[np.isfinite(vector_norms(vectors))]
    return postprocess(finite, dimension=None, normalize=True, name="geometry")


def _correlation(
    statistic: Callable[[np.ndarray, np.ndarray], Any], x: np.ndarray, y: np.ndarray
) -> float:
    if x.size < 2 or np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        return math.nan
    return float(statistic(x, y).statistic)


def _require_same_length(**arrays: np.ndarray) -> None:
    lengths = {name: array.shape[0] for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        given = ", ".join(f"{name}: {length}" for name, length in lengths.items())
        raise ValueError(f"expected one row per document in each input; got {given}")


def _json_number(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _json_numbers(values: dict[str, Any]) -> dict[str, Any]:
    return {key: _json_number(value) for key, value in values.items()}
