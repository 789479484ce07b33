"""Pyramid L5: one asset per system of systems.yaml.

A model-independent system (BM25, or anything built only on it) is computed once per dataset:
its asset is partitioned by dataset alone and tagged ``DATASET_LEVEL_TAG``, so it runs in the
``evaluate_dataset`` job, and the model × dataset systems that read it map to it through the
dataset dimension. Every other system (fusion, rerank) is partitioned by model × dataset, like
L4's one asset per index spec; a bi-encoder rerank also depends on its ``by`` card's embeddings,
in that card's partition on the same dataset (:func:`graphbase.partitions.card_partition_mapping`).
Each asset depends on its own system facet, whose version is the system's content hash, so an
edit makes exactly that system and the systems built on it stale. A rerank runs one known model:
its step holds a slot of that model's pool while it runs (a bi-encoder rerank its ``by`` card's,
a cross-encoder ``encoders``) and asks Kubernetes for a GPU when that card runs on cuda
(:mod:`graphbase.pools`).
"""

from contextlib import nullcontext
from typing import TYPE_CHECKING

import dagster as dg

from assets.metadata import headline_metrics, table_metadata, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.rendering.tables import markdown_table
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import CONVENTIONS, MEASURES, SYSTEMS_SETTINGS, facet_deps, system_facet
from graphbase.partitions import (
    ann_asset_name,
    card_partition_mapping,
    dataset_partitions,
    model_dataset_partitions,
    system_asset_name,
)
from graphbase.pools import ENCODER_POOL, card_pool, model_step_tags
from graphbase.tags import DATASET_LEVEL_TAG
from resources import EncoderRegistry, ProjectResource

if TYPE_CHECKING:
    from embedpyramid.config import ResolvedModel
    from embedpyramid.config.systems import SystemsConfig

EMBEDDINGS = ("query_embeddings", "document_embeddings")


def _upstream(systems: "SystemsConfig", name: str) -> list[str | dg.AssetDep]:
    """The assets a system reads: the frozen dataset, the exact run, the systems and L4 indexes
    it takes as input (and, for an index, the card's embeddings), and for a bi-encoder rerank the
    embeddings of its ``by`` card, in that card's partition on the same dataset.

    Dagster takes one partition mapping per upstream asset, so a rerank over an ``ann:`` first
    stage reaches its own card's embeddings through the index asset (which depends on them)
    and depends directly on the ``by`` card's."""
    from embedpyramid.config.system_kinds import BiEncoderSystem
    from embedpyramid.config.systems import EXACT, parse_ann_reference

    spec = systems.system(name)
    by = spec.by if isinstance(spec, BiEncoderSystem) else None
    deps = ["frozen_dataset"]
    for reference in spec.references():
        if reference == EXACT:
            deps.append("exact_topk")
        elif reference in systems.systems:
            deps.append(system_asset_name(reference))
        elif (parsed := parse_ann_reference(reference)) is not None:
            deps += [ann_asset_name(parsed.spec), *([] if by else EMBEDDINGS)]
    by_card = [dg.AssetDep(asset, partition_mapping=card_partition_mapping(by)) for asset in EMBEDDINGS] if by else []
    return [*dict.fromkeys(deps), *by_card]


def system_asset(systems: "SystemsConfig", name: str, models: "dict[str, ResolvedModel]") -> dg.AssetsDefinition:
    """The asset of one system: partitioned by dataset when it is model-independent, else by
    model × dataset. A bi-encoder rerank is not evaluated for the card it reranks by: that
    partition records "not applicable" (writing nothing; the summaries never read it), so it is
    neither missing forever nor a failure. ``models`` are the folder's cards (a bi-encoder
    rerank's ``by`` card sets its pool and op tags)."""
    from embedpyramid.config.system_kinds import BiEncoderSystem, CrossEncoderSystem

    spec = systems.system(name)
    independent = systems.model_independent(name)
    by = models[spec.by] if isinstance(spec, BiEncoderSystem) else None
    pool = card_pool(by) if by is not None else ENCODER_POOL if isinstance(spec, CrossEncoderSystem) else None

    @dg.asset(
        name=system_asset_name(name),
        partitions_def=dataset_partitions if independent else model_dataset_partitions,
        deps=[*_upstream(systems, name), *facet_deps(system_facet(name), SYSTEMS_SETTINGS, MEASURES, CONVENTIONS)],
        group_name="l5_systems",
        code_version=function_version(__file__, "system"),
        kinds={"parquet"},
        tags=dict([DATASET_LEVEL_TAG]) if independent else None,
        op_tags=model_step_tags([by] if by is not None else []),
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"L5 system {name!r} ({spec.kind}, inputs: {', '.join(spec.references()) or 'the corpus'}): its "
                    "run, per-query metrics in the long table (system = its name), settings, hash and the latency "
                    "the stage adds (p50/p95)." + (" Model-independent: once per dataset." if independent else ""),
    )
    def system(context: dg.AssetExecutionContext, project: ProjectResource,
               encoders: EncoderRegistry) -> dg.MaterializeResult:
        from embedpyramid.data import open_frozen
        from embedpyramid.summary.results import sort_metrics
        from embedpyramid.systems.stored import evaluate_stored_system

        config, store = project.config, project.store
        if independent:
            dataset, model = context.partition_key, None
            frozen = open_frozen(store.dataset_dir(dataset))
        else:
            part = project.partition(context)
            dataset, model, frozen = part.dataset, part.model, part.frozen
            if config.systems is not None and not config.systems.applies_to(name, model.name):
                reason = f"system {name!r} reranks by card {model.name!r}: not evaluated for that card"
                context.log.info(reason)
                return with_provenance(context, project, dg.MaterializeResult(metadata={"not_applicable": dg.MetadataValue.text(reason)}))
        with encoders.slot(context, pool) if pool is not None else nullcontext():
            result, paths = evaluate_stored_system(config, store, name, dataset, frozen, model, encoders.encoder)
        row = result.summary.row(0, named=True)
        means = sort_metrics(result.scored.means())
        metadata = {
            **headline_metrics(means, config.protocol.comparison.report_metric),
            "kind": dg.MetadataValue.text(row["kind"]),
            "inputs": dg.MetadataValue.text(row["inputs"]),
            "system_hash": dg.MetadataValue.text(row["system_hash"]),
            "candidate_depth": dg.MetadataValue.int(row["candidate_depth"] or 0),
            "stage_seconds": dg.MetadataValue.float(row["stage_seconds"]),
            "p50_ms": dg.MetadataValue.float(row["p50_ms"]),
            "p95_ms": dg.MetadataValue.float(row["p95_ms"]),
            "latency_scope": dg.MetadataValue.text(row["latency_scope"]),
            "empty_queries": dg.MetadataValue.int(row["empty_queries"]),
            "settings": dg.MetadataValue.json(result.manifest()["system"]),
            "metrics": table_metadata(means),
            "model": dg.MetadataValue.text(row["model"]),
            "path": dg.MetadataValue.path(str(paths["metrics"])),
        }
        if row["tuned_on"] is not None:
            metadata["tuned_on"] = dg.MetadataValue.text(row["tuned_on"])
        if result.sweep is not None:
            metadata["dev_sweep"] = dg.MetadataValue.md(markdown_table(result.sweep))
        return with_provenance(context, project, dg.MaterializeResult(metadata=metadata))

    return system


def systems_assets(systems: "SystemsConfig | None", models: "dict[str, ResolvedModel]") -> list[dg.AssetsDefinition]:
    """One asset per system of systems.yaml (none without the file)."""
    return [system_asset(systems, name, models) for name in systems.systems] if systems else []
