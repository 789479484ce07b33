"""Pyramid L2 retrieval: exact top-k and per-query retrieval metrics per (model, dataset), the
two assets of one step (a subsettable multi-asset)."""

import inspect
from collections.abc import Iterator
from functools import partial

import dagster as dg

from assets.metadata import headline_metrics, materialize_selected, table_metadata
from assets.transfer import reproduction_check_result, reproduction_check_spec
from embedpyramid.code_version import function_version
from embedpyramid.encode import cached_embedding_path
from embedpyramid.hashing import sha256_table
from embedpyramid.progress import report
from embedpyramid.store import write_parquet
from embedpyramid.summary.results import sort_metrics
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import CONVENTIONS, MEASURES, REFERENCES, SEARCH, facet_deps
from graphbase.partitions import model_dataset_partitions
from resources import ProjectResource
from resources.project import Partition

EXACT = "exact"
EXACT_TOPK, RETRIEVAL_METRICS = dg.AssetKey("exact_topk"), dg.AssetKey("retrieval_metrics")


def exact_topk(part: Partition) -> dg.MaterializeResult:
    """Exact top-depth in the card's similarity, streaming the documents block by block; a
    long-format run plus a TREC run file."""
    from embedpyramid.retrieval.level import search_embeddings
    from embedpyramid.retrieval.search import search_metric
    from embedpyramid.retrieval.trec import write_trec_run

    config, store, model, frozen = part.config, part.store, part.model, part.frozen
    result = search_embeddings(
        cached_embedding_path(store, model, frozen, "query"), cached_embedding_path(store, model, frozen, "document"),
        config.protocol.depth, config.protocol.search, search_metric(model.similarity, model.card.normalize),
        progress=partial(report, f"searched documents with {model.key}"),
        ties_at_cut="last" if config.dataset(part.dataset).retrieval_protocol == "mteb" else "first",
        device=model.card.run.device if not model.is_remote else "cpu",
    )
    run_dir = store.run_dir(part.dataset, model.key)
    write_parquet(result.table(), run_dir / f"{EXACT}.parquet")
    write_trec_run(result.run, run_dir / f"{EXACT}.trec", tag=f"{model.key}.{EXACT}")
    return dg.MaterializeResult(
        asset_key=EXACT_TOPK,
        metadata={
            "rows": dg.MetadataValue.int(result.run.num_rows),
            "queries": dg.MetadataValue.int(result.n_queries),
            "documents": dg.MetadataValue.int(result.n_documents),
            "depth": dg.MetadataValue.int(config.protocol.depth),
            "similarity": dg.MetadataValue.text(model.similarity),
            "search_seconds": dg.MetadataValue.float(result.seconds),
            "queries_per_second": dg.MetadataValue.float(result.queries_per_second),
            "card_key": dg.MetadataValue.text(model.key),
            "path": dg.MetadataValue.path(str(run_dir / f"{EXACT}.parquet")),
            "trec_run": dg.MetadataValue.path(str(run_dir / f"{EXACT}.trec")),
        },
        data_version=dg.DataVersion(sha256_table(result.run)),
    )


def retrieval_metrics(part: Partition) -> dg.MaterializeResult:
    """Per-query Recall, Hit, MRR, MAP, nDCG, P at every k and R-precision, conventions recorded.

    The headline numbers (the report metric and the measures at its cutoff) are numeric metadata,
    so the Plots tab charts them across materializations. The L3 check
    ``reproduces_published_scores`` compares them with the card's published scores (warns)."""
    from embedpyramid.retrieval.level import score_run, write_scored_run
    from embedpyramid.transfer.level import partition_reproduction

    config, store, model, dataset = part.config, part.store, part.model, part.dataset
    scored = score_run(
        store.run_dir(dataset, model.key) / f"{EXACT}.parquet", part.frozen, config.protocol.measures(),
        config.protocol.conventions(config.dataset(dataset)), dataset=dataset, model=model.key, system=EXACT,
    )
    path = write_scored_run(scored, store.metrics_path(dataset, model.key, EXACT))
    manifest = scored.manifest()
    means = sort_metrics(scored.means())
    return dg.MaterializeResult(
        asset_key=RETRIEVAL_METRICS,
        metadata={
            **headline_metrics(means, config.protocol.comparison.report_metric),
            "evaluated_queries": dg.MetadataValue.int(manifest["evaluated_queries"]),
            "excluded_queries": dg.MetadataValue.int(manifest["excluded_queries"]),
            "conventions": dg.MetadataValue.json(manifest["conventions"]),
            "metrics": table_metadata(means),
            "baseline": dg.MetadataValue.bool(model.name == config.baseline.name),
            "card_key": dg.MetadataValue.text(model.key),
            "path": dg.MetadataValue.path(str(path)),
        },
        data_version=dg.DataVersion(sha256_table(scored.per_query.to_arrow())),
        check_results=[reproduction_check_result(partition_reproduction(
            config, dataset, model, scored.per_query, conventions=manifest["conventions"], frozen=part.frozen,
            system=EXACT))],
    )


L2 = {
    EXACT_TOPK: (exact_topk, ["query_embeddings", "document_embeddings", *facet_deps(SEARCH)], {"torch", "parquet"}),
    RETRIEVAL_METRICS: (retrieval_metrics, ["exact_topk", "frozen_dataset", *facet_deps(MEASURES, CONVENTIONS, REFERENCES)],
                        {"parquet"}),
}
"""The L2 retrieval assets of a (model, dataset) partition: how each is computed, what it reads, its kinds."""


@dg.multi_asset(
    specs=[dg.AssetSpec(key, deps=deps, group_name="l2_retrieval", kinds=kinds,
                        code_version=function_version(__file__, compute.__name__),
                        automation_condition=EVALUATE_WHEN_STALE, description=inspect.getdoc(compute))
           for key, (compute, deps, kinds) in L2.items()],
    check_specs=[reproduction_check_spec],
    partitions_def=model_dataset_partitions, can_subset=True, name="l2_retrieval",
)
def l2_retrieval(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
    """The selected L2 retrieval assets of the partition in one step (the search, then its metrics)."""
    part = project.partition(context)
    yield from materialize_selected(context, project, {
        key: partial(compute, part) for key, (compute, _, _) in L2.items()})
