"""Materialization metadata shared by the assets: tables the UI renders with a schema, and the
headline numbers the Plots tab charts across materializations."""

from __future__ import annotations

import warnings

import dagster as dg
import polars as pl

from embedpyramid.retrieval.metrics import parse_measure

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
