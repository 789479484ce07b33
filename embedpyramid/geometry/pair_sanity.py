"""Pair sanity, the bottom of the pyramid: do known-similar pairs score above random pairs?

For every dataset with pairs or qrels, the cosines of *known-similar* pairs are set against those
of *random* pairs, and the separation is summarized by the area under the ROC curve,
``AUC = P(cos(similar) > cos(random)) + P(equal) / 2`` — the Mann–Whitney U statistic over
``n_similar · n_random`` (scikit-learn ``roc_auc_score``; Hanley & McNeil 1982). 1 is perfect
separation, 0.5 none: a model near 0.5 does not place related texts closer than unrelated ones,
and no task metric built on its cosines can be trusted. A warning is raised when
``AUC < 0.5 + warn_margin``.

Known-similar pairs: a query and each document judged relevant (relevance at or above the
threshold) for retrieval; the positive pairs for pair classification; each source and its
translation for bitext; for STS the pairs whose human score is at or above the
``sts_quantile`` quantile of the scores (the top quarter by default: STS pairs span the whole
scale, so only the high end is "known similar"). Random pairs: for each known-similar pair,
one distinct pair drawn (seeded) from the same pools — a random query and a random document;
two random texts of the dataset (unordered); a random source and a random target of the same
language pair — and never a known-similar (or, for retrieval, judged) pair nor a text with
itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from sklearn.metrics import roc_auc_score

from embedpyramid.vectors import TextVectors, pair_cosines, unit_vectors

_MAX_DRAW_ROUNDS = 100


@dataclass(frozen=True)
class PairSanitySettings:
    """``seed`` for the random pairs, the warning margin above 0.5, and the STS quantile above
    which a pair counts as known-similar."""

    seed: int = 42
    warn_margin: float = 0.1
    sts_quantile: float = 0.75

    def __post_init__(self) -> None:
        if not 0.0 < self.warn_margin < 0.5:
            raise ValueError(f"warn_margin must lie in (0, 0.5); got {self.warn_margin}")
        if not 0.0 <= self.sts_quantile < 1.0:
            raise ValueError(f"sts_quantile must lie in [0, 1); got {self.sts_quantile}")


@dataclass(frozen=True)
class PairSanity:
    """The AUC of known-similar against random pairs, with what it was computed from."""

    auc: float
    n_similar: int
    n_random: int
    similar_mean: float
    random_mean: float
    warning: str | None
    definition: str
    settings: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"auc": self.auc, "n_similar": self.n_similar, "n_random": self.n_random,
                "similar_mean_cosine": self.similar_mean, "random_mean_cosine": self.random_mean,
                "warning": self.warning, "definition": self.definition, **self.settings}


def separation_auc(similar: np.ndarray, random: np.ndarray, *, warn_margin: float = 0.1) -> tuple[float, str | None]:
    """AUC of ``similar`` scores above ``random`` scores and the warning (None when clear of 0.5)."""
    if similar.size == 0 or random.size == 0:
        raise ValueError(f"pair sanity needs similar and random pairs; got {similar.size} and {random.size}")
    labels = np.concatenate([np.ones(similar.size), np.zeros(random.size)])
    auc = float(roc_auc_score(labels, np.concatenate([similar, random])))
    warning = None
    if auc < 0.5 + warn_margin:
        warning = (f"pair sanity AUC {auc:.3f} is {'below' if auc < 0.5 else 'near'} 0.5: known-similar pairs do not "
                   "score above random pairs; the cosines of this model on this data are not meaningful")
    return auc, warning


def random_pairs(left_pool: np.ndarray, right_pool: np.ndarray, count: int, known: set[tuple[int, int]], *,
                 rng: np.random.Generator, unordered: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``count`` distinct (left, right) index pairs drawn uniformly from the pools, none in
    ``known`` and none pairing an index with itself (the pools may share indices). With
    ``unordered`` a pair is stored smaller index first, so (i, j) and (j, i) are one pair."""
    chosen: dict[tuple[int, int], None] = {}
    for _ in range(_MAX_DRAW_ROUNDS):
        needed = count - len(chosen)
        if needed == 0:
            break
        left = left_pool[rng.integers(len(left_pool), size=2 * needed)]
        right = right_pool[rng.integers(len(right_pool), size=2 * needed)]
        for pair in zip(left.tolist(), right.tolist(), strict=True):
            if unordered:
                pair = (min(pair), max(pair))
            if pair[0] != pair[1] and pair not in known and pair not in chosen:
                chosen[pair] = None
                if len(chosen) == count:
                    break
    if len(chosen) < count:
        raise ValueError(f"could draw only {len(chosen)} of {count} random pairs outside the known pairs; "
                         "the pools are too small")
    drawn = np.array(list(chosen), dtype=np.int64).reshape(-1, 2)
    return drawn[:, 0], drawn[:, 1]


