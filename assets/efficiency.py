"""Efficiency per (model, dataset): encode throughput, batch-1 query latency, search QPS, vector
bytes, peak RSS and cost — beside the quality numbers, in results.duckdb and the report."""

import dagster as dg
import polars as pl

from assets.metadata import with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.rendering.tables import markdown_table
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import RESAMPLING, RUN_SETTINGS, facet_deps
from graphbase.partitions import model_dataset_partitions
from resources import EncoderRegistry, ProjectResource


def efficiency_asset(op_tags: dict[str, str]) -> dg.AssetsDefinition:
    """The efficiency asset, with ``op_tags`` on its step (it runs the card's model: the
    batch-1 latency of a local card, in a slot of the card's pool)."""

    @dg.asset(
        partitions_def=model_dataset_partitions,
        # The run settings (batch size, threads, latency sample, prices) set these numbers; the
        # comparison seed draws the latency sample.
        deps=["query_embeddings", "document_embeddings", "exact_topk", *facet_deps(RUN_SETTINGS, RESAMPLING)],
        group_name="efficiency",
        code_version=function_version(__file__, "efficiency"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        op_tags=op_tags,
    )
    def efficiency(
        context: dg.AssetExecutionContext, project: ProjectResource, encoders: EncoderRegistry
    ) -> dg.MaterializeResult:
        """Throughput (documents and queries apart), query latency p50/p95 at batch 1, exact-search
        QPS, bytes per vector, peak RSS of the encode, device, threads and cost of one model on one
        dataset; the latency is measured with the card's model (a local card only)."""
        from embedpyramid.efficiency import efficiency_path, measure_efficiency

        part = project.partition(context)
        config, model, dataset = part.config, part.model, part.dataset
        with encoders.on_demand(context, model) as encoder:
            frame = measure_efficiency(part.store, model, dataset, part.frozen, encoder,
                                       seed=config.protocol.comparison.seed)
        row = frame.row(0, named=True)
        return with_provenance(context, project, dg.MaterializeResult(metadata={
            "documents_per_second": dg.MetadataValue.float(row["documents_per_second"] or 0.0),
            "latency_p50_ms": dg.MetadataValue.float(row["latency_p50_ms"] or 0.0),
            "latency_p95_ms": dg.MetadataValue.float(row["latency_p95_ms"] or 0.0),
            "search_qps": dg.MetadataValue.float(row["search_qps"] or 0.0),
            "cost_basis": dg.MetadataValue.text(row["cost_basis"]),
            "table": dg.MetadataValue.md(markdown_table(pl.DataFrame({"field": list(row),
                                                                      "value": [str(v) for v in row.values()]}))),
            "card_key": dg.MetadataValue.text(model.key),
            "path": dg.MetadataValue.path(str(efficiency_path(part.store, dataset, model.key))),
        }))

    return efficiency
