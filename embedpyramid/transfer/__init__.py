"""Pyramid L3, benchmark transfer: reproduce published numbers first, then ask whether the public
ranking of the models holds on the user's own data.

* ``mteb_results`` — published scores from MTEB result files, metric names mapped onto this
  project's measures; ``references`` — a dataset's published scores as one list;
* ``reproduction`` — measured vs published, pass/fail within a tolerance, and the usual causes
  of a mismatch;
* ``ranking`` — Kendall's τ_b, Spearman's ρ, pairwise orders and winners of two rankings;
  ``scores`` — a dataset's scores per model and their bootstrap resamples; ``analysis`` — every
  public × own pair of datasets;
* ``level`` — the same from a config folder, with the artefacts under ``<data>/transfer``.
"""

from embedpyramid.transfer.analysis import TransferResult, dataset_seed, transfer_analysis
from embedpyramid.transfer.mteb_results import (
    METRIC_TABLE,
    ImportReport,
    MtebImportError,
    MtebScore,
    project_metric,
    read_mteb_results,
    select_scores,
)
from embedpyramid.transfer.ranking import (
    kendall_tau_b,
    mid_ranks,
    pairwise_agreement,
    pairwise_orders,
    same_winner,
    spearman_rho,
)
from embedpyramid.transfer.references import DatasetReferences, PublishedScore, dataset_references
from embedpyramid.transfer.reproduction import (
    ReproductionCheck,
    ReproductionContext,
    check_reproduction,
    reproduce,
    reproduction_frame,
)
from embedpyramid.transfer.scores import CorrelationScores, DatasetScores, PublishedScores, QueryMeanScores

__all__ = [
    "METRIC_TABLE",
    "CorrelationScores",
    "DatasetReferences",
    "DatasetScores",
    "ImportReport",
    "MtebImportError",
    "MtebScore",
    "PublishedScore",
    "PublishedScores",
    "QueryMeanScores",
    "ReproductionCheck",
    "ReproductionContext",
    "TransferResult",
    "check_reproduction",
    "dataset_references",
    "dataset_seed",
    "kendall_tau_b",
    "mid_ranks",
    "pairwise_agreement",
    "pairwise_orders",
    "project_metric",
    "read_mteb_results",
    "reproduce",
    "reproduction_frame",
    "same_winner",
    "select_scores",
    "spearman_rho",
    "transfer_analysis",
]
