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
from embedpyramid.config.tasks import MTEB_K_VALUES, reranking_mteb_measures

CORRELATION_METRICS: tuple[str, ...] = ("Spearman", "Pearson")
"""Dataset-level measures that are not retrieval measures: the STS correlations of model
similarity with human scores (Spearman's ρ, Pearson's r)."""


TASK_METRICS: tuple[str, ...] = ("Accuracy", "F1", "AP", "MaxAP", "MaxF1", "MaxAccuracy", "V-measure", "AMI", "ARI",
                                  "LRAP", "Hamming")
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
    ("reranking", "mteb"): {measure: ("", measure) for measure in reranking_mteb_measures(MTEB_K_VALUES)},
    ("multilabel_classification", "mteb"): {"Accuracy": ("knn", "accuracy"), "F1": ("knn", "f1"),
                                            "LRAP": ("knn", "lrap"), "Hamming": ("knn", "hamming")},
}
"""(task family, protocol) → published measure → the (system, metric) of the family's summary
that is the whole-set statistic it is checked against (system ``""``: the family's one system,
named by the card's similarity). STS Spearman; pair-classification max AP (MTEB) or AP at the dev
threshold (project); classification accuracy (MTEB's logistic regression; the project protocol's
kNN/probe numbers are not published anywhere and are refused); clustering V-measure; bitext F1
(weighted under MTEB, macro under the project protocol); reranking any measure MTEB reports (MAP@1000 its
main score; the project protocol's conventions are its own, published nowhere); multi-label
classification MTEB's subset accuracy, macro F1, LRAP and Hamming score."""

STOCHASTIC_PROTOCOLS: frozenset[tuple[str, str]] = frozenset({
    ("classification", "mteb"), ("clustering", "mteb"), ("clustering", "project"),
    ("multilabel_classification", "mteb"),
})
"""(task family, protocol) pairs whose number depends on random draws: MTEB's classification
training samples, k-means starts and clustering draws, the multi-label training samples. A
published score of one is judged against the spread its seeds alone produce
(``spread_multiple``); every other family's protocol is deterministic and keeps a fixed
``tolerance``."""


def reproduction_rule(task: str, protocol: str | None) -> str:
    """``noise`` for a stochastic (family, protocol) (:data:`STOCHASTIC_PROTOCOLS`), ``tolerance``
    otherwise (retrieval: ``task`` = ``retrieval``)."""
    return "noise" if (task, protocol) in STOCHASTIC_PROTOCOLS else "tolerance"


def rule_problem(task: str, protocol: str | None, tolerance: float | None, spread_multiple: float | None) -> str | None:
    """Why a published score's pass rule does not fit its family, or None: a stochastic protocol
    states ``spread_multiple`` (a tolerance would be a guess at its noise), a deterministic one
    ``tolerance``."""
    if reproduction_rule(task, protocol) == "noise":
        if spread_multiple is None or tolerance is not None:
            return (f"{task} under protocol {protocol!r} draws at random, so a published score passes within "
                    "spread_multiple × the spread its noise seeds measure: set spread_multiple (e.g. 2)"
                    + (" instead of tolerance" if tolerance is not None else ""))
        return None
    if tolerance is None or spread_multiple is not None:
        return (f"{task}" + (f" under protocol {protocol!r}" if protocol else "") + " is deterministic, so a "
                "published score passes within a fixed tolerance: set tolerance (e.g. 0.0005)"
                + (" instead of spread_multiple" if spread_multiple is not None else ""))
    return None

FIXED_SPLITS: dict[tuple[str, str], tuple[str, ...]] = {
    ("clustering", "mteb"): ("all", "test"),
    ("clustering", "project"): ("all", "test"),
    ("classification", "mteb"): ("test", "cv"),
}
"""Splits a family's summary can hold whatever the data: a clustering is scored on every item
(its one split, ``all``, is the published ``test``), MTEB classification on its eval split or,
without one, by cross-validation (``cv``)."""


def reference_split(split: str | None) -> str:
    """The split a published score names, for telling two scores apart: no split means the
    dataset's evaluated split, ``test`` unless it says otherwise (a clustering's ``all`` is MTEB's
    ``test``)."""
    return "test" if split in (None, "all") else split


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
    the family's one split, else ``test``) and ``subset`` the subset it was published for: a bitext
    language pair (default: the only one), or the subset the dataset reads (a multilingual STS or
    classification task). A deterministic protocol's score passes within ``tolerance``; a
    stochastic one's (:data:`STOCHASTIC_PROTOCOLS`) within ``spread_multiple`` times the spread its
    noise seeds measure. A reference the dataset cannot check is refused when the config loads."""

    model: str = Field(min_length=1)
    metric: str
    value: float
    tolerance: float | None = Field(None, ge=0)
    spread_multiple: float | None = Field(None, gt=0)
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
    score. Every imported score gets ``tolerance`` (a deterministic family) or ``spread_multiple``
    (a stochastic one), as :class:`ReferenceScore`.
    """

    path: str
    task: str = Field(min_length=1)
    split: str = "test"
    subset: str = "default"
    models: dict[str, str] = Field(min_length=1)
    metrics: list[str] | None = None
    tolerance: float | None = Field(None, ge=0)
    spread_multiple: float | None = Field(None, gt=0)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [canonical_metric(name) for name in value]
