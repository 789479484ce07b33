"""Published scores on dataset entries (``datasets.yaml``): typed by hand under ``reference:`` or
imported from a folder of MTEB result files under ``mteb_results:``.

A reference names the model by its card in ``models.yaml``, the measure by this project's name
(``nDCG@10``, ``Recall@1``, ``MRR@10``, ``Spearman``, …), the published value, the tolerance within
which a measured value reproduces it, and where the number was published.
"""

from __future__ import annotations

import math

from pydantic import Field, field_validator

from embedpyramid.config.base import Strict
from embedpyramid.retrieval.metrics.measures import parse_measure

CORRELATION_METRICS: tuple[str, ...] = ("Spearman", "Pearson")
"""Dataset-level measures that are not retrieval measures: the STS correlations of model
similarity with human scores (Spearman's ρ, Pearson's r)."""


def canonical_metric(name: str) -> str:
    """The project's canonical name of a measure: a retrieval measure (``ndcg@10`` → ``nDCG@10``)
    or one of :data:`CORRELATION_METRICS` (case-insensitive); raises ValueError otherwise."""
    for correlation in CORRELATION_METRICS:
        if name.strip().lower() == correlation.lower():
            return correlation
    try:
        return str(parse_measure(name))
    except ValueError:
        raise ValueError(
            f"unknown measure {name!r}: use a retrieval measure such as nDCG@10, Recall@1, MRR@10, MAP@100, "
            f"P@5, Hit@10 or RPrec, or one of {', '.join(CORRELATION_METRICS)}"
        ) from None


class ReferenceScore(Strict):
    """One published score: ``{model: minilm-l6, metric: nDCG@10, value: 0.6451, tolerance: 0.0005,
    source: "MTEB results, all-MiniLM-L6-v2, SciFact test"}``."""

    model: str = Field(min_length=1)
    metric: str
    value: float
    tolerance: float = Field(ge=0)
    source: str = Field(min_length=1)

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        return canonical_metric(value)

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"value must be a finite number, got {value}")
        return value


class MtebResultsImport(Strict):
    """Published scores read from a folder in the ``embeddings-benchmark/results`` layout
    (``<org>__<model>/<revision>/<Task>.json`` beside ``model_meta.json``).

    ``models`` maps card names to MTEB model names (``sentence-transformers/all-MiniLM-L6-v2``),
    optionally pinned to a revision folder with ``@<revision>`` (needed when the folder holds
    several). ``metrics`` lists the project measures to import; by default only the task's main
    score. Every imported score gets ``tolerance``.
    """

    path: str
    task: str = Field(min_length=1)
    split: str = "test"
    subset: str = "default"
    models: dict[str, str] = Field(min_length=1)
    metrics: list[str] | None = None
    tolerance: float = Field(ge=0)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [canonical_metric(name) for name in value]
