"""Query and document embeddings per (model, dataset), cached by (card hash, input table hash),
and their raw twins (pyramid L1). One forward pass per text writes both: the raw vectors come
from the model without its final Normalize module, the card's are derived from them. Per L2
task family F, ``F_embeddings`` (model × F dataset) holds the card's vectors of the dataset's
texts. Every vector the graph computes is one of these assets' materializations, of its own
card's partition; the assets that use vectors read them from the cache. A card that differs
from another only by its dimension cut or normalization encodes nothing: its tables derive from
the other card's raw table of the same forward pass (``derived_from`` in the metadata).

One corpus on many workers. ``query_embeddings`` and ``document_embeddings`` are graph-backed:
``<kind>_shard_plan`` lists the shards of the table still to encode (none on a cache hit, and
none when the table is one shard: that one is encoded by the last step), each is encoded by a
``<kind>_encode_shard[<i>]`` step of its own (Dagster's dynamic outputs), and
``<kind>_write_tables`` writes both tables from the shards and runs the checks. Under the
multiprocess or Kubernetes executor the shard steps run at once, each in its own process or pod;
a failed shard step reruns alone (re-execution from failure) and a finished shard is never
encoded again. The shard steps take no data-folder lock: each writes only its own shard file,
atomically (:mod:`embedpyramid.encode.tables`).

A step that encodes holds a slot of its card's pool while it does (``gpu``, ``api/<card>`` or
``encoders``; a cache hit holds none), so a backfill of many models does not oversubscribe a
device or an API (:mod:`graphbase.pools`): as many shards of a table encode at once as the pool
has slots. The assets are built per config folder: their op tags ask the Kubernetes executor for
a GPU when one of the folder's cards runs on cuda.
"""

import time
import warnings

import dagster as dg

from assets.metadata import partition_check, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.data import ENCODED_TABLE, EncodingInputs, FrozenDataset, encoding_inputs
from embedpyramid.encode import (
    PLURAL,
    Kind,
    embed_table,
    encode_shard,
    table_problems,
    unfinished_shards,
)
from embedpyramid.progress import report
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import MODEL_CARD, TASK_FACETS, facet_deps
from graphbase.partitions import TASK_FAMILIES, model_dataset_partitions, task_partitions
from resources import EncoderRegistry, ProjectResource

# Unit(raw) may differ from the shipped model's output only by float rounding.
DIRECTION_TOLERANCE = 1e-5
PROGRESS_SECONDS = 30.0


def progress_logger(context: dg.OpExecutionContext | dg.AssetExecutionContext, what: str):
    """A progress callback that logs to Dagster at every tenth of the work and at least every
    30 s, never per batch, and feeds the command's live line (:mod:`embedpyramid.progress`)."""
    state = {"tenth": 0, "logged": time.monotonic()}

    def progress(done: int, total: int) -> None:
        report(what, done, total)
        tenth = done * 10 // max(total, 1)
        now = time.monotonic()
        if tenth > state["tenth"] or now - state["logged"] >= PROGRESS_SECONDS:
            state["tenth"], state["logged"] = max(tenth, state["tenth"]), now
            context.log.info(f"{what}: {done:,}/{total:,} ({100 * done / max(total, 1):.0f}%)")

    return progress


_INPUTS: dict[tuple[str, str, str], EncodingInputs] = {}
"""The texts of the table whose shards this process is encoding (at most one table)."""


def _table_inputs(frozen: FrozenDataset, kind: Kind, *, keep: bool) -> EncodingInputs:
    """The ``kind`` texts of a frozen dataset, read once for the plan, the shard steps and the
    table writer that one process runs (the CLI runs them all): ``keep`` holds them for the next
    step, the writer's call lets them go."""
    key = (str(frozen.directory), kind, frozen.table_sha(ENCODED_TABLE[kind]))
    inputs = _INPUTS.get(key) or encoding_inputs(frozen, kind)
    _INPUTS.clear()
    if keep:
        _INPUTS[key] = inputs
    return inputs


def _checks(name: str, raw: bool) -> list[dg.AssetCheckSpec]:
    checks = [partition_check("vectors_valid", name, model_dataset_partitions,
                              "One finite, non-zero vector of the card's dimension per row", blocking=True)]
    if raw:
        checks.append(partition_check(
            "direction_preserved", name, model_dataset_partitions,
            f"max |unit(raw) - shipped model output| <= {DIRECTION_TOLERANCE} on every text, in the encode's "
            "own forward pass", blocking=True))
    return checks


