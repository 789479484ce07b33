"""Pyramid L1: per (model, dataset) the geometry of the raw vectors, the price of normalization
mistakes and ``pair_sanity``, the three assets of one step (a subsettable multi-asset); per
(model, pair-task dataset) ``pair_sanity_F`` (sts, pair_classification, bitext). Pair sanity is
the AUC of known-similar against seeded random pairs, from the card's embeddings assets."""

import inspect
from collections.abc import Callable, Iterator
from functools import partial

import dagster as dg

from assets.metadata import materialize_selected, partition_check, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.rendering.svg import svg_markdown
from embedpyramid.rendering.tables import markdown_table
from embedpyramid.store import write_json
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import CONVENTIONS, MEASURES, RESAMPLING, SEARCH, facet_deps
from graphbase.partitions import PAIR_FAMILIES, model_dataset_partitions, task_partitions
from resources import ProjectResource
from resources.project import Partition

# The expansion -(|q|^2 - 2 q.d + |d|^2) in float32 against literal float64 distances.
EUCLIDEAN_TOLERANCE = 1e-4
NORM_GEOMETRY, NORMALIZATION_PRICE, PAIR_SANITY = (
    dg.AssetKey("norm_geometry"), dg.AssetKey("normalization_price"), dg.AssetKey("pair_sanity"))


def norm_geometry(part: Partition, log: dg.DagsterLogManager) -> dg.MaterializeResult:
    """Raw norm statistics, norm vs length correlations, length quintiles, anisotropy, spread vs margin."""
    from embedpyramid.geometry.level import analyse_geometry, norm_histogram, read_raw_vectors, write_geometry
    from embedpyramid.geometry.norms import vector_norms
    from embedpyramid.geometry.paths import l1_dir

    raw = read_raw_vectors(part.store, part.model, part.frozen)
    report = analyse_geometry(raw, seed=part.config.protocol.comparison.seed)
    path = write_geometry(report, raw, l1_dir(part.store, part.dataset, part.model.key))
    summary = report.as_dict()
    histogram = norm_histogram(vector_norms(raw.documents), vector_norms(raw.queries), f"Raw norms of {part.model.key}")
    return dg.MaterializeResult(asset_key=NORM_GEOMETRY, metadata={
        "modules": dg.MetadataValue.json(raw.backend.get("modules")),
        "normalize_layer_stripped": dg.MetadataValue.bool(bool(raw.backend.get("stripped"))),
        "document_norms": dg.MetadataValue.json(summary["doc_norms"]),
        "query_norms": dg.MetadataValue.json(summary["query_norms"]),
        "length_correlations": dg.MetadataValue.json(summary["length_correlations"]),
        "anisotropy": dg.MetadataValue.float(report.anisotropy),
        "card_key": dg.MetadataValue.text(part.model.key),
        "spread_vs_margin": dg.MetadataValue.json(summary["spread_margin"]),
        "quintiles": dg.MetadataValue.md(markdown_table(report.quintiles)),
        "norm_histogram": dg.MetadataValue.md(svg_markdown(histogram, "raw norm histogram")),
        "path": dg.MetadataValue.path(str(path)),
    })


def normalization_price(part: Partition, log: dg.DagsterLogManager) -> dg.MaterializeResult:
    """normalize at encode × {dot, cosine, euclidean} and raw × the same, deduplicated to five:
    retrieval metrics, delta vs normalized + dot with a paired bootstrap CI, top-10 overlap, top-1
    changes, retrieved length and norm, pick ratio per length quintile."""
    from embedpyramid.geometry.level import price_normalization, price_table, read_raw_vectors, write_price
    from embedpyramid.geometry.paths import l1_dir

    config, model, dataset, frozen = part.config, part.model, part.dataset, part.frozen
    price = price_normalization(config, dataset, read_raw_vectors(part.store, model, frozen), frozen)
    path = write_price(price, l1_dir(part.store, dataset, model.key))
    worst = max(price.euclidean_check.values(), default=0.0)
    return dg.MaterializeResult(
        asset_key=NORMALIZATION_PRICE,
        metadata={
            "price_table": dg.MetadataValue.md(markdown_table(price_table(price.price))),
            "behaviour": dg.MetadataValue.md(markdown_table(price.behaviour)),
            "settings": dg.MetadataValue.json(price.settings),
            "card_key": dg.MetadataValue.text(model.key),
            "path": dg.MetadataValue.path(str(path)),
        },
        check_results=[dg.AssetCheckResult(
            asset_key=NORMALIZATION_PRICE, check_name="euclidean_expansion_exact", passed=worst <= EUCLIDEAN_TOLERANCE,
            metadata={"max_abs_error": dg.MetadataValue.float(worst)})],
    )


def _sanity_metadata(log: dg.DagsterLogManager, sanity, where: str) -> dict[str, dg.MetadataValue]:
    if sanity.warning:
        log.warning(f"{where}: {sanity.warning}")
    return {
        "auc": dg.MetadataValue.float(sanity.auc),
        "n_similar": dg.MetadataValue.int(sanity.n_similar),
        "similar_mean_cosine": dg.MetadataValue.float(sanity.similar_mean),
        "random_mean_cosine": dg.MetadataValue.float(sanity.random_mean),
        "warning": dg.MetadataValue.text(sanity.warning or "none"),
        "definition": dg.MetadataValue.text(sanity.definition),
        "seed": dg.MetadataValue.int(sanity.settings["seed"]),
    }


