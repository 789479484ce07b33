"""One dataset's score per model on its confirmatory measure, and the same scores over bootstrap
resamples of its items — what the transfer analysis ranks.

Three sources, one interface (``observed`` and ``resampled``):

* :class:`QueryMeanScores` — a measure that is a mean over queries (nDCG@10, Recall@1, …), from
  per-query values in the long format. A resample draws the queries with replacement (or whole
  groups of queries, the cluster bootstrap, when the dataset names a ``group_column``) and
  recomputes every model's mean on the same draw: ``mean* = Σ_u c_u S_u / Σ_u c_u n_u`` over
  units ``u`` drawn ``c_u`` times, with ``S_u`` the unit's value sum and ``n_u`` its size
  (Davison & Hinkley 1997, §3.8) — the draws of :func:`embedpyramid.stats.paired_bootstrap`.
* :class:`CorrelationScores` — a measure computed over all items at once, such as STS
  Spearman's ρ between each model's similarity and the human score; a resample draws item
  indices and recomputes the correlation on them (ties, including repeated draws, get mid-ranks).
* :class:`PublishedScores` — published numbers standing in for a public dataset that is not on
  disk: no items, so nothing to resample (``resampled`` is None).

The draws of a dataset depend only on its number of units and its seed, never on the models, so
adding a model leaves every other model's resampled scores unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
from scipy.stats import pearsonr, rankdata, spearmanr

from embedpyramid.stats.bootstrap import bootstrap_counts, bootstrap_indices
from embedpyramid.stats.units import resampling_units, single_blas_thread

Role = Literal["public", "own"]


def _per_item_matrix(per_item: pl.DataFrame, *, dataset: str, metric: str, system: str) -> tuple[tuple[str, ...], list[str], np.ndarray]:
    """(models, item ids, (n_items, n_models) values) of one dataset, system and metric; every
    model must have a value for every item (the rankings compare models on the same items)."""
    rows = per_item.filter((pl.col("dataset") == dataset) & (pl.col("system") == system) & (pl.col("metric") == metric))
    if rows.is_empty():
        raise ValueError(f"no per-query values for dataset {dataset!r}, system {system!r}, metric {metric!r}")
    duplicated = rows.group_by("model", "query_id").len().filter(pl.col("len") > 1)
    if not duplicated.is_empty():
        first = duplicated.row(0, named=True)
        raise ValueError(f"dataset {dataset!r}: model {first['model']!r} has {first['len']} {metric} values for "
                         f"query {first['query_id']!r}; expected one")
    wide = rows.pivot(on="model", index="query_id", values="value").sort("query_id")
    models = tuple(sorted(c for c in wide.columns if c != "query_id"))
    incomplete = {model: wide[model].null_count() for model in models if wide[model].null_count()}
    if incomplete:
        raise ValueError(
            f"dataset {dataset!r}, {metric}: models lack queries the others have ({incomplete}); "
            "rankings compare models on the same queries: re-evaluate them on the same frozen dataset"
        )
    values = wide.select(models).to_numpy().astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"dataset {dataset!r}, {metric}: non-finite per-query values")
    return models, wide["query_id"].to_list(), values


@dataclass(frozen=True, eq=False)
class QueryMeanScores:
    """Mean per-query value of each model; resampled by query, or by group when ``groups`` is set."""

    dataset: str
    metric: str
    role: Role
    models: tuple[str, ...]
    item_ids: tuple[str, ...]
    values: np.ndarray
    groups: np.ndarray | None = None
    source: str = "per-query"

    @classmethod
    def from_per_query(cls, per_query: pl.DataFrame, *, dataset: str, metric: str, role: Role, system: str = "exact",
                       groups: Mapping[str, str] | None = None) -> QueryMeanScores:
        """From the long table ``dataset, model, system, query_id, metric, value``; ``groups`` maps
        query ids to a resampling group (the dataset's ``group_column``)."""
        models, ids, values = _per_item_matrix(per_query, dataset=dataset, metric=metric, system=system)
        labels = None
        if groups is not None:
            missing = [q for q in ids if q not in groups]
            if missing:
                raise ValueError(f"dataset {dataset!r}: {len(missing)} queries have no group (first: {missing[0]!r})")
            labels = np.array([str(groups[q]) for q in ids])
        return cls(dataset, metric, role, models, tuple(ids), values, labels)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def observed(self) -> np.ndarray:
        return self.values.mean(axis=0)

    @property
    def resampling(self) -> str:
        return "query" if self.groups is None else "group"

    def resampled(self, n_resamples: int, seed: int) -> np.ndarray:
        """(n_resamples, n_models) means over resampled units (queries or groups)."""
        units = resampling_units(self.values, self.groups)
        totals = np.hstack([units.sums, units.sizes[:, None]])
        means = np.empty((n_resamples, len(self.models)))
        start = 0
        with single_blas_thread():
            for counts in bootstrap_counts(units.n_units, n_resamples=n_resamples, seed=seed):
                weighted = counts @ totals
                means[start:start + counts.shape[0]] = weighted[:, :-1] / weighted[:, -1:]
                start += counts.shape[0]
        return means


@dataclass(frozen=True, eq=False)
class CorrelationScores:
    """Correlation of each model's per-item similarity with a gold score (STS): Spearman's ρ or
    Pearson's r over all items; resampled by item."""

    dataset: str
    metric: Literal["Spearman", "Pearson"]
    role: Role
    models: tuple[str, ...]
    item_ids: tuple[str, ...]
    values: np.ndarray
    gold: np.ndarray
    source: str = "per-item correlation"
    resampling: str = "item"

    @classmethod
    def from_per_item(cls, per_item: pl.DataFrame, gold: Mapping[str, float], *, dataset: str, similarity: str,
                      metric: Literal["Spearman", "Pearson"], role: Role, system: str = "exact") -> CorrelationScores:
        """From long-format per-item similarities (``metric`` column = ``similarity``, item id in
        ``query_id``) and the gold score of every item."""
        models, ids, values = _per_item_matrix(per_item, dataset=dataset, metric=similarity, system=system)
        missing = [item for item in ids if item not in gold]
        if missing:
            raise ValueError(f"dataset {dataset!r}: {len(missing)} items have no gold score (first: {missing[0]!r})")
        return cls(dataset, metric, role, models, tuple(ids), values, np.array([gold[i] for i in ids], dtype=np.float64))

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def observed(self) -> np.ndarray:
        correlate = spearmanr if self.metric == "Spearman" else pearsonr
        return np.array([correlate(self.values[:, j], self.gold).statistic for j in range(len(self.models))])

    def resampled(self, n_resamples: int, seed: int) -> np.ndarray:
        """(n_resamples, n_models) correlations over resampled items."""
        result = np.empty((n_resamples, len(self.models)))
        start = 0
        for indices in bootstrap_indices(self.n_items, n_resamples=n_resamples, seed=seed):
            gold = self.gold[indices]
            if self.metric == "Spearman":
                gold = rankdata(gold, axis=1)
            for j in range(len(self.models)):
                values = self.values[indices, j]
                if self.metric == "Spearman":
                    values = rankdata(values, axis=1)
                result[start:start + indices.shape[0], j] = _row_pearson(values, gold)
            start += indices.shape[0]
        return result


def _row_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (x * y).sum(axis=1) / np.where(denominator > 0, denominator, 1.0), np.nan)


@dataclass(frozen=True, eq=False)
class PublishedScores:
    """Published numbers standing in for a public dataset that is not on disk; not resampled."""

    dataset: str
    metric: str
    models: tuple[str, ...]
    values: np.ndarray
    role: Role = "public"
    source: str = "published"
    resampling: str = "none"

    @property
    def n_items(self) -> None:
        return None

    @property
    def observed(self) -> np.ndarray:
        return self.values

    def resampled(self, n_resamples: int, seed: int) -> None:
        return None


DatasetScores = QueryMeanScores | CorrelationScores | PublishedScores
