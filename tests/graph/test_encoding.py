"""Graph tests of encoding at scale: a killed encode resumes bit-identically, encodes wait for
the encoder pool, a remote card runs the whole graph (its key nowhere), efficiency and empty
texts reach results.duckdb and the report."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from graph_helpers import embeddings_reply, started_run, step_intervals
from stub_server import Reply, StubServer

from embedpyramid.config import load_config
from embedpyramid.hashing import sha256_table
from embedpyramid.store import ArtifactStore, read_table
from graphbase.instance import open_instance
from graphbase.partitions import model_dataset_key
from graphbase.pools import ENCODER_POOL, ensure_pools
from pipelines.runner import run_pipeline
from pipelines.session import open_session
from pipelines.status import project_status

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-graph-5b7e9d1f3a"


def fast_protocol() -> dict:
    protocol = yaml.safe_load((REPO_ROOT / "configs" / "protocol.yaml").read_text())
    protocol["comparison"] = {**protocol["comparison"], "n_resamples": 200, "n_permutations": 200}
    protocol["comparison"].pop("baseline")
    return protocol


def artefacts(data: Path) -> dict[str, str]:
    """Content hash of every embedding, run and metric table under a data folder."""
    tables = [*data.glob("embeddings/*/*.parquet"), *data.glob("runs/*/*/*.parquet"), *data.glob("metrics/*/*/*.parquet")]
    return {str(path.relative_to(data)): sha256_table(read_table(path)) for path in tables}


@pytest.mark.heavy
def test_a_killed_encode_resumes_to_bit_identical_tables_and_metrics(write_configs, default_models, tmp_path):
    minilm = default_models["minilm-l6"]
    run = {**minilm["run"], "shard_size": 8, "latency_queries": 5, "latency_repeats": 1}
    datasets = {"chatterbot-small": {"loader": "chatterbot", "categories": ["ai", "computers"]}}
    folder = write_configs(models={"minilm-l6": {**minilm, "run": run}}, datasets=datasets, protocol=fast_protocol())
    reference = run_pipeline(folder, tmp_path / "whole", instance=dg.DagsterInstance.ephemeral(), log=lambda _: None)
    assert reference.failures == []

    killed = tmp_path / "killed"
    env = {key: value for key, value in os.environ.items() if key != "DAGSTER_HOME"}
    process = subprocess.Popen([sys.executable, "-m", "embedpyramid.cli", "run", "--configs", str(folder),
                                "--data", str(killed)], cwd=REPO_ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, shards = time.monotonic() + 300, []
    while time.monotonic() < deadline and process.poll() is None:
        shards = [p for d in killed.glob("embeddings/*/.*.shards-8") for p in d.glob("[0-9]*.parquet")]
        if len(shards) >= 2:
            break
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert len(shards) >= 2, "the encode finished before it could be killed"
    kind = shards[0].parent.name.split("-")[0].lstrip(".")
    assert not list(killed.glob(f"embeddings/*/{kind}-[0-9a-f]*.parquet"))  # killed mid-encode: no table yet
    # The killed run recorded no failure itself: status marks it failed and shows its partition failed.
    rows = {(row.model, row.level): row for row in project_status(folder, killed)}
    key = load_config(folder).models["minilm-l6"].key
    assert rows[(key, "embeddings")].state == "failed"
    assert "last run failed" in rows[(key, "embeddings")].why

    resumed = run_pipeline(folder, killed, log=lambda _: None)
    assert resumed.failures == []
    mine, theirs = artefacts(killed), artefacts(tmp_path / "whole")
    assert mine == theirs and len(mine) == 6  # 4 embedding tables (query, document, raw), the exact run, its metrics
    store = ArtifactStore(killed)
    model = load_config(folder).models["minilm-l6"]
    for table in killed.glob(f"embeddings/*/{kind}-[0-9a-f]*.parquet"):
        assert json.loads(read_table(table).schema.metadata[b"embedpyramid"])["shards"]["resumed"] >= 2
    assert not list(killed.glob("embeddings/*/.*.shards-*"))
    assert store.metrics_path("chatterbot-small", model.key, "exact").is_file()


@pytest.mark.heavy
def test_the_shards_of_a_corpus_encode_as_steps_of_their_own_two_processes_at_a_time(write_configs, default_models,
                                                                                     tmp_path):
    """MiniLM on a corpus of 4 shards: ``dagster asset materialize`` with the multiprocess
    executor (2 at a time) and an encoder pool of 2 slots runs one step per shard, two at once in
    separate processes, and writes the table the CLI writes in one process (about 40 s)."""
    minilm = default_models["minilm-l6"]
    datasets = {"chatterbot-small": {"loader": "chatterbot", "categories": ["ai"]}}
    folder = write_configs(models={"minilm-l6": minilm}, datasets=datasets, protocol=fast_protocol())
    here, there = tmp_path / "here", tmp_path / "there"
    session = open_session(folder, here, dg.DagsterInstance.ephemeral(), log=lambda _: None, verbose=False)
    assert session.execute("refresh_datasets", ["frozen_dataset"], "chatterbot-small", {}).success
    documents = len(read_table(here / "datasets" / "chatterbot-small" / "corpus.parquet"))
    # Run settings are not hashed: the shard size changes no key, only how the work is cut.
    settings = {**minilm["run"], "shard_size": -(-documents // 4)}
    folder = write_configs(models={"minilm-l6": {**minilm, "run": settings}}, datasets=datasets,
                           protocol=fast_protocol())
    key = model_dataset_key("minilm-l6", "chatterbot-small")
    session = open_session(folder, here, session.instance, log=lambda _: None, verbose=False)
    assert session.execute("evaluate", ["document_embeddings"], key, {}).success

    env = {**{k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"},
           "EMBEDPYRAMID_CONFIGS": str(folder), "EMBEDPYRAMID_DATA": str(there)}
    instance_dir = there / "dagster_home"
    remote = open_session(folder, there, open_instance(there), log=lambda _: None, verbose=False)
    assert remote.execute("refresh_datasets", ["frozen_dataset"], "chatterbot-small", {}).success
    remote.instance.event_log_storage.set_concurrency_slots(ENCODER_POOL, 2)
    executor = {"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}}
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "pipelines.definitions",
         "--select", "document_embeddings", "--partition", str(key), "--config-json", json.dumps(executor)],
        cwd=REPO_ROOT, env={**env, "DAGSTER_HOME": str(instance_dir)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    instance = dg.DagsterInstance.from_config(str(instance_dir))
    materialized = instance.get_runs(limit=1)[0]
    assert materialized.status == dg.DagsterRunStatus.SUCCESS
    steps = step_intervals(instance, materialized.run_id)
    shards = sorted((step, (start, end)) for start, end, step, _ in steps if ".document_encode_shard[" in step)
    assert [step for step, _ in shards] == [f"document_embeddings.document_encode_shard[{i}]" for i in range(4)]
    assert len({pid for *_, pid in steps}) == len(steps)  # every step a process of its own
    spans = sorted(span for _, span in shards)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), \
        f"no two shard steps ran at once: {spans}"
    latest = instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey("document_embeddings"),
                                                                   asset_partitions=[key]), limit=1).records[0]
    assert latest.asset_materialization.metadata["shards"].value == {"size": settings["shard_size"], "count": 4,
                                                                      "resumed": 4}
    assert artefacts(there) == artefacts(here)


def test_ctrl_c_stops_the_whole_command_marks_its_run_canceled_and_the_rerun_resumes(write_configs, default_models,
                                                                                       tmp_path):
    minilm = default_models["minilm-l6"]
    run = {**minilm["run"], "shard_size": 8, "latency_queries": 5, "latency_repeats": 1}
    datasets = {"chatterbot-small": {"loader": "chatterbot", "categories": ["ai", "computers"]},
                "chatterbot-other": {"loader": "chatterbot", "categories": ["food", "history"]}}
    folder = write_configs(models={"minilm-l6": {**minilm, "run": run}}, datasets=datasets, protocol=fast_protocol())
    data = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if key != "DAGSTER_HOME"}
    process = subprocess.Popen([sys.executable, "-m", "embedpyramid.cli", "run", "--configs", str(folder),
                                "--data", str(data)], cwd=REPO_ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, shards = time.monotonic() + 300, []
    while time.monotonic() < deadline and process.poll() is None:
        shards = [p for d in data.glob("embeddings/*/.*.shards-8") for p in d.glob("[0-9]*.parquet")]
        if len(shards) >= 2:
            break
        time.sleep(0.02)
    assert len(shards) >= 2, "the encode finished before it could be interrupted"
    process.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    _, err = process.communicate(timeout=60)
    assert time.monotonic() - interrupted < 5.0 and process.returncode == 130, err
    assert "interrupted: the run in progress is marked canceled" in err
    # The command stopped: the second dataset was not evaluated; the interrupted run is canceled.
    instance = dg.DagsterInstance.from_config(str(data / "dagster_home"))
    runs = instance.get_runs()
    assert runs[0].status == dg.DagsterRunStatus.CANCELED
    assert not any(run.tags.get("dagster/partition", "").endswith("chatterbot-other")
                   and run.job_name.startswith("evaluate") for run in runs)
    # What finished is kept and nothing is half-written; the rerun resumes the encode.
    assert [p for d in data.glob("embeddings/*/.*.shards-8") for p in d.glob("[0-9]*.parquet")]
    assert not list(data.rglob("*.tmp"))
    resumed = run_pipeline(folder, data, datasets=["chatterbot-small"], log=lambda _: None)
    assert resumed.failures == [] and len(resumed.materialized) == 1
    tables = list(data.glob("embeddings/*/*-[0-9a-f]*.parquet"))
    assert any(json.loads(read_table(table).schema.metadata[b"embedpyramid"])["shards"]["resumed"] >= 2
               for table in tables)


def test_encodes_wait_for_a_slot_of_the_encoder_pool_and_dead_holders_free_theirs(write_configs, small_chatterbot,
                                                                                  tmp_path):
    toy = {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 32}}
    folder = write_configs(models={"toy": toy}, datasets=small_chatterbot, protocol=fast_protocol())
    instance = open_instance(tmp_path / "data")
    storage = instance.event_log_storage
    storage.set_concurrency_slots(ENCODER_POOL, 3)
    ensure_pools(instance)
    assert storage.get_concurrency_info(ENCODER_POOL).slot_count == 3  # a limit the user set is kept
    storage.delete_concurrency_limit(ENCODER_POOL)
    ensure_pools(instance)
    assert storage.get_concurrency_info(ENCODER_POOL).slot_count == 1  # default: one encode at a time

    # A run killed mid-encode keeps its slot: the next start frees it (its process is gone).
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    started_run(instance, "killed-run", int(finished.stdout))
    assert storage.claim_concurrency_slot(ENCODER_POOL, "killed-run", "its-encode").is_claimed
    assert ensure_pools(instance) == ["killed-run"]
    assert storage.get_concurrency_info(ENCODER_POOL).claimed_slots == []

    # A live run holding the only slot makes the encodes wait until it lets go.
    started_run(instance, "live-run", os.getpid())
    assert storage.claim_concurrency_slot(ENCODER_POOL, "live-run", "its-encode").is_claimed
    reports = []
    worker = threading.Thread(target=lambda: reports.append(run_pipeline(folder, tmp_path / "data", instance=instance,
                                                                        log=lambda _: None)))
    worker.start()
    model = load_config(folder).models["toy"]
    key = model_dataset_key(model.name, "chatterbot-small")
    time.sleep(5)
    waiting = instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey("query_embeddings"),
                                                                    asset_partitions=[key]), limit=1).records
    assert worker.is_alive() and waiting == []  # the dataset froze, the encodes wait for the slot
    storage.free_concurrency_slot_for_step("live-run", "its-encode")
    worker.join(timeout=300)
    assert reports and reports[0].failures == [] and reports[0].materialized == [(model.key, "chatterbot-small")]


def write_cranfield_like(folder: Path) -> Path:
    """A BEIR folder with two empty documents, one judged relevant (as in BEIR's Cranfield)."""
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": str(i), "title": "", "text": f"document {i} about wings and flow {i % 7}"} for i in range(40)]
    corpus += [{"_id": "471", "title": "", "text": ""}, {"_id": "995", "title": "", "text": ""}]
    queries = [{"_id": f"q{i}", "text": f"flow {i} wings"} for i in range(12)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries))
    qrels = "".join(f"q{i}\t{i * 3}\t1\n" for i in range(12)) + "q5\t995\t1\n"
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def test_a_remote_card_runs_the_graph_beside_a_local_one_and_its_key_appears_nowhere(
        write_configs, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("STUB_API_KEY", KEY)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    throttled = iter([Reply(status=429, json={"error": f"rate limited for Bearer {KEY}"}, headers={"Retry-After": "0"})])

    def handler(request):
        return next(throttled, None) or embeddings_reply(request)

    beir = write_cranfield_like(tmp_path / "cranfield")
    with StubServer(handler) as server:
        models = {
            "ngrams": {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 24},
                       "run": {"price_per_device_hour": 1.0}},
            "remote": {"backend": "http", "source": {"url": server.url + "/v1/embeddings", "model": "stub"},
                       "api": {"key_env": "STUB_API_KEY", "price_per_million_tokens": 0.5}, "run": {"batch_size": 8}},
        }
        folder = write_configs(models=models, datasets={"cran": {"loader": "beir", "path": str(beir)}},
                               protocol=fast_protocol())
        report = run_pipeline(folder, tmp_path / "data", log=print)
        requests = len(server.requests)
    assert report.failures == [] and requests > 1
    config = load_config(folder)
    with duckdb.connect(str(tmp_path / "data" / "results.duckdb"), read_only=True) as con:
        rows = {row[0]: row[1:] for row in con.sql(
            "SELECT name, cost_basis, cost, document_tokens, query_tokens, latency_p50_ms, search_qps, quality "
            "FROM efficiency").fetchall()}
    basis, cost, doc_tokens, query_tokens, latency, qps, quality = rows["remote"]
    assert basis == "api tokens" and cost == pytest.approx(0.5 * (doc_tokens + query_tokens) / 1e6)
    assert latency > 0 and qps > 0 and 0 <= quality <= 1
    local = rows["ngrams"]
    assert local[0] == "device-seconds" and local[1] > 0 and local[5] > 0

    # Empty documents are kept, encoded as the empty string, and listed in the manifest and the report.
    manifest = json.loads((tmp_path / "data" / "datasets" / "cran" / "manifest.json").read_text())
    assert manifest["empty_texts"] == {"documents": ["471", "995"], "queries": []}
    report_md = (tmp_path / "data" / "report" / "report.md").read_text()
    assert "## Data notes: cran" in report_md and "471, 995" in report_md
    assert "## Cost and quality: cran" in report_md and "cost-quality-cran.svg" in report_md
    assert (tmp_path / "data" / "report" / "figures" / "cost-quality-cran.svg").is_file()

    # The key: never in a log, an artefact, the Dagster instance, the report or the output.
    captured = capfd.readouterr()
    assert KEY not in captured.out + captured.err
    leaks = [str(path) for path in tmp_path.rglob("*") if path.is_file() and KEY.encode() in path.read_bytes()]
    assert leaks == []
    assert config.models["remote"].card.api.key_env == "STUB_API_KEY"
