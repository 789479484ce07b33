"""Pools by resource: a step that runs a model holds a slot of the pool of the device that model
runs on, and only while it runs it.

- **Which pool.** A card with ``run: {device: cuda}`` (or ``cuda:N``) encodes in ``gpu``; a remote
  card (backend ``http`` or ``bedrock``) in a pool of its own, ``api/<card name>``; every other
  card, and the L5 cross-encoders (they run on the CPU), in ``encoders``. Each pool has one slot
  unless the instance already has a limit for it (``dagster instance concurrency set gpu 4`` is
  kept): one GPU, one CPU encode, and per API card one encode — its client paces requests at the
  card's whole ``api.requests_per_minute``, so a second encode at once would send the provider
  twice its rate limit.
- **Claimed by the step, per partition.** Dagster fixes an asset's ``pool`` per definition, while
  the card is a partition of the embedding assets: one definition serves a GPU card, an API card
  and a CPU card. So the model-running assets declare no ``pool``; the ``encoders`` resource
  claims the slot in Dagster's own pool tables when the step first loads the card's model (a
  cache hit loads nothing and takes none) and frees it when the step ends
  (:func:`pool_slot`). The UI's pool pages, ``dagster instance concurrency``, run monitoring's
  ``free_slots_after_run_end_seconds`` and :func:`ensure_pools` see these claims like any other.
  The price: a step waits for its slot inside its worker (a pod or process is up meanwhile), and
  an instance with ``concurrency.pools.granularity: run`` does not hold runs back in the queue by
  these pools (its run coordinator reads pools off the definitions).
- **Kubernetes.** A step pod's resources come from op tags (``dagster-k8s/config``), fixed per
  definition too. When a folder has a cuda card, every asset that can run a card's model carries
  :func:`k8s_gpu_tags` (one ``nvidia.com/gpu``), so in a folder mixing GPU and CPU or API cards
  the latter's steps also get a GPU pod; a folder of CPU and API cards requests none. An L5 rerank
  runs one known model, so its tags follow that model alone.
- **No ghosts.** :func:`ensure_pools` gives the pools of a config their default limits and frees
  the slots of runs that died holding one (any pool).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg
import psutil

from embedpyramid.config import ProjectConfig, ResolvedModel

ENCODER_POOL = "encoders"
GPU_POOL = "gpu"
API_POOL_PREFIX = "api/"
DEFAULT_POOL_LIMIT = 1
K8S_CONFIG_TAG = "dagster-k8s/config"
CLAIM_POLL_SECONDS = 1.0


def runs_on_gpu(model: ResolvedModel) -> bool:
    """Whether the card runs on a CUDA device (``run.device`` ``cuda`` or ``cuda:N``)."""
    return not model.is_remote and model.card.run.device.split(":")[0] == "cuda"


def card_pool(model: ResolvedModel) -> str:
    """The pool a step holds while it runs this card's model (see the module docstring)."""
    if model.is_remote:
        return API_POOL_PREFIX + model.name
    return GPU_POOL if runs_on_gpu(model) else ENCODER_POOL


def config_pools(config: ProjectConfig) -> list[str]:
    """Every pool a step of this config can claim: its cards' pools and, with an L5 cross-encoder,
    ``encoders``."""
    pools = [card_pool(model) for model in config.models.values()]
    if config.systems is not None and config.systems.cross_encoders:
        pools.append(ENCODER_POOL)
    return sorted(set(pools))


def k8s_gpu_tags(gpus: int = 1) -> dict[str, str]:
    """Op tags asking the Kubernetes executor (``k8s_job_executor``) for ``gpus`` NVIDIA GPUs
    for the step's pod (a GPU is requested through its limit; the request follows it)."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {K8S_CONFIG_TAG: json.dumps({"container_config": {"resources": resources}}, sort_keys=True)}


def model_step_tags(models: list[ResolvedModel]) -> dict[str, str]:
    """The op tags of an asset that may run any of ``models``: a GPU when one of them runs on one."""
    return k8s_gpu_tags() if any(runs_on_gpu(model) for model in models) else {}


def _ensure_limit(storage, pool: str, limit: int) -> None:
    if pool not in storage.get_concurrency_keys():
        storage.set_concurrency_slots(pool, limit)


def ensure_pools(instance: dg.DagsterInstance, config: ProjectConfig | None = None,
                 limit: int = DEFAULT_POOL_LIMIT) -> list[str]:
    """Give ``config``'s pools (:func:`config_pools`; ``encoders`` without a config) ``limit``
    slots unless the instance already has a limit for them, and free the slots any pool holds for
    runs that can no longer use them; returns those runs' ids.

    A run killed mid-encode stays STARTED in the instance with its slot claimed, and every later
    encode would wait for it forever. A claim is stale when its run has finished, or when the
    process that executed it in-process (the pid Dagster records when a run starts its steps)
    is gone from this machine; runs without such a record (launched elsewhere) are left alone.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    for pool in config_pools(config) if config is not None else [ENCODER_POOL]:
        _ensure_limit(storage, pool, limit)
    holders: set[str] = set()
    for info in storage.get_concurrency_infos(sorted(storage.get_concurrency_keys())).values():
        holders |= {slot.run_id for slot in info.claimed_slots} | {step.run_id for step in info.pending_steps}
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


@contextmanager
def pool_slot(instance: dg.DagsterInstance, pool: str, run_id: str, step_key: str,
              notify: Callable[[str], None]) -> Iterator[None]:
    """Hold a slot of ``pool`` for one step of run ``run_id``: wait in Dagster's queue of the pool
    (saying so once), and free the slot (or the place in the queue) when the block ends, however
    it ends. A pool without a limit gets the default one first; an instance without global
    concurrency limits (an in-memory one) has no pools to wait for."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        yield
        return
    _ensure_limit(storage, pool, DEFAULT_POOL_LIMIT)
    try:
        told = False
        while not (status := storage.claim_concurrency_slot(pool, run_id, step_key)).is_claimed:
            if not told:
                notify(f"waiting for a slot of pool {pool!r} ({storage.get_concurrency_info(pool).slot_count} "
                       "in all, every one taken)")
                told = True
            time.sleep(status.sleep_interval or CLAIM_POLL_SECONDS)
        yield
    finally:
        storage.free_concurrency_slot_for_step(run_id, step_key)
