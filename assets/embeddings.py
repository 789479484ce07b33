"""Query and document embeddings per (model, dataset), cached by (card hash, input table hash)."""


import dagster as dg

from embedpyramid.data import encoding_inputs, open_frozen
from embedpyramid.encode import PLURAL, Kind, embed_table, read_embeddings, vector_problems
from pipelines.partitions import model_dataset_partitions, split_key
from resources import EncoderRegistry, ProjectResource


def _embedding_asset(kind: Kind) -> dg.AssetsDefinition:
    name = f"{kind}_embeddings"

    @dg.asset(
        name=name,
        partitions_def=model_dataset_partitions,
        deps=["frozen_dataset"],
        group_name="embeddings",
        code_version="1",
        kinds={"parquet", "torch"},
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[dg.AssetCheckSpec("vectors_valid", asset=name, blocking=True,
                                       description="One finite, non-zero vector of the card's dimension per row")],
    )
    def embeddings(
        context: dg.AssetExecutionContext, project: ProjectResource, encoders: EncoderRegistry
    ) -> dg.MaterializeResult:
        model_key, dataset = split_key(context)
        model = project.config.model_by_key(model_key)
        frozen = open_frozen(project.store.dataset_dir(dataset))
        inputs = encoding_inputs(frozen, kind)
        logged_tenths = [0]

        def progress(done: int, total: int) -> None:
            if done * 10 // total > logged_tenths[0]:
                logged_tenths[0] = done * 10 // total
                context.log.info(f"encoded {done}/{total} {PLURAL[kind]} with {model_key}")

        result = embed_table(project.store, model, kind, inputs, lambda: encoders.encoder(model), progress)
        stored_ids, vectors = read_embeddings(result.path)
        problems = vector_problems(vectors, len(inputs.ids), model.card.dimension or result.metadata["dim"])
        if stored_ids != inputs.ids:
            problems.append(f"ids in {result.path} do not match the frozen {kind} table")
        meta = result.metadata
        return dg.MaterializeResult(
            metadata={
                "rows": dg.MetadataValue.int(meta["rows"]),
                "dim": dg.MetadataValue.int(meta["dim"]),
                "cache_hit": dg.MetadataValue.bool(result.cache_hit),
                "encode_seconds": dg.MetadataValue.float(meta["seconds"]),
                "texts_per_second": dg.MetadataValue.float(meta["texts_per_second"] or 0.0),
                "tokens": dg.MetadataValue.int(meta["tokens"] or 0),
                "normalized": dg.MetadataValue.bool(meta["normalized"]),
                "backend": dg.MetadataValue.json(meta["backend"]),
                "card_hash": dg.MetadataValue.text(model.card_hash),
                "path": dg.MetadataValue.path(str(result.path)),
            },
            data_version=dg.DataVersion(result.path.stem + "@" + model.card_hash[:16]),
            check_results=[dg.AssetCheckResult(check_name="vectors_valid", passed=not problems,
                                               metadata={"problems": dg.MetadataValue.json(problems)})],
        )

    return embeddings


query_embeddings = _embedding_asset("query")
document_embeddings = _embedding_asset("document")
