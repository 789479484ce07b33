"""Pyramid L4 per (model, dataset): one asset per index spec of ann.yaml and the frontier, all
computed by one step (a subsettable multi-asset)."""

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import dagster as dg

from assets.metadata import materialize_selected, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.rendering.svg import svg_markdown
from embedpyramid.rendering.tables import markdown_table
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import ANN_SETTINGS, CONVENTIONS, RESAMPLING, ann_spec_facet, facet_deps
from graphbase.partitions import ann_asset_name, model_dataset_partitions
from resources import ProjectResource
from resources.project import Partition

if TYPE_CHECKING:
    from embedpyramid.config.ann import IndexSpec

L4_DEPS = ["query_embeddings", "document_embeddings", "exact_topk", "frozen_dataset"]
FRONTIER = dg.AssetKey("serving_frontier")


def spec_asset(spec: "IndexSpec") -> dg.AssetSpec:
    """The asset of one spec; it depends on its own spec facet, so editing one spec makes only
    its asset stale."""
    return dg.AssetSpec(
        ann_asset_name(spec.name),
        deps=[*L4_DEPS, *facet_deps(ann_spec_facet(spec.name), ANN_SETTINGS, CONVENTIONS, RESAMPLING)],
        group_name="l4_serving",
        code_version=function_version(__file__, "evaluate_spec"),
        kinds={"faiss", "parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"{spec.describe()}: ANN recall@k vs exact, relevance under ANN with the paired delta vs "
                    "exact, build seconds, bytes, QPS, p50/p95 latency and peak RSS per sweep point.",
    )


def frontier_spec(specs: "tuple[IndexSpec, ...]") -> dg.AssetSpec:
    return dg.AssetSpec(
        FRONTIER,
        deps=[*(ann_asset_name(spec.name) for spec in specs), *facet_deps(ANN_SETTINGS)],
        group_name="l4_serving",
        code_version=function_version(__file__, "frontier"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description="The recall/QPS frontier over every spec's sweep points, and QPS at the target recalls.",
    )


def evaluate_spec(part: Partition, spec: "IndexSpec", log: dg.DagsterLogManager) -> dg.MaterializeResult:
    """One spec over the partition's vectors (or the reason it does not apply to this card)."""
    from embedpyramid.serving.level import FRONTIER_COLUMNS, evaluate_serving, skipped_cut

    config, model, dataset, frozen = part.config, part.model, part.dataset, part.frozen
    key = dg.AssetKey(ann_asset_name(spec.name))
    spec = config.ann.spec(spec.name)  # as the config folder holds it now
    if (reason := skipped_cut(part.store, model, dataset, frozen, spec)) is not None:
        log.info(reason)
        return dg.MaterializeResult(asset_key=key, metadata={
            "not_applicable": dg.MetadataValue.text(reason), "card_key": dg.MetadataValue.text(model.key)})
    result = evaluate_serving(config, part.store, model, dataset, frozen, spec)
    summary = result.evaluation.summary
    for finding in result.findings:
        log.warning(finding)
    return dg.MaterializeResult(asset_key=key, metadata={
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
    })


def frontier(part: Partition) -> dg.MaterializeResult:
    """The recall/QPS frontier over every evaluated spec's sweep points, and QPS at the target recalls."""
    from embedpyramid.serving.level import FRONTIER_COLUMNS, serving_frontier

    result = serving_frontier(part.config, part.store, part.dataset, part.model.key)
    return dg.MaterializeResult(asset_key=FRONTIER, metadata={
        "frontier": dg.MetadataValue.md(markdown_table(result.frontier.select(FRONTIER_COLUMNS))),
        "qps_at_recall": dg.MetadataValue.md(markdown_table(result.qps_at_recall)),
        "plot": dg.MetadataValue.md(svg_markdown(result.svg, "recall/QPS frontier")),
        "card_key": dg.MetadataValue.text(part.model.key),
    })


def serving_assets(specs: "tuple[IndexSpec, ...]") -> list[dg.AssetsDefinition]:
    """One asset per spec of ann.yaml and the frontier depending on all of them, computed by one
    step per (model, dataset): a separate step per spec would add Dagster's fixed cost of a step
    once per spec and buy nothing (``benchmarks/bench_partition.py`` measures that cost). The step computes the assets
    selected (a run after one spec's edit builds that spec and the frontier). A spec that fails
    fails the step after the others are materialized, and the frontier is then left as it was,
    as it would be downstream of a failed step."""
    by_key = {dg.AssetKey(ann_asset_name(spec.name)): spec for spec in specs}

    @dg.multi_asset(specs=[*map(spec_asset, specs), frontier_spec(specs)], partitions_def=model_dataset_partitions,
                    can_subset=True, name="l4_serving")
    def l4_serving(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
        part = project.partition(context)
        yield from materialize_selected(context, project, {
            key: partial(evaluate_spec, part, spec, context.log) for key, spec in by_key.items()})
        if FRONTIER in context.selected_asset_keys:  # reached only when no spec failed
            yield with_provenance(context, project, frontier(part))

    return [l4_serving]
