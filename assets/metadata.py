"""Materialization metadata shared by the assets: tables the UI renders with a schema, and the
headline numbers the Plots tab charts across materializations."""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg
import polars as pl

from embedpyramid.config import ProjectConfig
from embedpyramid.inputs import SummaryInputs, excluded_keys
from embedpyramid.retrieval.metrics import parse_measure
from embedpyramid.store import write_json
from resources import ProjectResource

_TYPES = {pl.Float32: "float", pl.Float64: "float", pl.Int32: "int", pl.Int64: "int", pl.UInt32: "int",
          pl.UInt64: "int", pl.Boolean: "bool"}


def table_metadata(frame: pl.DataFrame) -> dg.TableMetadataValue:
    """A frame as ``MetadataValue.table`` with its column types (rows kept in frame order)."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, _TYPES.get(dtype, "string"))
                                     for name, dtype in frame.schema.items()])
    return dg.MetadataValue.table([dg.TableRecord(row) for row in frame.iter_rows(named=True)], schema=schema)


def headline_metrics(means: pl.DataFrame, report_metric: str) -> dict[str, dg.FloatMetadataValue]:
    """The report metric and every measure at its cutoff (nDCG@10, Recall@10, ...), as numbers."""
    cutoff = parse_measure(report_metric).cutoff
    return {
        row["metric"]: dg.MetadataValue.float(float(row["mean"]))
        for row in means.iter_rows(named=True)
        if row["metric"] == report_metric or parse_measure(row["metric"]).cutoff == cutoff
    }


def partition_check(name: str, asset: str, partitions_def: dg.PartitionsDefinition, description: str,
                    *, blocking: bool = False) -> dg.AssetCheckSpec:
    """A check recorded per partition, so its history in the UI is per model and dataset."""
    with warnings.catch_warnings():
        # Partitioned check specs are a preview API in Dagster 1.13; per-partition history is the point.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(name, asset=asset, partitions_def=partitions_def, description=description,
                                 blocking=blocking)


_FRESHNESS: dict[str, Any] = {}
"""The upstream states of the summary run in progress (its id → Freshness): a summary run
materializes no partitioned asset, so the states of its inputs hold for all its summaries."""


def _run_freshness(context: dg.AssetExecutionContext, config: ProjectConfig, data_dir: str) -> Any:
    from graphbase.freshness import Freshness, location_graph

    if context.run_id not in _FRESHNESS:
        graph = location_graph(context, str(config.directory), data_dir)
        _FRESHNESS.clear()
        _FRESHNESS[context.run_id] = Freshness(context.instance, graph)
    return _FRESHNESS[context.run_id]


def summary_inputs(context: dg.AssetExecutionContext, config: ProjectConfig, data_dir: str) -> SummaryInputs:
    """The partitions upstream of this summary asset that are not current (the summary leaves
    them out), each logged as a warning."""
    from graphbase.freshness import summary_inputs as not_current

    inputs = not_current(_run_freshness(context, config, data_dir), context.asset_key, config)
    for item in inputs.excluded:
        context.log.warning(item.text)
    return inputs


def excluded_metadata(inputs: SummaryInputs) -> dict[str, dg.MetadataValue]:
    """How many input partitions were left out, and which (the UI's metadata of a summary)."""
    return {"excluded_partitions": dg.MetadataValue.int(len(inputs.excluded)),
            "excluded": dg.MetadataValue.json([item.text for item in inputs.excluded]),
            "excluded_inputs": dg.MetadataValue.json(excluded_keys(inputs))}


def with_provenance(context: dg.AssetExecutionContext, project: ProjectResource,
                    result: dg.MaterializeResult) -> dg.MaterializeResult:
    """``result`` with what this asset partition was computed from (dataset content hash, card
    key, config facet versions, code version) in its metadata, also written to
    ``<data>/provenance/<asset>/<dataset>/<card key>.json``."""
    from graphbase.freshness import provenance_record

    record = provenance_record(context, project.config, project.store)
    write_json(record, project.store.provenance_path(record["asset"], record["dataset"],
                                                     record["card_key"] or record["dataset"]))
    return dg.MaterializeResult(
        asset_key=result.asset_key, metadata={**(result.metadata or {}), "provenance": dg.MetadataValue.json(record)},
        check_results=result.check_results, data_version=result.data_version, tags=result.tags,
    )
