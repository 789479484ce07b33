"""The Dagster UI, checked in a real browser: ``dagster dev`` on the CLI's instance shows the
pyramid's groups, the model partitions, the CLI's tagged runs, and a config edit as stale on the
right asset and partition, with its cause — through the page and through GraphQL."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
import yaml
from graph_helpers import is_shard_step, quick_protocol, small_ann, step_intervals, toy
from readme import commands_of

from pipelines.runner import run_pipeline
from pipelines.session import open_session
from pipelines.status import project_status

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
GROUPS = ["config", "data", "embeddings", "l2_retrieval", "l2_tasks", "l1_geometry", "l3_transfer", "l4_serving", "summary"]
LOCATION = "pipelines.definitions:defs"

playwright = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (Debian: apt-get install -y chromium)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DagsterDev:
    """``dagster dev`` in its own process group, stopped by that group's id."""

    def __init__(self, home: Path, log: Path, *, sensor_interval: int | None = None):
        self.port = free_port()
        env = {key: value for key, value in os.environ.items() if not key.startswith("EMBEDPYRAMID_")}
        env.update(DAGSTER_HOME=str(home), PYTHONPATH=str(REPO / "tests" / "fixtures"))
        if sensor_interval is not None:
            env["EMBEDPYRAMID_SENSOR_INTERVAL"] = str(sensor_interval)
        self.log = log.open("w")
        # The README's command (its DAGSTER_HOME is this test's), on a free port of 127.0.0.1.
        (readme_args,) = commands_of("dagster")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster"), *readme_args, "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(self.url + "/graphql", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"query": query, "variables": variables or {}}).encode())
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
        assert "errors" not in answer, answer
        return answer["data"]

    def wait_for_check(self, asset: str, check: str, status: str, timeout: float = 120) -> None:
        """Until the latest evaluation of ``asset``'s ``check`` has ``status``."""
        query = (f'{{ assetNodes(assetKeys: [{{path: ["{asset}"]}}]) {{ assetChecksOrError {{ ... on AssetChecks {{ '
                 "checks { name executionForLatestMaterialization { status } } } } } }")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            checks = self.graphql(query)["assetNodes"][0]["assetChecksOrError"]["checks"]
            latest = next((c["executionForLatestMaterialization"] for c in checks if c["name"] == check), None)
            if latest is not None and latest["status"] == status:
                return
            time.sleep(1)
        raise AssertionError(f"{asset}'s {check} check is not {status} after {timeout} s")

    def wait_until_up(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "dagster dev exited"
            try:
                locations = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name "
                                         "locationOrLoadError { __typename } } } } }")
                entries = locations["workspaceOrError"]["locationEntries"]
                if entries and entries[0]["locationOrLoadError"] and \
                        entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation":
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(2)
        pytest.fail("dagster dev did not come up")

    def stop_sensor(self, name: str) -> None:
        selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "sensorName": name}
        sensor = self.graphql("query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor { "
                              "sensorState { id } } } }", {"s": selector})["sensorOrError"]
        stopped = self.graphql("mutation($id: String) { stopSensor(id: $id) { ... on StopSensorMutationResult { "
                               "instigationState { status } } } }", {"id": sensor["sensorState"]["id"]})
        assert stopped["stopSensor"]["instigationState"]["status"] == "STOPPED"

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        with contextlib.suppress(ProcessLookupError):  # children that outlived the parent
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


