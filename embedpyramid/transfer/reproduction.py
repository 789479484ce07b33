"""Reproduce published numbers first: measured vs published, per (model, dataset, measure).

A pipeline is trusted on the user's data only after it reproduces published numbers on the same
model and data. For each published score the measured value is the mean over the dataset's
evaluated queries of the per-query values (the same number the leaderboard shows), and under one
of two rules, recorded with the check (``rule``):

* ``tolerance`` — a deterministic protocol (retrieval, STS, pair classification, bitext,
  reranking), which gives the same number on the same vectors every time::

      difference = measured − published        pass  ⇔  |difference| <= tolerance

* ``noise`` — a protocol that draws at random (MTEB's classification training samples, k-means
  starts and clustering draws, the multi-label training samples; the project's clustering seeds),
  whose published number is one draw of many: the spread of its main score over seeds is measured
  beside it (the family's ``noise`` setting: :func:`embedpyramid.tasks.common.protocol_noise`), and::

      pass  ⇔  |difference| <= spread_multiple × spread

  A stochastic result without a measured spread is ``not measured``, never a pass.

A measure the run did not compute (a cutoff outside the protocol's ``k_values``) or a model not
evaluated on the dataset is ``not measured``, never a pass. A failure names the usual causes of a
mismatch, each with the value this run used, so the reader can see which one differs from the
published setup: the document text (title + " " + text, BEIR's and MTEB's convention), the
card's query and document prompts (e5-style models need ``query: `` / ``passage: ``), the
relevance threshold, self-hits, and how ties in score are ordered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import polars as pl

from embedpyramid.transfer.references import PublishedScore

Status = Literal["pass", "fail", "not measured"]

REPRODUCTION_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "model_key": pl.String(), "metric": pl.String(),
    "published": pl.Float64(), "measured": pl.Float64(), "difference": pl.Float64(), "tolerance": pl.Float64(),
    "status": pl.String(), "n_items": pl.Int64(), "source": pl.String(), "origin": pl.String(), "message": pl.String(),
    "rule": pl.String(), "spread": pl.Float64(), "spread_multiple": pl.Float64(), "noise_runs": pl.Int64(),
}
"""``tolerance`` is the bound the difference was held to under either rule: the published
tolerance, or ``spread_multiple × spread`` (``spread`` measured over ``noise_runs`` runs or seeds)."""

# A difference this far inside the tolerance still passes: |0.6451 - 0.6446| is 0.000500000000000056
# in binary floating point, and a tolerance of 0.0005 means 0.0005.
_FLOAT_SLACK = 1e-12


@dataclass(frozen=True)
class ReproductionContext:
    """The settings behind a measured value that most often explain a mismatch."""

    query_prompt: str
    document_prompt: str
    titled_documents: int | None
    n_documents: int | None
    conventions: Mapping[str, Any]

    unit = "queries"

    def causes(self) -> str:
        titles = ("unknown for this dataset" if self.titled_documents is None else
                  f"title + \" \" + text for {self.titled_documents} of {self.n_documents} documents, the text alone "
                  "for the rest")
        self_hits = "dropped" if self.conventions.get("drop_self_hits") else "kept (drop_self_hits: false)"
        return (
            f"document text ({titles}); query prompt {self.query_prompt!r} and document prompt "
            f"{self.document_prompt!r} of the card; relevance threshold {self.conventions.get('relevance_threshold')}; "
            f"self-hits {self_hits}; ties in score: {self.conventions.get('ties', 'broken by doc_id, ascending')}"
        )


@dataclass(frozen=True)
class ReproductionCheck:
    dataset: str
    model: str
    model_key: str
    metric: str
    published: float
    measured: float | None
    difference: float | None
    tolerance: float | None
    status: Status
    n_items: int
    source: str
    origin: str
    message: str
    rule: str = "tolerance"
    spread: float | None = None
    spread_multiple: float | None = None
    noise_runs: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True)
class Noise:
    """The spread of a stochastic protocol's statistic over ``runs`` runs or seeds, as the result
    recorded it; ``over`` says what they are (in the message: "over 5 <over>")."""

    spread: float
    runs: int
    over: str


@dataclass(frozen=True)
class TaskReproductionContext:
    """What a task family's measured whole-set statistic depends on that most often explains a
    mismatch with a published number: the protocol (and the mteb version it follows), the card's
    similarity and prompt, the split/subset read and the family's protocol settings."""

    task: str
    protocol: str
    similarity: str
    prompt: str
    split: str | None
    subset: str | None
    settings: Mapping[str, Any]
    unit: str = "items"

    def causes(self) -> str:
        version = f" (mteb {self.settings.get('mteb_version')})" if self.protocol == "mteb" else ""
        family = {
            "sts": "main score cosine Spearman; gold as published",
            "pair_classification": ("max AP over similarity, cosine, dot, euclidean, manhattan, thresholds on the "
                                    "scored split" if self.protocol == "mteb" else "threshold chosen on dev"),
            "classification": f"classifier settings {self.settings.get('mteb', {})} (MTEB tasks often set "
                              "samples_per_label 16 or 32); training design: " + str(self.settings.get("design", "")),
            "clustering": f"bootstrap settings {self.settings.get('mteb', {})}" if self.protocol == "mteb" else
                          f"k-means seeds {self.settings.get('seeds')}",
            "bitext": ("duplicate target rows kept, weighted F1" if self.protocol == "mteb" else
                       "distinct target texts, macro F1"),
            "reranking": f"candidates cut at {max(self.settings.get('mteb', {}).get('k_values') or [0])}, conventions "
                         f"{self.settings.get('conventions')}; the query and document prompts of the card",
            "multilabel_classification": f"kNN settings {self.settings.get('mteb', {})} (MTEB tasks often set "
                                         "samples_per_label)",
        }.get(self.task, "")
        if self.task == "clustering" and self.protocol == "mteb":
            family += "; the task version's items (sets flattened or deduplicated, stratified subsample)"
        return (f"protocol {self.protocol}{version}; the card's similarity {self.similarity}; the prompt "
                f"{self.prompt!r} of the card; split {self.split}, subset {self.subset or 'all'}; the item order and "
                f"text ids (MTEB's draws follow the row order); {family}")


