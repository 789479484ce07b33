"""Pyramid L1 per (model, dataset): geometry of the raw vectors, the price of normalization mistakes."""

import dagster as dg

from assets.metadata import partition_check, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.reports.svg import svg_markdown
from embedpyramid.reports.tables import markdown_table
from graphbase.freshness import CONVENTIONS, EVALUATE_WHEN_STALE, MEASURES, RESAMPLING, SEARCH, facet_deps
from graphbase.partitions import model_dataset_partitions
from resources import ProjectResource

# The expansion -(|q|^2 - 2 q.d + |d|^2) in float32 against literal float64 distances.
EUCLIDEAN_TOLERANCE = 1e-4


@dg.asset(
    partitions_def=model_dataset_partitions,
    deps=["raw_query_embeddings", "raw_document_embeddings", "frozen_dataset", *facet_deps(RESAMPLING)],
    group_name="l1_geometry",
    code_version=function_version(__file__, "norm_geometry"),
    kinds={"parquet"},
    automation_condition=EVALUATE_WHEN_STALE,
)
def norm_geometry(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Raw norm statistics, norm vs length correlations, length quintiles, anisotropy, spread vs margin."""
    from embedpyramid.geometry.level import analyse_geometry, norm_histogram, read_raw_vectors, write_geometry
    from embedpyramid.geometry.norms import vector_norms
    from embedpyramid.geometry.paths import l1_dir

    part = project.partition(context)
    raw = read_raw_vectors(part.store, part.model, part.frozen)
    report = analyse_geometry(raw, seed=part.config.protocol.comparison.seed)
    path = write_geometry(report, raw, l1_dir(part.store, part.dataset, part.model.key))
    summary = report.as_dict()
    histogram = norm_histogram(vector_norms(raw.documents), vector_norms(raw.queries), f"Raw norms of {part.model.key}")
    return with_provenance(context, project, dg.MaterializeResult(metadata={
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
    }))


@dg.asset(
    partitions_def=model_dataset_partitions,
    deps=["raw_query_embeddings", "raw_document_embeddings", "frozen_dataset",
          *facet_deps(SEARCH, MEASURES, CONVENTIONS, RESAMPLING)],
    group_name="l1_geometry",
    code_version=function_version(__file__, "normalization_price"),
    kinds={"parquet"},
    automation_condition=EVALUATE_WHEN_STALE,
    check_specs=[partition_check("euclidean_expansion_exact", "normalization_price", model_dataset_partitions,
                                 f"Expansion scores within {EUCLIDEAN_TOLERANCE} of literal distances")],
)
def normalization_price(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """normalize at encode × {dot, cosine, euclidean} and raw × the same, deduplicated to five:
    retrieval metrics, delta vs normalized + dot with a paired bootstrap CI, top-10 overlap, top-1
    changes, retrieved length and norm, pick ratio per length quintile."""
    from embedpyramid.geometry.level import price_normalization, price_table, read_raw_vectors, write_price
    from embedpyramid.geometry.paths import l1_dir

    part = project.partition(context)
    config, model, dataset, frozen = part.config, part.model, part.dataset, part.frozen
    price = price_normalization(config, dataset, read_raw_vectors(part.store, model, frozen), frozen)
    path = write_price(price, l1_dir(part.store, dataset, model.key))
    worst = max(price.euclidean_check.values(), default=0.0)
    return with_provenance(context, project, dg.MaterializeResult(
        metadata={
            "price_table": dg.MetadataValue.md(markdown_table(price_table(price.price))),
            "behaviour": dg.MetadataValue.md(markdown_table(price.behaviour)),
            "settings": dg.MetadataValue.json(price.settings),
            "card_key": dg.MetadataValue.text(model.key),
            "path": dg.MetadataValue.path(str(path)),
        },
        check_results=[dg.AssetCheckResult(
            check_name="euclidean_expansion_exact", passed=worst <= EUCLIDEAN_TOLERANCE,
            metadata={"max_abs_error": dg.MetadataValue.float(worst)})],
    ))