def retrieval_pair_sanity(query_ids: Sequence[str], queries: np.ndarray, doc_ids: Sequence[str],
                          documents: np.ndarray, qrels: pl.DataFrame, settings: PairSanitySettings, *,
                          relevance_threshold: int = 1) -> PairSanity:
    """Queries with their relevant documents against random (query, document) pairs."""
    query_row = {query_id: row for row, query_id in enumerate(query_ids)}
    doc_row = {doc_id: row for row, doc_id in enumerate(doc_ids)}
    judged = qrels.filter(pl.col("query_id").is_in(list(query_row)) & pl.col("doc_id").is_in(list(doc_row)))
    relevant = judged.filter(pl.col("relevance") >= relevance_threshold)
    similar_q = np.array([query_row[q] for q in relevant["query_id"]], np.int64)
    similar_d = np.array([doc_row[d] for d in relevant["doc_id"]], np.int64)
    # Judged pairs of any grade are not drawn as random: they were judged for a reason.
    known = {(query_row[q], doc_row[d]) for q, d in zip(judged["query_id"], judged["doc_id"], strict=True)}
    rng = np.random.default_rng(settings.seed)
    # Queries and documents are separate index spaces: shift documents so no pair is "itself".
    offset = len(query_ids)
    random_q, random_d = random_pairs(np.arange(len(query_ids)), np.arange(len(doc_ids)) + offset, len(similar_q),
                                      {(q, d + offset) for q, d in known}, rng=rng)
    unit_q, unit_d = unit_vectors(queries).astype(np.float64), unit_vectors(documents).astype(np.float64)
    similar = np.einsum("ij,ij->i", unit_q[similar_q], unit_d[similar_d])
    random = np.einsum("ij,ij->i", unit_q[random_q], unit_d[random_d - offset])
    return _result(similar, random, settings,
                   f"query and a document judged relevance >= {relevance_threshold} vs random (query, document)")


def task_pair_sanity(task: str, pairs: pl.DataFrame, vectors: TextVectors, settings: PairSanitySettings) -> PairSanity:
    """Known-similar pairs of an STS, pair-classification or bitext dataset against random pairs
    (see the module docstring for which pairs are known-similar)."""
    if task == "sts":
        cut = float(np.quantile(pairs["gold"].to_numpy(), settings.sts_quantile))
        similar_pairs = pairs.filter(pl.col("gold") >= cut)
        definition = f"STS pairs with gold >= {cut:.4g} (the {settings.sts_quantile:g} quantile) vs random text pairs"
    elif task == "pair_classification":
        similar_pairs = pairs.filter(pl.col("gold") > 0)
        definition = "positive pairs vs random text pairs"
    elif task == "bitext":
        similar_pairs = pairs
        definition = "each source and its translation vs a random source and target of the same language pair"
    else:
        raise ValueError(f"task {task!r} has no pairs; pair sanity covers sts, pair_classification and bitext")
    ids = sorted(set(pairs["text_id_1"]) | set(pairs["text_id_2"]))
    index = {text_id: row for row, text_id in enumerate(ids)}
    # Only the known-similar pairs are kept out of the random draws: in a fully judged STS set
    # (the Lee corpus scores every pair) the random pairs are necessarily judged ones.
    known = {(index[a], index[b]) for a, b in zip(similar_pairs["text_id_1"], similar_pairs["text_id_2"], strict=True)}
    known |= {(b, a) for a, b in known}
    rng = np.random.default_rng(settings.seed)
    similar, random = [], []
    strata = similar_pairs.partition_by("language_pair", maintain_order=True) if task == "bitext" else [similar_pairs]
    for stratum in strata:
        if task == "bitext":
            scope = pairs.filter(pl.col("language_pair") == stratum["language_pair"][0])
            left_pool = np.array(sorted({index[t] for t in scope["text_id_1"]}))
            right_pool = np.array(sorted({index[t] for t in scope["text_id_2"]}))
        else:
            left_pool = right_pool = np.arange(len(ids))
        left, right = random_pairs(left_pool, right_pool, stratum.height, known, rng=rng, unordered=task != "bitext")
        similar.append(pair_cosines(vectors, stratum["text_id_1"].to_list(), stratum["text_id_2"].to_list()))
        random.append(pair_cosines(vectors, [ids[i] for i in left], [ids[i] for i in right]))
    return _result(np.concatenate(similar), np.concatenate(random), settings, definition)


def _result(similar: np.ndarray, random: np.ndarray, settings: PairSanitySettings, definition: str) -> PairSanity:
    auc, warning = separation_auc(similar, random, warn_margin=settings.warn_margin)
    return PairSanity(auc, int(similar.size), int(random.size), float(similar.mean()), float(random.mean()), warning,
                      definition, {"seed": settings.seed, "warn_margin": settings.warn_margin,
                                   "sts_quantile": settings.sts_quantile,
                                   "auc_method": "sklearn roc_auc_score (ties count 1/2)"})
