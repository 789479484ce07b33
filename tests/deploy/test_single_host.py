"""The single-host deployment on real parts: PostgreSQL (the Debian package) and an S3 HTTP API
(moto's server mode) on 127.0.0.1, ``dagster-daemon`` with the queue and
docs/instance/single-host.yaml, artefacts in the bucket.

One small config (the 12-document BEIR dataset, one slow trigram card, L1/L2 only) is evaluated
three ways — in-process on a local folder (the reference), by ``embedpyramid run --data s3://...``
on a Postgres instance, and unattended by the daemon (config sensor, automation, queue, run
workers) on another — and every table of results.duckdb is the same but timing. While the
daemon's first encode holds the ``encoders`` slot its run worker is killed with SIGKILL: the code
server marks the run failed, run monitoring frees the slot within a minute
(``free_slots_after_run_end_seconds``), the run retry relaunches it, and the relaunch's results
are the same. Everything started here is stopped by PID.

The code location runs with two settings of pipelines/settings.py that keep this to minutes:
``EMBEDPYRAMID_SENSOR_INTERVAL=5`` (the sensors tick every 5 s, not 30: the automation needs a tick
for the dataset, one for the partition, one for the summaries, and more after the kill) and
``EMBEDPYRAMID_EXECUTOR=in_process`` (a run's steps execute in its worker, not a process each that
loads the code location again).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import boto3
import dagster as dg
import duckdb
import polars as pl
import psutil
import pytest
from graph_helpers import beir_folder, quick_protocol
from local_servers import S3, Postgres, require_cluster_packages, stop

from embedpyramid.store import StorePath, local_file, store_path
from graphbase.pools import ENCODER_POOL, ensure_pools
from pipelines.runner import run_pipeline

require_cluster_packages()

REPO = Path(__file__).resolve().parents[2]
INSTANCE_FILE = REPO / "docs" / "instance" / "single-host.yaml"
BUCKET = "embedpyramid-deploy"
MODEL = "ngrams-slow"
# Half a second per batch of 4 texts: an encode is still running when its worker is killed.
CARD = {"backend": "entry-point", "entry_point": "toy_encoders:SlowNgrams", "options": {"dim": 32, "seconds": 0.5},
        "run": {"batch_size": 4, "latency_queries": 2, "latency_repeats": 1}}
# How long a run took, not what it computed; a relaunch also reads the killed run's cached texts.
TIMING_SUFFIXES = ("_seconds", "_per_second", "_per_second_encoded", "_ms", "_qps", "_rss_bytes", "cost")
TIMING_COLUMNS = {"texts_from_cache"}
T = TypeVar("T")


def results_tables(db: StorePath) -> dict[str, pl.DataFrame]:
    """Every table of a results.duckdb, without its timing columns and the source files'
    fingerprints (modification times, ETags), its rows sorted (a database updated file by file
    holds its rows in the order of the updates)."""
    with local_file(db) as path, duckdb.connect(str(path), read_only=True) as con:
        names = [row[0] for row in con.sql(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' ORDER BY 1").fetchall()]
        frames = {name: con.sql(f'SELECT * FROM "{name}"').pl() for name in names}
    tables = {name: frame.drop([column for column in frame.columns if column.endswith(TIMING_SUFFIXES)
                                or column in TIMING_COLUMNS or column == "fingerprint"])
              for name, frame in frames.items()}
    return {name: frame.sort([column for column, dtype in frame.schema.items() if not dtype.is_nested()])
            for name, frame in tables.items()}


def assert_same_results(db: StorePath, reference: dict[str, pl.DataFrame]) -> None:
    tables = results_tables(db)
    assert sorted(tables) == sorted(reference)
    for name, frame in reference.items():
        assert tables[name].equals(frame), f"{db}: table {name} differs from the local run"
    assert reference["t_per_query_metrics"].height > 0


def wait_until(condition: Callable[[], T], timeout: float, what: str, log: Path | None = None) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log else ""
    raise AssertionError(f"no {what} within {timeout:.0f} s\n{tail}")


def service_env(postgres: Postgres, s3: S3, database: str, home: Path, configs: Path, data: str) -> dict[str, str]:
    """The environment of a process using one instance: the variables single-host.yaml reads, the
    folders the code location reads, and the test encoders on the path."""
    path = [str(REPO), str(REPO / "tests" / "fixtures"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, **postgres.env(database), **s3.env(), "EMBEDPYRAMID_LOGS_BUCKET": BUCKET,
            "DAGSTER_HOME": str(home), "EMBEDPYRAMID_CONFIGS": str(configs), "EMBEDPYRAMID_DATA": data,
            "PYTHONPATH": os.pathsep.join(path), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def new_home(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(INSTANCE_FILE, folder / "dagster.yaml")
    return folder


def kill_tree(pid: int) -> None:
    """SIGKILL a process and its children, as a dying host or pod would."""
    process = psutil.Process(pid)
    for victim in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.send_signal(signal.SIGKILL)


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    """The PID the run worker recorded when it started ("Started process for run")."""
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = record.dagster_event.engine_event_data if record.dagster_event else None
        pid = data.metadata.get("pid") if data is not None else None
        if pid is not None:
            return int(pid.value)
    raise AssertionError(f"run {run_id} recorded no process id")


def slot_holders(instance: dg.DagsterInstance) -> set[str]:
    return {slot.run_id for slot in instance.event_log_storage.get_concurrency_info(ENCODER_POOL).claimed_slots}


def stop_daemon(daemon: subprocess.Popen) -> None:
    """SIGTERM to the daemon (it stops its code server), then SIGKILL whatever of it is left."""
    try:
        descendants = psutil.Process(daemon.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    for process in descendants:
        try:
            process.wait(10)
        except psutil.TimeoutExpired:
            process.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.mark.heavy
def test_one_host_on_postgres_and_s3_gives_the_local_numbers_and_survives_a_killed_worker(
        postgres, s3, write_configs, tmp_path, monkeypatch):
    started = time.monotonic()

    def mark(what: str) -> None:
        """Where the test's time goes (shown with pytest -s)."""
        print(f"{time.monotonic() - started:5.0f} s  {what}")

    datasets = {"tiny": {"loader": "beir", "path": str(beir_folder(tmp_path / "tiny-beir"))}}
    configs = write_configs(models={MODEL: CARD}, datasets=datasets, protocol=quick_protocol(baseline=MODEL))
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    for database in ("cli", "queue"):
        postgres.create_database(database)

    # The daemon's instance: one encoder slot (as `embedpyramid run` or `dagster instance
    # concurrency set encoders 1` would set it), then the daemon with the shipped instance file.
    queue_home = new_home(tmp_path / "queue-home")
    queue_env = {**service_env(postgres, s3, "queue", queue_home, configs, f"s3://{BUCKET}/queue"),
                 "EMBEDPYRAMID_SENSOR_INTERVAL": "5", "EMBEDPYRAMID_EXECUTOR": "in_process"}
    for name, value in postgres.env("queue").items():
        monkeypatch.setenv(name, value)
    queue = dg.DagsterInstance.from_config(str(queue_home))
    ensure_pools(queue)
    daemon_log, cli = tmp_path / "daemon.log", None
    with open(daemon_log, "wb") as log:
        daemon = subprocess.Popen([str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", "workspace.yaml"],
                                  cwd=REPO, env=queue_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        cli_home, cli_log = new_home(tmp_path / "cli-home"), tmp_path / "cli.log"
        with open(cli_log, "wb") as log:
            cli = subprocess.Popen(
                [sys.executable, "-m", "embedpyramid.cli", "run", "--configs", str(configs), "--data",
                 f"s3://{BUCKET}/cli"],
                cwd=REPO, env=service_env(postgres, s3, "cli", cli_home, configs, f"s3://{BUCKET}/cli"),
                stdout=log, stderr=subprocess.STDOUT)

        # The automation's first encode: kill its run worker (the steps execute in it), and anything it started.
        killed = wait_until(lambda: next(iter(slot_holders(queue)), None), 600, "run holding the encoders slot",
                            daemon_log)
        mark(f"run {killed} holds the encoders slot: SIGKILL to its worker")
        kill_tree(run_worker_pid(queue, killed))
        killed_at = time.monotonic()
        wait_until(lambda: queue.get_run_by_id(killed).status == dg.DagsterRunStatus.FAILURE, 30,
                   f"failure of the killed run {killed}", daemon_log)
        wait_until(lambda: killed not in slot_holders(queue), 60, f"free encoders slot after killing {killed}",
                   daemon_log)
        freed_after = time.monotonic() - killed_at
        mark(f"encoders slot freed {freed_after:.1f} s after the kill")
        assert freed_after < 60

        # Meanwhile: the reference, in-process on a local folder, and the CLI's run on its own instance.
        local = run_pipeline(configs, tmp_path / "local", instance=dg.DagsterInstance.ephemeral())
        assert local.failures == [] and local.summary_built
        reference = results_tables(tmp_path / "local" / "results.duckdb")
        mark("local reference run done")
        assert cli.wait(600) == 0, cli_log.read_text(errors="replace")
        mark("CLI run done")
        assert_same_results(store_path(f"s3://{BUCKET}/cli/results.duckdb"), reference)
        cli_objects = [item["Key"] for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix="cli/") for item in page.get("Contents", [])]
        assert cli_objects and not [key for key in cli_objects if key.endswith(".tmp")]

        retry = wait_until(lambda: queue.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": killed})), 60,
                           f"relaunch of {killed}", daemon_log)[0]
        finished = wait_until(lambda: queue.get_run_by_id(retry.run_id).is_finished and queue.get_run_by_id(retry.run_id),
                              600, f"end of the relaunch {retry.run_id}", daemon_log)
        mark(f"relaunch {retry.run_id} done")
        assert finished.status == dg.DagsterRunStatus.SUCCESS

        # The automation then builds the summaries; the queue drains.
        in_flight = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                     dg.DagsterRunStatus.STARTED]
        wait_until(lambda: queue.get_latest_materialization_event(dg.AssetKey("results_db"))
                   and not queue.get_runs(dg.RunsFilter(statuses=in_flight)), 600, "summary run of the automation",
                   daemon_log)
        mark("summaries built, queue drained")
        failed = queue.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
        assert [run.run_id for run in failed] == [killed]
        assert_same_results(store_path(f"s3://{BUCKET}/queue/results.duckdb"), reference)
        # Step logs went to the bucket (compute_logs in single-host.yaml).
        logs = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="dagster/compute-logs/")
        assert logs.get("KeyCount", 0) > 0
    finally:
        if cli is not None:
            stop(cli)
        stop_daemon(daemon)
    assert daemon.poll() is not None
    mark("daemon stopped: the deployment test took this long")