def _materialize(context: dg.OpExecutionContext, project: ProjectResource, encoders: EncoderRegistry, kind: Kind,
                 raw: bool) -> dg.MaterializeResult:
    """The table of the partition's card and ``kind`` texts (encoding the shards not finished yet
    and writing both tables on a cache miss), its metadata and its checks."""
    part = project.partition(context)
    model, frozen = part.model, part.frozen
    inputs = _table_inputs(frozen, kind, keep=False)
    progress = progress_logger(context, f"encoded {PLURAL[kind]} with {model.key}")
    with encoders.on_demand(context, model) as encoder:
        result = embed_table(part.store, model, kind, inputs, encoder, progress, raw=raw)
    meta = result.metadata
    for note in meta["notes"]:
        context.log.warning(f"model card {model.name!r}: {note}")
    if meta["empty_ids"]:
        context.log.warning(f"{len(meta['empty_ids'])} empty {PLURAL[kind]} encoded as the empty string: "
                            f"{', '.join(meta['empty_ids'])}")
    problems = table_problems(result.path, inputs.ids, model.card.dimension or meta["dim"])
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
        "norms": dg.MetadataValue.json(meta["norms"]),
        "shards": dg.MetadataValue.json(meta["shards"]),
        "empty_ids": dg.MetadataValue.json(meta["empty_ids"]),
        "notes": dg.MetadataValue.json(meta["notes"]),
        "backend": dg.MetadataValue.json(meta["backend"]),
        "card_hash": dg.MetadataValue.text(model.card_hash),
        "card_key": dg.MetadataValue.text(model.key),
        "path": dg.MetadataValue.path(str(result.path)),
    }
    if "derived_from" in meta:
        metadata["derived_from"] = dg.MetadataValue.text(meta["derived_from"]["model_key"])
    if raw:
        check = meta["direction_check"]
        difference = check["max_abs_difference"]
        metadata["direction_difference"] = dg.MetadataValue.float(difference)
        turned = [] if difference <= DIRECTION_TOLERANCE else [
            f"max |unit(raw) - shipped| = {difference:.3g} > {DIRECTION_TOLERANCE} on {check['sample']} texts: "
            "the model's final Normalize module does not return unit(its input), so the raw vectors do not have "
            "the shipped model's directions"]
        check_results.append(dg.AssetCheckResult(
            check_name="direction_preserved", passed=not turned,
            metadata={"max_abs_difference": dg.MetadataValue.float(difference),
                      "sample": dg.MetadataValue.int(check["sample"]),
                      "problems": dg.MetadataValue.json(turned)}))
    return with_provenance(context, project, dg.MaterializeResult(
        metadata=metadata,
        data_version=dg.DataVersion(result.path.stem + "@" + model.card_hash[:16]),
        check_results=check_results,
    ))


def _raw_embedding_asset(kind: Kind, op_tags: dict[str, str]) -> dg.AssetsDefinition:
    name = f"raw_{kind}_embeddings"

    @dg.asset(
        name=name,
        partitions_def=model_dataset_partitions,
        deps=["frozen_dataset", f"{kind}_embeddings", *facet_deps(MODEL_CARD)],
        group_name="l1_geometry",
        code_version=function_version(__file__, "_raw_embedding_asset"),
        kinds={"parquet", "torch"},
        op_tags=op_tags,
        automation_condition=EVALUATE_WHEN_STALE,
        check_specs=_checks(name, raw=True),
    )
    def raw_embeddings(
        context: dg.AssetExecutionContext, project: ProjectResource, encoders: EncoderRegistry
    ) -> dg.MaterializeResult:
        return _materialize(context.op_execution_context, project, encoders, kind, raw=True)

    return raw_embeddings