def pair_sanity(part: Partition, log: dg.DagsterLogManager) -> dg.MaterializeResult:
    """AUC of each query and its relevant documents against as many seeded random (query,
    document) pairs; a warning when it is near 0.5."""
    from embedpyramid.encode import cached_embedding_path, read_embeddings
    from embedpyramid.geometry.pair_sanity import PairSanitySettings, retrieval_pair_sanity
    from embedpyramid.geometry.paths import PAIR_SANITY_FILE, l1_dir
    from embedpyramid.store import read_frame

    config, store, model, frozen = part.config, part.store, part.model, part.frozen
    query_ids, queries = read_embeddings(cached_embedding_path(store, model, frozen, "query"))
    doc_ids, documents = read_embeddings(cached_embedding_path(store, model, frozen, "document"))
    sanity = retrieval_pair_sanity(
        query_ids, queries, doc_ids, documents, read_frame(frozen.path("qrels")),
        PairSanitySettings(seed=config.protocol.comparison.seed),
        relevance_threshold=config.protocol.conventions(config.dataset(part.dataset)).relevance_threshold)
    path = write_json(sanity.as_dict(), l1_dir(store, part.dataset, model.key) / PAIR_SANITY_FILE)
    return dg.MaterializeResult(asset_key=PAIR_SANITY, metadata={
        **_sanity_metadata(log, sanity, f"{model.key} on {part.dataset}"),
        "card_key": dg.MetadataValue.text(model.key), "path": dg.MetadataValue.path(str(path))})


Compute = Callable[[Partition, dg.DagsterLogManager], dg.MaterializeResult]
L1: dict[dg.AssetKey, tuple[Compute, list[str]]] = {
    NORM_GEOMETRY: (norm_geometry, ["raw_query_embeddings", "raw_document_embeddings", "frozen_dataset",
                                    *facet_deps(RESAMPLING)]),
    NORMALIZATION_PRICE: (normalization_price, ["raw_query_embeddings", "raw_document_embeddings", "frozen_dataset",
                                                *facet_deps(SEARCH, MEASURES, CONVENTIONS, RESAMPLING)]),
    PAIR_SANITY: (pair_sanity, ["query_embeddings", "document_embeddings", "frozen_dataset",
                                *facet_deps(CONVENTIONS, RESAMPLING)]),
}
"""The L1 assets of a (model, dataset) partition: how each is computed, and what it reads."""


@dg.multi_asset(
    specs=[dg.AssetSpec(key, deps=deps, group_name="l1_geometry", kinds={"parquet"},
                        code_version=function_version(__file__, compute.__name__),
                        automation_condition=EVALUATE_WHEN_STALE, description=inspect.getdoc(compute))
           for key, (compute, deps) in L1.items()],
    check_specs=[partition_check("euclidean_expansion_exact", "normalization_price", model_dataset_partitions,
                                 f"Expansion scores within {EUCLIDEAN_TOLERANCE} of literal distances")],
    partitions_def=model_dataset_partitions, can_subset=True, name="l1_geometry",
)
def l1_geometry(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
    """The selected L1 assets of the partition, in one step: three steps of their own bought
    nothing but Dagster's fixed cost per step."""
    part = project.partition(context)
    yield from materialize_selected(context, project, {
        key: partial(compute, part, context.log) for key, (compute, _) in L1.items()})


def _pair_sanity_asset(family: str) -> dg.AssetsDefinition:
    @dg.asset(
        name=f"pair_sanity_{family}",
        partitions_def=task_partitions[family],
        deps=[f"{family}_embeddings", f"frozen_{family}_dataset", *facet_deps(RESAMPLING)],
        group_name="l1_geometry",
        code_version=function_version(__file__, "sanity_asset"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"AUC of the known-similar pairs of a {family} dataset against as many seeded random pairs "
                    f"from the same pools ({family}_embeddings); a warning when near 0.5.",
    )
    def sanity_asset(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from embedpyramid.geometry.pair_sanity import PairSanitySettings, task_pair_sanity
        from embedpyramid.geometry.paths import PAIR_SANITY_FILE, l1_dir
        from embedpyramid.store import read_frame
        from embedpyramid.tasks.level import task_vectors

        part = project.partition(context)
        spec, model = part.config.task_dataset(part.dataset), part.model
        vectors = task_vectors(part.store, model, part.frozen, spec)
        sanity = task_pair_sanity(family, read_frame(part.frozen.path("pairs")), vectors,
                                  PairSanitySettings(seed=part.config.protocol.comparison.seed))
        path = write_json(sanity.as_dict(), l1_dir(part.store, part.dataset, model.key) / PAIR_SANITY_FILE)
        return with_provenance(context, project, dg.MaterializeResult(metadata={**_sanity_metadata(context.log, sanity, f"{model.key} on {part.dataset}"),
                                              "card_key": dg.MetadataValue.text(model.key),
                                              "path": dg.MetadataValue.path(str(path))}))

    return sanity_asset


pair_sanity_assets = [_pair_sanity_asset(family) for family in PAIR_FAMILIES]
