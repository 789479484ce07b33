"""Does the public ranking of the models hold on the user's own data?

Each dataset ranks its models on its confirmatory measure (:mod:`embedpyramid.transfer.scores`).
For every public × own pair of datasets, over the models evaluated on both:

* Kendall's τ_b and Spearman's ρ between the two rankings (:mod:`embedpyramid.transfer.ranking`),
  each with a bootstrap percentile interval: every dataset's items are resampled within that
  dataset (``n_resamples`` draws seeded by :func:`dataset_seed`), the models re-ranked on each
  side, and the statistic recomputed per resample pair (resample b of the public dataset with
  resample b of the own one). Resamples where a side ties every model give no correlation; they
  are counted (``n_undefined``) and left out of the interval.
* the probability that the public winner is also the own-data winner: the share of resamples
  (top-set ties split, see :func:`~embedpyramid.transfer.ranking.same_winner`);
* every pair of models with its order on each side and the share of resamples in which the
  order flips (the ``flips`` table; a pair is ``flipped`` when the observed orders are strictly
  opposite).

Published numbers stand in for a public dataset that is not on disk: that side is not resampled
(``public_resampled`` false), so the intervals show the own data's sampling variation only.
With fewer than three models a rank correlation is not informative (two models are ±1 by
construction): τ_b, ρ and their intervals are left empty, the note says so, and the pairwise
agreement and flips are reported.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from embedpyramid.config.resampling import percentile_rank
from embedpyramid.config.transfer import TransferSettings
from embedpyramid.transfer.ranking import (
    MIN_MODELS_FOR_CORRELATION,
    kendall_tau_b,
    mid_ranks,
    pairwise_agreement,
    pairwise_orders,
    same_winner,
    spearman_rho,
    top_sets,
)
from embedpyramid.transfer.scores import DatasetScores

RANKING_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "role": pl.String(), "metric": pl.String(), "source": pl.String(),
    "model": pl.String(), "score": pl.Float64(), "rank": pl.Float64(), "n_items": pl.Int64(),
    "resampling": pl.String(), "seed": pl.Int64(),
}

PAIR_SCHEMA: dict[str, pl.DataType] = {
    "public_dataset": pl.String(), "own_dataset": pl.String(), "public_metric": pl.String(),
    "own_metric": pl.String(), "public_source": pl.String(), "n_models": pl.Int64(), "models": pl.List(pl.String()),
    "kendall_tau_b": pl.Float64(), "tau_b_ci_low": pl.Float64(), "tau_b_ci_high": pl.Float64(),
    "spearman": pl.Float64(), "spearman_ci_low": pl.Float64(), "spearman_ci_high": pl.Float64(),
    "n_undefined": pl.Int64(), "pairwise_agreement": pl.Float64(), "n_flips": pl.Int64(),
    "public_winner": pl.List(pl.String()), "own_winner": pl.List(pl.String()), "p_same_winner": pl.Float64(),
    "informative": pl.Boolean(), "public_resampled": pl.Boolean(), "own_resampled": pl.Boolean(),
    "note": pl.String(), "n_resamples": pl.Int64(), "confidence": pl.Float64(),
}

FLIP_SCHEMA: dict[str, pl.DataType] = {
    "public_dataset": pl.String(), "own_dataset": pl.String(), "model_a": pl.String(), "model_b": pl.String(),
    "public_a": pl.Float64(), "public_b": pl.Float64(), "own_a": pl.Float64(), "own_b": pl.Float64(),
    "public_order": pl.String(), "own_order": pl.String(), "flipped": pl.Boolean(), "share_flipped": pl.Float64(),
}

_ORDER_NAMES = {1: "a > b", 0: "tie", -1: "a < b"}


def dataset_seed(seed: int, dataset: str) -> int:
    """The seed of one dataset's resamples: a function of the base seed and the dataset's name
    only, so a dataset is resampled the same way in every pair and whatever else is configured."""
    name = int.from_bytes(hashlib.sha256(dataset.encode("utf-8")).digest()[:8], "big")
    return int(np.random.SeedSequence([seed, name]).generate_state(1)[0])


@dataclass(frozen=True, eq=False)
class TransferResult:
    """The rankings per dataset, one row per public × own pair, the model-pair orders, and the
    settings they were computed under."""

    rankings: pl.DataFrame
    pairs: pl.DataFrame
    flips: pl.DataFrame
    settings: dict[str, Any]


def transfer_analysis(datasets: Sequence[DatasetScores], settings: TransferSettings | None = None) -> TransferResult:
    """Rank models on each dataset and compare every public ranking with every own ranking."""
    settings = settings or TransferSettings()
    names = [d.dataset for d in datasets]
    if len(set(names)) != len(names):
        raise ValueError(f"each dataset may appear once; got {names}")
    for scores in datasets:
        if scores.role == "own" and scores.source == "published":
            raise ValueError(f"dataset {scores.dataset!r}: own data needs per-query values, not published numbers")
    seeds = {d.dataset: dataset_seed(settings.seed, d.dataset) for d in datasets}
    resampled = {d.dataset: d.resampled(settings.n_resamples, seeds[d.dataset]) for d in datasets}
    rankings = pl.concat([_ranking(d, settings, seeds[d.dataset], resampled[d.dataset] is not None) for d in datasets]
                         or [pl.DataFrame(schema=RANKING_SCHEMA)])
    pairs, flips = [], []
    for public, own in itertools.product(*([d for d in datasets if d.role == role] for role in ("public", "own"))):
        pair, pair_flips = _compare(public, own, resampled[public.dataset], resampled[own.dataset], settings)
        pairs.append(pair)
        flips += pair_flips
    return TransferResult(
        rankings=rankings,
        pairs=pl.DataFrame(pairs, schema=PAIR_SCHEMA),
        flips=pl.DataFrame(flips, schema=FLIP_SCHEMA),
        settings={**settings.model_dump(), "dataset_seeds": seeds,
                  "seed_derivation": "SeedSequence([seed, first 8 bytes of sha256(dataset name)])",
                  "method": "percentile bootstrap, datasets resampled independently (queries, groups or items)"},
    )


def _ranking(scores: DatasetScores, settings: TransferSettings, seed: int, is_resampled: bool) -> pl.DataFrame:
    ranks = mid_ranks(pairwise_orders(scores.observed, settings.tie_epsilon))
    return pl.DataFrame(
        {
            "dataset": scores.dataset, "role": scores.role, "metric": scores.metric, "source": scores.source,
            "model": list(scores.models), "score": scores.observed, "rank": ranks, "n_items": scores.n_items,
            "resampling": scores.resampling, "seed": seed if is_resampled else None,
        },
        schema=RANKING_SCHEMA,
    ).sort("rank", "model")


def _interval(values: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    defined = np.sort(values[~np.isnan(values)])
    try:
        k = percentile_rank(defined.size, confidence)
    except ValueError:
        return None, None
    return float(defined[k - 1]), float(defined[defined.size - k])


def _compare(public: DatasetScores, own: DatasetScores, public_draws: np.ndarray | None, own_draws: np.ndarray | None,
             settings: TransferSettings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    common = sorted(set(public.models) & set(own.models))
    row: dict[str, Any] = {
        "public_dataset": public.dataset, "own_dataset": own.dataset, "public_metric": public.metric,
        "own_metric": own.metric, "public_source": public.source, "n_models": len(common), "models": common,
        "public_resampled": public_draws is not None, "own_resampled": own_draws is not None,
        "n_resamples": settings.n_resamples, "confidence": settings.confidence, "informative": False,
    }
    if len(common) < 2:
        return {**row, "note": f"{len(common)} model(s) evaluated on both datasets: nothing to compare"}, []
    public_columns = [public.models.index(m) for m in common]
    own_columns = [own.models.index(m) for m in common]
    x, y = public.observed[public_columns], own.observed[own_columns]
    n_draws = settings.n_resamples
    x_draws = np.broadcast_to(x, (n_draws, len(common))) if public_draws is None else public_draws[:, public_columns]
    y_draws = np.broadcast_to(y, (n_draws, len(common))) if own_draws is None else own_draws[:, own_columns]
    eps = settings.tie_epsilon
    ox, oy = pairwise_orders(x, eps), pairwise_orders(y, eps)
    ox_draws, oy_draws = pairwise_orders(x_draws, eps), pairwise_orders(y_draws, eps)
    notes = []
    if public_draws is None:
        notes.append(f"{public.dataset}: published numbers, not resampled; intervals show the own data's variation only")
    if len(common) < MIN_MODELS_FOR_CORRELATION:
        notes.append(f"{len(common)} models: a rank correlation is not informative (±1 by construction); "
                     "pairwise agreement only")
    else:
        taus, rhos = kendall_tau_b(ox_draws, oy_draws), spearman_rho(ox_draws, oy_draws)
        tau_low, tau_high = _interval(taus, settings.confidence)
        rho_low, rho_high = _interval(rhos, settings.confidence)
        row.update(
            kendall_tau_b=_number(kendall_tau_b(ox, oy)), tau_b_ci_low=tau_low, tau_b_ci_high=tau_high,
            spearman=_number(spearman_rho(ox, oy)), spearman_ci_low=rho_low, spearman_ci_high=rho_high,
            n_undefined=int(np.isnan(taus).sum()), informative=True,
        )
        if row["kendall_tau_b"] is None:
            notes.append("one ranking ties every model: no rank correlation")
    flipped_draws = (ox_draws * oy_draws) < 0
    flips = []
    for i, j in itertools.combinations(range(len(common)), 2):
        flips.append({
            "public_dataset": public.dataset, "own_dataset": own.dataset, "model_a": common[i], "model_b": common[j],
            "public_a": float(x[i]), "public_b": float(x[j]), "own_a": float(y[i]), "own_b": float(y[j]),
            "public_order": _ORDER_NAMES[int(ox[i, j])], "own_order": _ORDER_NAMES[int(oy[i, j])],
            "flipped": bool(ox[i, j] * oy[i, j] < 0), "share_flipped": float(flipped_draws[:, i, j].mean()),
        })
    row.update(
        pairwise_agreement=float(pairwise_agreement(ox, oy)), n_flips=sum(f["flipped"] for f in flips),
        public_winner=[m for m, top in zip(common, top_sets(x, eps), strict=True) if top],
        own_winner=[m for m, top in zip(common, top_sets(y, eps), strict=True) if top],
        p_same_winner=float(same_winner(x_draws, y_draws, eps).mean()), note="; ".join(notes) or None,
    )
    return row, flips


def _number(value: np.ndarray) -> float | None:
    return None if np.isnan(value) else float(value)