def check_reproduction(reference: PublishedScore, measured: float | None, *, model_key: str, n_items: int,
                       context: ReproductionContext | TaskReproductionContext,
                       why_not: str | None = None, noise: Noise | None = None) -> ReproductionCheck:
    """Compare one measured value (None when not measured, ``why_not`` saying why when known) with
    its published score: within its ``tolerance``, or, for a score with a ``spread_multiple``,
    within that multiple of ``noise``'s spread (see the module docstring)."""
    where = f"{reference.model} on {reference.dataset}, {reference.metric}"
    rule = "tolerance" if reference.spread_multiple is None else "noise"
    if measured is not None and rule == "noise" and noise is None:
        measured, why_not = None, ("the result records no spread over seeds: set the family's noise_seeds (mteb) or "
                                   "two seeds or more (project) and evaluate again")
    bound = reference.tolerance if rule == "tolerance" else None
    if rule == "noise" and noise is not None and reference.spread_multiple is not None:
        bound = reference.spread_multiple * noise.spread
    noise_fields = ({} if rule == "tolerance" else
                    {"rule": rule, "spread_multiple": reference.spread_multiple,
                     "spread": None if noise is None else noise.spread, "noise_runs": None if noise is None else noise.runs})
    if measured is None:
        reason = why_not or "add the measure to the protocol, or evaluate the model on the dataset"
        return ReproductionCheck(
            reference.dataset, reference.model, model_key, reference.metric, reference.value, None, None,
            bound, "not measured", 0, reference.source, reference.origin,
            f"{where}: not measured by this run ({reason}); "
            f"published {reference.value:.4f} ({reference.source})", **noise_fields,
        )
    assert bound is not None
    difference = measured - reference.value
    passed = abs(difference) <= bound + _FLOAT_SLACK
    summary = (f"{where}: measured {measured:.4f} over {n_items} {context.unit}, published {reference.value:.4f} "
               f"({reference.source}), difference {difference:+.4f}")
    within = (f"±{bound:g}" if rule == "tolerance" or noise is None else
              f"±{bound:.4g} ({reference.spread_multiple:g} × the spread {noise.spread:.4g} over {noise.runs} "
              f"{noise.over})")
    message = (f"{summary} within {within}: reproduced" if passed else
               f"{summary} outside {within}: not reproduced. Usual causes, with this run's values: "
               f"{context.causes()}")
    return ReproductionCheck(
        reference.dataset, reference.model, model_key, reference.metric, reference.value, measured, difference,
        bound, "pass" if passed else "fail", n_items, reference.source, reference.origin, message, **noise_fields,
    )


def reproduce(references: list[PublishedScore], per_query: pl.DataFrame, *, model: str, model_key: str,
              context: ReproductionContext, system: str = "exact") -> list[ReproductionCheck]:
    """Check every published score of card ``model`` against its per-query values (long format,
    ``model`` = the partition key ``model_key``)."""
    rows = per_query.filter((pl.col("model") == model_key) & (pl.col("system") == system))
    checks = []
    for reference in references:
        if reference.model != model:
            continue
        values = rows.filter((pl.col("dataset") == reference.dataset) & (pl.col("metric") == reference.metric))["value"]
        measured = float(values.mean()) if values.len() else None
        checks.append(check_reproduction(reference, measured, model_key=model_key, n_items=values.len(), context=context))
    return checks


def reproduction_frame(checks: list[ReproductionCheck]) -> pl.DataFrame:
    return pl.DataFrame([asdict(check) for check in checks], schema=REPRODUCTION_SCHEMA)