@pytest.mark.heavy
def test_the_ui_shows_groups_partitions_and_a_config_edit_as_stale(write_configs, small_chatterbot, tmp_path,
                                                                     monkeypatch):
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    protocol = quick_protocol(baseline="ngrams-48")
    folder = write_configs(models={"ngrams-48": toy(48), "ngrams-32": toy(32)}, datasets=small_chatterbot,
                           protocol=protocol, ann=small_ann(flat={"factory": "Flat"}))
    assert run_pipeline(folder, data, command=["run", "--configs", str(folder)]).failures == []
    shots = tmp_path / "screenshots"
    shots.mkdir()
    server = DagsterDev(home, tmp_path / "dagster-dev.log", sensor_interval=5)
    try:
        server.wait_until_up()
        # The UI follows the CLI's config; keep the daemon from re-materializing what we look at.
        server.stop_sensor("evaluation_automation")
        runs = server.graphql('{ runsOrError(filter: {tags: [{key: "embedpyramid/cli", value: "run"}]}) { '
                              "... on Runs { results { jobName tags { key value } } } } }")["runsOrError"]["results"]
        assert {run["jobName"] for run in runs} == {"refresh_datasets", "evaluate", "summary"}
        assert all({"key": "embedpyramid/configs", "value": str(folder)} in run["tags"] for run in runs)

        protocol["comparison"]["seed"] = 7
        (folder / "protocol.yaml").write_text(yaml.safe_dump(protocol, sort_keys=False))
        rows = {(row.model, row.level): row for row in project_status(folder, data)}
        assert all(row.state == "stale" for (model, level), row in rows.items() if level == "l1_geometry")
        assert all(row.state == "fresh" for (model, level), row in rows.items() if level == "l2_retrieval")
        # status records nothing: the config sensor observes the edit on its tick, then records the
        # up_to_date checks on its next quiet one.
        server.wait_for_check("norm_geometry", "up_to_date", "FAILED")

        partitions = ["chatterbot-small|ngrams-32", "chatterbot-small|ngrams-48"]
        nodes = server.graphql(
            "query($p: [String!]) { assetNodes(assetKeys: [{path: [\"norm_geometry\"]}, {path: [\"retrieval_metrics\"]}]) "
            "{ assetKey { path } staleStatusByPartition(partitions: $p) staleCausesByPartition(partitions: $p) "
            "{ key { path } partitionKey reason } } "
            "summary: assetNodes(assetKeys: [{path: [\"results_db\"]}]) { staleStatus staleCauses { key { path } } } }",
            {"p": partitions})
        by_asset = {node["assetKey"]["path"][0]: node for node in nodes["assetNodes"]}
        assert by_asset["norm_geometry"]["staleStatusByPartition"] == ["STALE", "STALE"]
        assert all(cause["key"]["path"] == ["config", "resampling"] and cause["reason"] == "has a new data version"
                   for causes in by_asset["norm_geometry"]["staleCausesByPartition"] for cause in causes)
        assert by_asset["retrieval_metrics"]["staleStatusByPartition"] == ["FRESH", "FRESH"]
        assert nodes["summary"][0]["staleStatus"] == "STALE"
        assert nodes["summary"][0]["staleCauses"][0]["key"]["path"] == ["config", "comparison"]
        # At the asset level, no partition opened: the up_to_date check the config sensor recorded warns.
        checks = server.graphql(
            "{ assetNodes(assetKeys: [{path: [\"norm_geometry\"]}, {path: [\"retrieval_metrics\"]}]) { assetKey { path } "
            "assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status "
            "evaluation { severity description } } } } } } }")
        up_to_date = {node["assetKey"]["path"][0]: next(
            check["executionForLatestMaterialization"] for check in node["assetChecksOrError"]["checks"]
            if check["name"] == "up_to_date") for node in checks["assetNodes"]}
        assert up_to_date["norm_geometry"]["status"] == "FAILED"
        assert up_to_date["norm_geometry"]["evaluation"]["severity"] == "WARN"
        assert up_to_date["norm_geometry"]["evaluation"]["description"] == "2 of 2 partitions need work"
        assert up_to_date["retrieval_metrics"]["status"] == "SUCCEEDED"

        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"])
            page = browser.new_page(viewport={"width": 1600, "height": 1000})

            def visit(path: str, expected: list[str], shot: str) -> str:
                page.goto(server.url + path)
                for text in expected:
                    page.get_by_text(text, exact=True).first.wait_for(timeout=180_000)
                skip = page.get_by_role("button", name="Skip")
                if skip.count():
                    skip.first.click()
                page.screenshot(path=str(shots / f"{shot}.png"))
                return page.inner_text("body")

            lineage = visit("/asset-groups", GROUPS, "lineage")
            assert all(group in lineage for group in GROUPS)
            partitions_page = visit("/assets/retrieval_metrics?view=partitions", ["ngrams-48", "ngrams-32"],
                                    "model-partitions")
            assert "chatterbot-small" in partitions_page and "Missing (0)" in partitions_page
            detail = visit("/assets/norm_geometry?view=partitions&partition=chatterbot-small%7Cngrams-48",
                           ["Unsynced (1)"], "stale-partition")
            assert "chatterbot-small|ngrams-48" in detail
            summary = visit("/assets/comparisons?view=partitions&partition=chatterbot-small", ["Unsynced (1)"],
                            "stale-summary")
            assert "comparisons" in summary and "chatterbot-small" in summary
            checks_page = visit("/assets/norm_geometry?view=checks", ["up_to_date"], "stale-asset-check")
            assert "2 of 2 partitions need work" in checks_page
            browser.close()
    finally:
        server.stop()
    assert sorted(p.name for p in shots.iterdir()) == [
        "lineage.png", "model-partitions.png", "stale-asset-check.png", "stale-partition.png", "stale-summary.png"]


