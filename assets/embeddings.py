"""Query and document embeddings per (model, dataset), cached by (card hash, input table hash),
and their raw twins (pyramid L1). One forward pass per text writes both: the raw vectors come
from the model without its final Normalize module, the card's are derived from them.

Every asset that runs a model takes a slot of the ``encoders`` pool, so a backfill of many
models does not oversubscribe the machine (one slot by default; see :func:`ensure_encoder_pool`).
"""

import time

import dagster as dg
import psutil

from embedpyramid.data import encoding_inputs
from embedpyramid.encode import DIRECTION_SAMPLE, PLURAL, Kind, embed_table, table_problems
from pipelines.partitions import model_dataset_partitions
from resources import EncoderRegistry, ProjectResource

# Unit(raw) may differ from the shipped model's output only by float rounding.
DIRECTION_TOLERANCE = 1e-5
ENCODER_POOL = "encoders"
ENCODER_POOL_LIMIT = 1
PROGRESS_SECONDS = 30.0


def ensure_encoder_pool(instance: dg.DagsterInstance, limit: int = ENCODER_POOL_LIMIT) -> list[str]:
    """Give the ``encoders`` pool ``limit`` slots unless the instance already has a limit for it
    (``dagster instance concurrency set encoders N`` keeps its own), and free the slots of runs
    that can no longer use them; returns those runs' ids.

    A run killed mid-encode stays STARTED in the instance with its slot claimed, and every later
    encode would wait for it forever. A claim is stale when its run has finished, or when the
    process that executed it in-process (the pid Dagster records when a run starts its steps)
    is gone from this machine; runs without such a record (launched elsewhere) are left alone.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    if ENCODER_POOL not in storage.get_concurrency_keys():
        storage.set_concurrency_slots(ENCODER_POOL, limit)
    info = storage.get_concurrency_info(ENCODER_POOL)
    holders = {slot.run_id for slot in info.claimed_slots} | {step.run_id for step in info.pending_steps}
    stale = [run_id for run_id in sorted(holders) if _cannot_hold_a_slot(instance, run_id)]
    for run_id in stale:
        storage.free_concurrency_slots_for_run(run_id)
    return stale


def _cannot_hold_a_slot(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    if run is None or run.is_finished:
        return True
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = record.dagster_event.engine_event_data if record.dagster_event else None
        pid = data.metadata.get("pid") if data is not None else None
        if pid is not None and str(pid.value).isdigit():
            return not psutil.pid_exists(int(pid.value))
    return False


def progress_logger(context: dg.AssetExecutionContext, what: str):
    """A progress callback that logs at every tenth of the work and at least every 30 s, never
    per batch."""
    state = {"tenth": 0, "logged": time.monotonic()}

    def progress(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        now = time.monotonic()
        if tenth > state["tenth"] or now - state["logged"] >= PROGRESS_SECONDS:
            state["tenth"], state["logged"] = max(tenth, state["tenth"]), now
            context.log.info(f"{what}: {done:,}/{total:,} ({100 * done / max(total, 1):.0f}%)")

    return progress


def _embedding_asset(kind: Kind, *, raw: bool) -> dg.AssetsDefinition:
    name = f"raw_{kind}_embeddings" if raw else f"{kind}_embeddings"
    checks = [dg.AssetCheckSpec("vectors_valid", asset=name, blocking=True,
                                description="One finite, non-zero vector of the card's dimension per row")]
    if raw:
        checks.append(dg.AssetCheckSpec(
            "direction_preserved", asset=name, blocking=True,
            description=f"max |unit(raw) - shipped model output| <= {DIRECTION_TOLERANCE} on {DIRECTION_SAMPLE} texts"))

    @dg.asset(
        name=name,
        partitions_def=model_dataset_partitions,
        deps=["frozen_dataset", f"{kind}_embeddings"] if raw else ["frozen_dataset"],
        group_name="l1_geometry" if raw else "embeddings",
        code_version="1",
        kinds={"parquet", "torch"},
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=checks,
        pool=ENCODER_POOL,
    )
    def embeddings(
        context: dg.AssetExecutionContext, project: ProjectResource, encoders: EncoderRegistry
    ) -> dg.MaterializeResult:
        part = project.partition(context)
        model, frozen = part.model, part.frozen
        inputs = encoding_inputs(frozen, kind)
        progress = progress_logger(context, f"encoded {PLURAL[kind]} with {model.key}")
        result = embed_table(part.store, model, kind, inputs, lambda: encoders.encoder(model), progress, raw=raw)
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
            "path": dg.MetadataValue.path(str(result.path)),
        }
        if raw:
            check = meta["direction_check"]
            difference = check["max_abs_difference"]
            metadata["direction_difference"] = dg.MetadataValue.float(difference)
            turned = [] if difference <= DIRECTION_TOLERANCE else [
                f"max |unit(raw) - shipped| = {difference:.3g} > {DIRECTION_TOLERANCE} on {check['sample']} texts: "
                "stripping the Normalize module changed directions, so the raw vectors are not this model's"]
            check_results.append(dg.AssetCheckResult(
                check_name="direction_preserved", passed=not turned,
                metadata={"max_abs_difference": dg.MetadataValue.float(difference),
                          "sample": dg.MetadataValue.int(check["sample"]),
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
