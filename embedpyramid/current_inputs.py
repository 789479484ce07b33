"""Which per-partition results a cross-partition summary may use.

A summary (comparisons, HSD, transfer, grade analysis, efficiency tables, the report,
``results.duckdb``) reads per-partition artefacts from the data folder. A file on disk is not
proof that it was computed from the current inputs: after a qrels edit the baseline's metrics of
the old qrels are still there. So a summary takes a :class:`SummaryInputs`, the list of input
partitions whose recorded inputs are *not* the current ones (stale, never materialized or failed,
with the root cause), and never lets one of them enter a table or a test; it lists them as
excluded instead. Who decides is the orchestrator (``graphbase.freshness``: Dagster's stale status,
followed upstream); the core only obeys.

Inputs are named by the asset that writes them (``retrieval_metrics``, ``system_bm25``, ...), the
partition by dataset and card *key* (``None`` for what is evaluated for no model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from embedpyramid.store import ArtifactStore, StorePath, read_json

RETRIEVAL_METRICS = "retrieval_metrics"
EFFICIENCY = "efficiency"
NORM_GEOMETRY = "norm_geometry"
NORMALIZATION_PRICE = "normalization_price"
SERVING_FRONTIER = "serving_frontier"
DOWNSTREAM_ANSWERS = "downstream_answers"
COMPARISONS = "comparisons"
INPUTS_DIGEST = "input_partitions_digest"
"""The metadata key of a summary's materialization that records :attr:`SummaryInputs.digest`."""

EXCLUDED_SCHEMA: dict[str, pl.DataType] = {
    "asset": pl.String(), "dataset": pl.String(), "model": pl.String(), "state": pl.String(), "reason": pl.String(),
}


@dataclass(frozen=True)
class EvaluatedPartition:
    """The artefacts of one (model, dataset) evaluation that go into the summaries and the results
    database: its per-query metrics, run and qrels, what the metrics followed, and its efficiency row."""

    dataset: str
    model_key: str
    model_name: str
    card_hash: str
    card: dict[str, Any]
    system: str
    metrics_path: StorePath
    run_path: StorePath
    qrels_path: StorePath
    conventions: dict[str, Any]
    efficiency_path: StorePath | None = None


def _asset_name(prefix: str, name: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def ann_asset_name(spec_name: str) -> str:
    """The asset of one index spec of ann.yaml (asset names allow letters, digits and underscores)."""
    return _asset_name("ann_", spec_name)


def system_asset_name(system_name: str) -> str:
    """The asset of one L5 system of systems.yaml (``rerank-by-use-m3`` → ``system_rerank_by_use_m3``)."""
    return _asset_name("system_", system_name)


def task_asset_name(family: str) -> str:
    """The asset of one L2 task family (``task_sts``)."""
    return f"task_{family}"


def task_datasets_name(family: str) -> str:
    """The dynamic partition set of one task family's datasets (``sts_datasets``)."""
    return f"{family}_datasets"


def pair_sanity_asset_name(family: str | None) -> str:
    """The L1 pair sanity asset of a task family's datasets, or of the retrieval datasets (None)."""
    return f"pair_sanity_{family}" if family else "pair_sanity"


@dataclass(frozen=True)
class ExcludedInput:
    """One input partition a summary leaves out: the asset, the dataset, the card key (None for a
    model-independent asset), its state (``stale``, ``missing``, ``failed``) and why."""

    asset: str
    dataset: str
    model: str | None
    state: str
    reason: str

    @property
    def text(self) -> str:
        where = f"{self.model} × {self.dataset}" if self.model else self.dataset
        return f"{where} ({self.asset}) excluded: {self.state} ({self.reason})"


@dataclass(frozen=True)
class SummaryInputs:
    """The input partitions of a summary that are not current; every other one is. ``digest``:
    the sha256 of the input partitions materialized when the summary was built, recorded with it
    so that one that is gone since (a card or dataset left the config) makes it stale."""

    excluded: tuple[ExcludedInput, ...] = ()
    digest: str | None = None

    def admits(self, asset: str, dataset: str, model: str | None = None) -> bool:
        """Whether the result of ``asset`` for (``model``, ``dataset``) may enter the summary."""
        return not any(item.asset == asset and item.dataset == dataset and item.model == model
                       for item in self.excluded)

    def for_dataset(self, dataset: str) -> list[ExcludedInput]:
        return [item for item in self.excluded if item.dataset == dataset]

    def frame(self) -> pl.DataFrame:
        """The ``excluded_partitions`` table: asset, dataset, model, state, reason."""
        rows = [{"asset": item.asset, "dataset": item.dataset, "model": item.model, "state": item.state,
                 "reason": item.reason} for item in self.excluded]
        return pl.DataFrame(rows, schema=EXCLUDED_SCHEMA)

    def sentences(self, dataset: str, assets: tuple[str, ...] | None = None) -> list[str]:
        """One sentence per excluded input of ``dataset`` (of ``assets`` only, when given)."""
        return [item.text for item in self.for_dataset(dataset) if assets is None or item.asset in assets]

    def annotate(self, verdicts: list[dict[str, Any]], datasets: Iterable[str],
                 assets: tuple[str, ...]) -> list[dict[str, Any]]:
        """The verdicts (dicts with ``dataset`` and ``text``), each followed by the results of
        ``assets`` (what the verdicts compare) of its dataset that were left out because they are
        not current; a dataset with such exclusions and no verdict gets one saying that no
        comparison was made."""
        result = []
        for dataset in datasets:
            excluded = self.sentences(dataset, assets)
            own = [verdict for verdict in verdicts if verdict["dataset"] == dataset]
            note = f" Not compared (not current): {'; '.join(excluded)}." if excluded else ""
            result += [{**verdict, "text": verdict["text"] + note, "excluded": excluded} for verdict in own]
            if excluded and not own:
                result.append({"dataset": dataset, "excluded": excluded,
                               "text": f"{dataset}: no verdict: comparing would mix versions.{note}"})
        return result


def excluded_keys(inputs: SummaryInputs) -> list[str]:
    """The excluded partitions as sorted ``asset dataset model`` strings, their state and cause
    left out: what decides whether a summary's numbers would change."""
    return sorted(f"{item.asset} {item.dataset} {item.model or ''}".strip() for item in inputs.excluded)


PROVENANCE_SCHEMA: dict[str, pl.DataType] = {
    "asset": pl.String(), "dataset": pl.String(), "model": pl.String(), "partition": pl.String(),
    "dataset_version": pl.String(), "code_version": pl.String(), "facets": pl.String(),
}


def provenance_table(store: ArtifactStore, card_keys: Iterable[str], inputs: SummaryInputs) -> pl.DataFrame:
    """What every current result was computed from (one row per asset partition of the current
    cards that ``inputs`` admits): the frozen dataset's content hash, the code version and the
    version of each config facet it read (JSON), as recorded when it was materialized."""
    keys = set(card_keys)
    rows = []
    for path in sorted((store.root / "provenance").glob("*/*/*.json"), key=str):
        record = read_json(path)
        model = record.get("card_key")
        if (model is not None and model not in keys) or not inputs.admits(record["asset"], record["dataset"], model):
            continue
        rows.append({"asset": record["asset"], "dataset": record["dataset"], "model": model,
                     "partition": record.get("partition"), "dataset_version": record.get("dataset_version"),
                     "code_version": record.get("code_version"), "facets": json.dumps(record.get("facets", {}),
                                                                                     sort_keys=True)})
    return pl.DataFrame(rows, schema=PROVENANCE_SCHEMA)