@pytest.mark.heavy
def test_runs_the_automation_launches_wait_for_a_cli_run_on_the_same_folder(write_configs, tiny, tmp_path,
                                                                            monkeypatch):
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    slow = {"backend": "entry-point", "entry_point": "toy_encoders:SlowNgrams", "options": {"dim": 16, "seconds": 4},
            "run": {"batch_size": 4, "latency_queries": 2, "latency_repeats": 1}}
    folder = write_configs(models={"slow": slow, "fast": toy(24)}, datasets=tiny, protocol=quick_protocol())
    open_session(folder, data, None, lambda _: None, False)  # binds the instance and registers the partitions
    server = DagsterDev(home, tmp_path / "dagster-dev.log", sensor_interval=5)
    try:
        server.wait_until_up()
        # The CLI evaluates the slow card while the automation requests the fast card's partitions.
        started = time.time()
        report = run_pipeline(folder, data, models=["slow"], command=["run", "--models", "slow"])
        finished = time.time()
        assert report.failures == []
        instance = dg.DagsterInstance.get()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            launched = [record.dagster_run for record in instance.get_run_records()
                        if "embedpyramid/cli" not in record.dagster_run.tags]
            if any(run.tags.get("dagster/partition", "").endswith("fast") for run in launched) and all(
                    run.is_finished for run in launched):
                break
            time.sleep(3)
        else:
            pytest.fail("the automation launched no run for the fast card, or its runs did not finish")
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in launched)
        cli_runs = [record.dagster_run for record in instance.get_run_records()
                    if record.dagster_run.tags.get("embedpyramid/cli") == "run"]
        # Every step but those that plan and encode shards (they take no lock: each writes only
        # its own shard file) holds the data folder's lock.
        cli_steps = [(start, end, step) for run in cli_runs for start, end, step, _ in
                     step_intervals(instance, run.run_id) if not is_shard_step(step)]
        held_from, held_to = min(start for start, _, _ in cli_steps), max(end for _, end, _ in cli_steps)
        automation_steps = [(start, end, run.run_id) for run in launched
                            for start, end, step, _ in step_intervals(instance, run.run_id) if not is_shard_step(step)]
        assert automation_steps and started < held_from and held_to < finished
        # While the CLI holds the folder no step of another run runs, and no two steps of any runs overlap.
        assert all(end <= held_from + 0.05 or start >= held_to - 0.05 for start, end, _ in automation_steps)
        latest_end = 0.0
        for start, end, _ in sorted([*automation_steps, *((a, b, "cli") for a, b, _ in cli_steps)]):
            assert start >= latest_end - 0.05, "two steps wrote the data folder at once"
            latest_end = max(latest_end, end)
    finally:
        server.stop()
