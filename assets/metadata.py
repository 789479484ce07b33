"""Materialization metadata shared by the assets: tables the UI renders with a schema, and the
headline numbers the Plots tab charts across materializations."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import dagster as dg
import polars as pl

from embedpyramid.config import ProjectConfig, parse_measure
from embedpyramid.current_inputs import INPUTS_DIGEST, SummaryInputs, excluded_keys
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


_FRESHNESS: dict[tuple[str, int], Any] = {}
"""The upstream states of the summary run in progress, by (run id, partitions it has
materialized so far): a summary run materializes no evaluated partition, so the states of its
inputs hold for all its summaries until it materializes a summary partition (a dataset's
comparisons) that a later summary of the run reads."""


def _run_freshness(context: dg.AssetExecutionContext, config: ProjectConfig, data_dir: str) -> Any:
    from graphbase.freshness_store import kept_freshness
    from graphbase.up_to_date import location_graph

    done = context.instance.get_records_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, limit=1000).records
    key = (context.run.run_id, sum(record.event_log_entry.dagster_event.partition is not None for record in done))
    if key not in _FRESHNESS:
        graph = location_graph(context, str(config.directory), data_dir)
        _FRESHNESS.clear()
        _FRESHNESS[key] = kept_freshness(context.instance, graph)
    return _FRESHNESS[key]


def summary_inputs(context: dg.AssetExecutionContext, config: ProjectConfig, data_dir: str) -> SummaryInputs:
    """The partitions upstream of this summary asset (of its dataset, for a summary partitioned by
    dataset) that are not current (the summary leaves them out), each logged as a warning."""
    from graphbase.freshness import summary_inputs as not_current

    # An unpartitioned summary in a run of one dataset's comparisons sees the run's partition key.
    partition = context.partition_key if context.assets_def.partitions_def is not None else None
    inputs = not_current(_run_freshness(context, config, data_dir), context.asset_key, config, partition)
    for item in inputs.excluded:
        context.log.warning(item.text)
    return inputs


def excluded_metadata(inputs: SummaryInputs) -> dict[str, dg.MetadataValue]:
    """How many input partitions were left out, and which (the UI's metadata of a summary), and
    the digest of the input partitions it read (:data:`~embedpyramid.current_inputs.INPUTS_DIGEST`)."""
    return {"excluded_partitions": dg.MetadataValue.int(len(inputs.excluded)),
            "excluded": dg.MetadataValue.json([item.text for item in inputs.excluded]),
            "excluded_inputs": dg.MetadataValue.json(excluded_keys(inputs)),
            **({INPUTS_DIGEST: dg.MetadataValue.text(inputs.digest)} if inputs.digest else {})}


def with_provenance(context: dg.AssetExecutionContext, project: ProjectResource,
                    result: dg.MaterializeResult) -> dg.MaterializeResult:
    """``result`` with what this asset partition was computed from (dataset content hash, card
    key, config facet versions, code version) in its metadata, also written to
    ``<data>/provenance/<asset>/<dataset>/<card key>.json``. A multi-asset's result names its asset."""
    from graphbase.config_observation import provenance_record

    record = provenance_record(context, project.config, project.store, result.asset_key)
    write_json(record, project.store.provenance_path(record["asset"], record["dataset"],
                                                     record["card_key"] or record["dataset"]))
    return dg.MaterializeResult(
        asset_key=result.asset_key, metadata={**(result.metadata or {}), "provenance": dg.MetadataValue.json(record)},
        check_results=result.check_results, data_version=result.data_version, tags=result.tags,
    )


def materialize_selected(context: dg.AssetExecutionContext, project: ProjectResource,
                         computations: Mapping[dg.AssetKey, Callable[[], dg.MaterializeResult]],
                         ) -> Iterator[dg.MaterializeResult]:
    """The selected assets of a multi-asset step, computed one after another, each yielded with
    its provenance as soon as it is done. One that raises is logged and the others still run;
    then the step fails: with that error when one failed (its message unchanged), else with one
    error naming them all."""
    failed: list[Exception] = []
    for key, compute in computations.items():
        if key not in context.selected_asset_keys:
            continue
        try:
            result = compute()
        except Exception as error:  # the others still run; the step fails below, naming it
            context.log.error(f"{key.to_user_string()}: {type(error).__name__}: {error}")
            failed.append(error)
            continue
        yield with_provenance(context, project, result)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise RuntimeError(f"{len(failed)} assets failed: " + "; ".join(
            f"{type(error).__name__}: {error}" for error in failed))
