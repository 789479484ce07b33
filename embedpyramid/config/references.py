"""Published scores on dataset entries (``datasets.yaml``): typed by hand under ``reference:`` or
imported from a folder of MTEB result files under ``mteb_results:``.

A reference names the model by its card in ``models.yaml``, the measure by this project's name
(``nDCG@10``, ``Recall@1``, ``MRR@10``, ``Spearman``, …), the published value, the tolerance within
which a measured value reproduces it, and where the number was published.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from embedpyramid.config.base import Strict
from embedpyramid.config.measures import parse_measure

CORRELATION_METRICS: tuple[str, ...] = ("Spearman", "Pearson")
"""Dataset-level measures that are not retrieval measures: the STS correlations of model
similarity with human scores (Spearman's ρ, Pearson's r)."""


TASK_METRICS: tuple[str, ...] = ("Accuracy", "F1", "AP", "MaxAP", "MaxF1", "MaxAccuracy", "V-measure", "AMI", "ARI")
"""Whole-set statistics of the L2 task families that a published score can name (see
:data:`TASK_REFERENCE_METRICS` for which family and protocol computes each)."""

TASK_REFERENCE_METRICS: dict[tuple[str, str], dict[str, tuple[str, str]]] = {
    ("sts", "mteb"): {"Spearman": ("cosine", "spearman"), "Pearson": ("cosine", "pearson")},
    ("sts", "project"): {"Spearman": ("", "spearman"), "Pearson": ("", "pearson")},
    ("pair_classification", "mteb"): {"MaxAP": ("max", "ap"), "MaxF1": ("max", "f1"),
                                      "MaxAccuracy": ("max", "accuracy")},
    ("pair_classification", "project"): {"AP": ("", "ap"), "F1": ("", "f1"), "Accuracy": ("", "accuracy")},
    ("classification", "mteb"): {"Accuracy": ("logreg", "accuracy"), "F1": ("logreg", "f1")},
    ("clustering", "mteb"): {"V-measure": ("minibatch_kmeans", "v_measure"), "AMI": ("minibatch_kmeans", "ami")},
    ("clustering", "project"): {"V-measure": ("kmeans", "v_measure"), "AMI": ("kmeans", "ami"),
                                "ARI": ("kmeans", "ari")},
    ("bitext", "mteb"): {"F1": ("nearest", "f1"), "Accuracy": ("nearest", "accuracy")},
    ("bitext", "project"): {"F1": ("nearest", "f1"), "Accuracy": ("nearest", "accuracy")},
}
"""(task family, protocol) → published measure → the (system, metric) of the family's summary
that is the whole-set statistic it is checked against (system ``""``: the family's one system,
named by the card's similarity). STS Spearman; pair-classification max AP (MTEB) or AP at the dev
threshold (project); classification accuracy (MTEB's logistic regression; the project protocol's
kNN/probe numbers are not published anywhere and are refused); clustering V-measure; bitext F1
(weighted under MTEB, macro under the project protocol)."""

FIXED_SPLITS: dict[tuple[str, str], tuple[str, ...]] = {
    ("clustering", "mteb"): ("all", "test"),
    ("clustering", "project"): ("all", "test"),
    ("classification", "mteb"): ("test", "cv"),
}
"""Splits a family's summary can hold whatever the data: a clustering is scored on every item
(its one split, ``all``, is the published ``test``), MTEB classification on its eval split or,
without one, by cross-validation (``cv``)."""


def task_reference_problem(task: str, protocol: str, metric: str, reference_protocol: str | None,
                           split: str | None) -> str | None:
    """Why a published score cannot be checked on a dataset of ``task`` run under ``protocol``, or
    None: an unknown (family, protocol, metric) combination, a reference published under another
    protocol, or a split the family never reports."""
    if reference_protocol is not None and reference_protocol != protocol:
        return (f"the score was published under protocol {reference_protocol!r} but the dataset is evaluated under "
                f"{protocol!r}: set {task}.protocol: {reference_protocol} on the dataset (or drop the reference)")
    table = TASK_REFERENCE_METRICS.get((task, protocol))
    if table is None:
        other = "mteb" if protocol == "project" else "project"
        return (f"no published {task} score can be checked under protocol {protocol!r} (its numbers follow no "
                f"published protocol); set {task}.protocol: {other}")
    if metric not in table:
        return (f"{metric} is not a statistic the {task} family computes under protocol {protocol!r}; "
                f"allowed: {', '.join(table)}")
    splits = FIXED_SPLITS.get((task, protocol))
    if split is not None and splits is not None and split not in splits:
        return f"split {split!r} is not one the {task} family reports under protocol {protocol!r}; allowed: {', '.join(splits)}"
    return None


def canonical_metric(name: str) -> str:
    """The project's canonical name of a measure: a retrieval measure (``ndcg@10`` → ``nDCG@10``),
    one of :data:`CORRELATION_METRICS` or of :data:`TASK_METRICS` (case-insensitive); raises
    ValueError otherwise."""
    for known in (*CORRELATION_METRICS, *TASK_METRICS):
        if name.strip().lower() == known.lower():
            return known
    try:
        return str(parse_measure(name))
    except ValueError:
        raise ValueError(
            f"unknown measure {name!r}: use a retrieval measure such as nDCG@10, Recall@1, MRR@10, MAP@100, "
            f"P@5, Hit@10 or RPrec, or one of {', '.join((*CORRELATION_METRICS, *TASK_METRICS))}"
        ) from None


class ReferenceScore(Strict):
    """One published score: ``{model: minilm-l6, metric: nDCG@10, value: 0.6451, tolerance: 0.0005,
    source: "MTEB results, all-MiniLM-L6-v2, SciFact test"}``.

    On a task dataset, ``protocol`` names the protocol the number was published under (an MTEB
    score: ``mteb``; default: the dataset's own), ``split`` the split it was measured on (default:
    the family's one split, else ``test``) and ``subset`` the language pair of a bitext score
    (default: the only one). A reference the dataset cannot check is refused when the config loads."""

    model: str = Field(min_length=1)
    metric: str
    value: float
    tolerance: float = Field(ge=0)
    source: str = Field(min_length=1)
    protocol: Literal["project", "mteb"] | None = None
    split: str | None = None
    subset: str | None = None

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