def _sharded_embedding_asset(kind: Kind, op_tags: dict[str, str]) -> dg.AssetsDefinition:
    """``<kind>_embeddings`` as plan → one step per unfinished shard → write tables (see the
    module docstring)."""
    name = f"{kind}_embeddings"

    @dg.op(name=f"{kind}_shard_plan", ins={"frozen_dataset": dg.In(dg.Nothing), "model_card": dg.In(dg.Nothing)},
           out=dg.DynamicOut(int), required_resource_keys={"shard_project"})
    def shard_plan(context: dg.OpExecutionContext):
        """One output per shard still to encode, when the table has more than one."""
        part = context.resources.shard_project.partition(context)
        shards = unfinished_shards(part.store, part.model, kind, _table_inputs(part.frozen, kind, keep=True))
        if len(shards) > 1:
            context.log.info(f"{len(shards)} shards of {part.model.card.run.shard_size} {PLURAL[kind]} to encode")
            for index in shards:
                yield dg.DynamicOutput(index, mapping_key=str(index))

    @dg.op(name=f"{kind}_encode_shard", tags=op_tags, required_resource_keys={"shard_project", "encoders"})
    def encode_one_shard(context: dg.OpExecutionContext, index: int) -> int:
        part = context.resources.shard_project.partition(context)
        progress = progress_logger(context, f"encoded {PLURAL[kind]} of shard {index} with {part.model.key}")
        with context.resources.encoders.on_demand(context, part.model) as encoder:
            encoded = encode_shard(part.store, part.model, kind, _table_inputs(part.frozen, kind, keep=True), encoder(),
                                   index, progress)
        if not encoded:
            context.log.info(f"shard {index} was already finished")
        return index

    checks = _checks(name, raw=False)
    # A graph asset's checks are outputs of the graph, named <asset>_<check> (Dagster's naming).
    check_outputs = [f"{name}_{spec.name}" for spec in checks]

    @dg.op(name=f"{kind}_write_tables", tags=op_tags, required_resource_keys={"project", "encoders"},
           out={"result": dg.Out(dg.Nothing), **{output: dg.Out(dg.Nothing) for output in check_outputs}})
    def write_tables(context: dg.OpExecutionContext, shards: list[int]):
        result = _materialize(context, context.resources.project, context.resources.encoders, kind, raw=False)
        with warnings.catch_warnings():
            # An op's Output takes a data version only in beta (Dagster 1.13), and the graph asset of
            # the sharded encode is ops: its data version must be the table's content, as every
            # other asset's is, for the stale status to follow it.
            warnings.simplefilter("ignore", dg.BetaWarning)
            output = dg.Output(None, "result", metadata=result.metadata, data_version=result.data_version)
        yield output
        yield from result.check_results

    def compose(frozen_dataset, model_card):
        written = write_tables(shard_plan(frozen_dataset=frozen_dataset, model_card=model_card)
                               .map(encode_one_shard).collect())
        return {"result": written.result, **{output: getattr(written, output) for output in check_outputs}}

    return dg.graph_asset(
        compose, name=name, partitions_def=model_dataset_partitions,
        ins={"frozen_dataset": dg.AssetIn("frozen_dataset", dagster_type=dg.Nothing),
             "model_card": dg.AssetIn(MODEL_CARD.key, dagster_type=dg.Nothing)},
        group_name="embeddings", code_version=function_version(__file__, "_sharded_embedding_asset"), kinds={"parquet", "torch"},
        automation_condition=EVALUATE_WHEN_STALE, check_specs=checks,
        description=f"The card's vectors of the dataset's {PLURAL[kind]}, encoded shard by shard (one step per "
                    "shard of a table of several), cached and content-addressed.",
    )


_TASK_FACET = {facet.partitioned_by: facet for facet in TASK_FACETS}


def _task_embedding_asset(family: str, op_tags: dict[str, str]) -> dg.AssetsDefinition:
    @dg.asset(
        name=f"{family}_embeddings",
        partitions_def=task_partitions[family],
        deps=[f"frozen_{family}_dataset", *facet_deps(MODEL_CARD, _TASK_FACET[family])],
        group_name="embeddings",
        code_version=function_version(__file__, "task_embeddings"),
        kinds={"parquet", "torch"},
        op_tags=op_tags,
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"The card's vectors of every text of a {family} dataset, encoded once with the prompt of the "
                    "dataset's text kind (reranking: queries with the query prompt, candidates with the document "
                    "prompt; cached, content-addressed); the task and its pair sanity read them.",
    )
    def task_embeddings(context: dg.AssetExecutionContext, project: ProjectResource,
                        encoders: EncoderRegistry) -> dg.MaterializeResult:
        from embedpyramid.tasks.level import encode_task_texts

        part = project.partition(context)
        model = part.model
        with encoders.on_demand(context, model) as encoder:
            results = encode_task_texts(part.store, model, part.frozen, part.config.task_dataset(part.dataset),
                                        encoder, progress_logger(context, f"encoded texts with {model.key}"))
        first = results[0].metadata
        return with_provenance(context, project, dg.MaterializeResult(
            metadata={
                "rows": dg.MetadataValue.int(sum(result.metadata["rows"] for result in results)),
                "dim": dg.MetadataValue.int(first["dim"]),
                # The task asset's key before these vectors had an asset of their own: `embedpyramid
                # run` reports the retrieval tables it encoded (cache_hit), as before.
                "embeddings_cache_hit": dg.MetadataValue.bool(all(result.cache_hit for result in results)),
                **({"derived_from": dg.MetadataValue.text(first["derived_from"]["model_key"])}
                   if "derived_from" in first else {}),
                "card_hash": dg.MetadataValue.text(model.card_hash),
                "card_key": dg.MetadataValue.text(model.key),
                "path": dg.MetadataValue.path(str(results[0].path)),
            },
            data_version=dg.DataVersion("+".join(result.path.stem for result in results) + "@" + model.card_hash[:16]),
        ))

    return task_embeddings


def embedding_assets(op_tags: dict[str, str]) -> list[dg.AssetsDefinition]:
    """Every embedding asset — query, document, their raw twins, and one per L2 task family —
    with ``op_tags`` on its step (:func:`graphbase.pools.model_step_tags` of the folder's cards)."""
    kinds: tuple[Kind, ...] = ("query", "document")
    return [*(_sharded_embedding_asset(kind, op_tags) for kind in kinds),
            *(_raw_embedding_asset(kind, op_tags) for kind in kinds),
            *(_task_embedding_asset(family, op_tags) for family in TASK_FAMILIES)]
