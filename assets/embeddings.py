"""Query and document embeddings per (model, dataset), cached by (card hash, input table hash),
and their raw twins (pyramid L1): the same model without its final Normalize module."""

import dagster as dg

from assets.metadata import partition_check
from embedpyramid.data import encoding_inputs
from embedpyramid.encode import (
    PLURAL,
    Kind,
    cached_embedding_path,
    direction_difference,
    embed_table,
    read_embeddings,
    vector_problems,
)
from pipelines.freshness import EVALUATE_WHEN_STALE, MODEL_CARD, facet_deps
from pipelines.partitions import model_dataset_partitions
from resources import EncoderRegistry, ProjectResource

# Encoding holds the model (and on a cluster the GPU): the `encoders` pool caps how many encodes
# run at once across runs (docs/deploy.md); without a configured limit it is unbounded.
ENCODERS_POOL = "encoders"
# Unit(raw) may differ from the shipped vector only by float rounding.
DIRECTION_TOLERANCE = 1e-5


def _embedding_asset(kind: Kind, *, raw: bool) -> dg.AssetsDefinition:
    name = f"raw_{kind}_embeddings" if raw else f"{kind}_embeddings"
    checks = [partition_check("vectors_valid", name, model_dataset_partitions,
                              "One finite, non-zero vector of the card's dimension per row", blocking=True)]
    if raw:
        checks.append(partition_check("direction_preserved", name, model_dataset_partitions,
                                      f"max |unit(raw) - shipped| <= {DIRECTION_TOLERANCE}", blocking=True))

    @dg.asset(
        name=name,
        partitions_def=model_dataset_partitions,
        deps=[*(["frozen_dataset", f"{kind}_embeddings"] if raw else ["frozen_dataset"]), *facet_deps(MODEL_CARD)],
        group_name="l1_geometry" if raw else "embeddings",
        code_version="1",
        kinds={"parquet", "torch"},
        pool=ENCODERS_POOL,
        automation_condition=EVALUATE_WHEN_STALE,
        check_specs=checks,
    )
    def embeddings(
        context: dg.AssetExecutionContext, project: ProjectResource, encoders: EncoderRegistry
    ) -> dg.MaterializeResult:
        part = project.partition(context)
        model, frozen, model_key = part.model, part.frozen, part.model.key
        inputs = encoding_inputs(frozen, kind)
        logged_tenths = [0]

        def progress(done: int, total: int) -> None:
            if done * 10 // total > logged_tenths[0]:
                logged_tenths[0] = done * 10 // total
                context.log.info(f"encoded {done}/{total} {PLURAL[kind]} with {model_key}")

        result = embed_table(part.store, model, kind, inputs, lambda: encoders.encoder(model), progress, raw=raw)
        stored_ids, vectors = read_embeddings(result.path)
        problems = vector_problems(vectors, len(inputs.ids), model.card.dimension or result.metadata["dim"])
        if stored_ids != inputs.ids:
            problems.append(f"ids in {result.path} do not match the frozen {kind} table")
        meta = result.metadata
        check_results = [dg.AssetCheckResult(check_name="vectors_valid", passed=not problems,
                                             metadata={"problems": dg.MetadataValue.json(problems)})]
        metadata = {
            "rows": dg.MetadataValue.int(meta["rows"]),
            "dim": dg.MetadataValue.int(meta["dim"]),
            "cache_hit": dg.MetadataValue.bool(result.cache_hit),
            "encode_seconds": dg.MetadataValue.float(meta["seconds"]),
            "texts_per_second": dg.MetadataValue.float(meta["texts_per_second"] or 0.0),
            "tokens": dg.MetadataValue.int(meta["tokens"] or 0),
            "normalized": dg.MetadataValue.bool(meta["normalized"]),
            "backend": dg.MetadataValue.json(meta["backend"]),
            "card_hash": dg.MetadataValue.text(model.card_hash),
            "card_key": dg.MetadataValue.text(model_key),
            "path": dg.MetadataValue.path(str(result.path)),
        }
        if raw:
            _, shipped = read_embeddings(cached_embedding_path(part.store, model, frozen, kind))
            difference = direction_difference(vectors, shipped)
            metadata["direction_difference"] = dg.MetadataValue.float(difference)
            turned = [] if difference <= DIRECTION_TOLERANCE else [
                f"max |unit(raw) - shipped| = {difference:.3g} > {DIRECTION_TOLERANCE}: stripping the "
                "Normalize module changed directions, so the raw vectors are not this model's"]
            check_results.append(dg.AssetCheckResult(
                check_name="direction_preserved", passed=not turned,
                metadata={"max_abs_difference": dg.MetadataValue.float(difference),
                          "problems": dg.MetadataValue.json(turned)}))
        return dg.MaterializeResult(
            metadata=metadata,
            data_version=dg.DataVersion(result.path.stem + "@" + model.card_hash[:16]),
            check_results=check_results,
        )

    return embeddings


query_embeddings = _embedding_asset("query", raw=False)
document_embeddings = _embedding_asset("document", raw=False)
raw_query_embeddings = _embedding_asset("query", raw=True)
raw_document_embeddings = _embedding_asset("document", raw=True)
