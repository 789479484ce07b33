"""Pyramid L4 per (model, dataset): one asset per index spec of ann.yaml, and the frontier."""

from typing import TYPE_CHECKING

import dagster as dg

from assets.metadata import with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.reports.svg import svg_markdown
from embedpyramid.reports.tables import markdown_table
from graphbase.facets import ANN_SETTINGS, CONVENTIONS, RESAMPLING, ann_spec_facet, facet_deps
from graphbase.freshness import EVALUATE_WHEN_STALE
from graphbase.partitions import ann_asset_name, model_dataset_partitions
from resources import ProjectResource

if TYPE_CHECKING:
    from embedpyramid.config.ann import IndexSpec

L4_DEPS = ["query_embeddings", "document_embeddings", "exact_topk", "frozen_dataset"]


def ann_asset(spec: "IndexSpec") -> dg.AssetsDefinition:
    """The asset of one spec; it depends on its own spec facet, so editing one spec makes only
    its asset stale."""

    @dg.asset(
        name=ann_asset_name(spec.name),
        partitions_def=model_dataset_partitions,
        deps=[*L4_DEPS, *facet_deps(ann_spec_facet(spec.name), ANN_SETTINGS, CONVENTIONS, RESAMPLING)],
        group_name="l4_serving",
        code_version=function_version(__file__, "ann_spec"),
        kinds={"faiss", "parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"{spec.describe()}: ANN recall@k vs exact, relevance under ANN with the paired delta vs "
                    "exact, build seconds, bytes, QPS, p50/p95 latency and peak RSS per sweep point.",
    )
    def ann_spec(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from embedpyramid.serving.level import FRONTIER_COLUMNS, evaluate_serving, skipped_cut

        part = project.partition(context)
        config, model, dataset, frozen = part.config, part.model, part.dataset, part.frozen
        if (reason := skipped_cut(part.store, model, dataset, frozen, config.ann.spec(spec.name))) is not None:
            context.log.info(reason)
            return with_provenance(context, project, dg.MaterializeResult(metadata={
                "not_applicable": dg.MetadataValue.text(reason), "card_key": dg.MetadataValue.text(model.key)}))
        result = evaluate_serving(config, part.store, model, dataset, frozen, config.ann.spec(spec.name))
        summary = result.evaluation.summary
        for finding in result.findings:
            context.log.warning(finding)
        return with_provenance(context, project, dg.MaterializeResult(metadata={
            "factory": dg.MetadataValue.text(result.built.factory),
            "metric": dg.MetadataValue.text(str(summary["index_metric"][0])),
            "index_path": dg.MetadataValue.path(str(result.index_paths[0])),
            "reused_index": dg.MetadataValue.bool(all(result.reused)),
            "build_seconds": dg.MetadataValue.float(result.built.build_seconds),
            "index_bytes": dg.MetadataValue.int(result.built.index_bytes),
            "peak_rss_bytes": dg.MetadataValue.int(result.built.peak_rss_bytes),
            "seeds": dg.MetadataValue.json([built.seed for built in result.builds]),
            "findings": dg.MetadataValue.json(list(result.findings)),
            "best_ann_recall": dg.MetadataValue.float(float(summary["ann_recall"].max())),
            "sweep": dg.MetadataValue.md(markdown_table(summary.select(FRONTIER_COLUMNS))),
            "card_key": dg.MetadataValue.text(model.key),
        }))

    return ann_spec


def frontier_asset(specs: "tuple[IndexSpec, ...]") -> dg.AssetsDefinition:
    """The recall/QPS frontier over the sweep points of every spec."""

    @dg.asset(
        partitions_def=model_dataset_partitions,
        deps=[*(ann_asset_name(spec.name) for spec in specs), *facet_deps(ANN_SETTINGS)],
        group_name="l4_serving",
        code_version=function_version(__file__, "serving_frontier"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
    )
    def serving_frontier(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        """The recall/QPS frontier over every spec's sweep points, and QPS at the target recalls."""
        from embedpyramid.serving.level import FRONTIER_COLUMNS
        from embedpyramid.serving.level import serving_frontier as compute_frontier

        part = project.partition(context)
        config, model, dataset = part.config, part.model, part.dataset
        result = compute_frontier(config, part.store, dataset, model.key)
        return with_provenance(context, project, dg.MaterializeResult(metadata={
            "frontier": dg.MetadataValue.md(markdown_table(result.frontier.select(FRONTIER_COLUMNS))),
            "qps_at_recall": dg.MetadataValue.md(markdown_table(result.qps_at_recall)),
            "plot": dg.MetadataValue.md(svg_markdown(result.svg, "recall/QPS frontier")),
            "card_key": dg.MetadataValue.text(model.key),
        }))

    return serving_frontier


def serving_assets(specs: "tuple[IndexSpec, ...]") -> list[dg.AssetsDefinition]:
    """One asset per spec of ann.yaml, and the frontier depending on all of them."""
    return [*(ann_asset(spec) for spec in specs), frontier_asset(specs)]
