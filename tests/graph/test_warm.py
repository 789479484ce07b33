"""The warm start (graphbase.warm): once Dagster found everything fresh, ``run`` and ``status``
answer in a fresh process without importing Dagster, and print what Dagster's answer prints; any
change that answer depends on sends them back to Dagster."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
from graph_helpers import quick_protocol, toy

from embedpyramid.config import load_config
from graphbase import warm
from graphbase.instance import open_instance
from graphbase.warm import UP_TO_DATE_LINE, WARM_MEMO, code_digest, remember_warm, warm_status
from pipelines.runner import run_pipeline
from pipelines.status import project_status

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "fixtures"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# The CLI in a fresh process, saying on its last line whether Dagster was imported.
PROBE = ("import sys; from embedpyramid.cli import main; code = main(sys.argv[1:]); "
         "print('dagster imported:', 'dagster' in sys.modules, file=sys.stderr); sys.exit(code)")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, env=ENV, capture_output=True, text=True,
                          timeout=600)


def quiet(_line: str) -> None:
    pass


def test_a_warm_run_and_status_answer_without_dagster_what_dagster_answers(write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny, protocol=quick_protocol())
    data = tmp_path / "data"
    assert run_pipeline(folder, data, log=quiet).failures == []
    memo = data / "dagster_home" / WARM_MEMO
    assert memo.is_file()
    assert warm_status(folder, data, None, None, lock=True) == project_status(folder, data)

    for command in (["run"], ["status"], ["run", "--models", "ngrams-24"]):
        args = [*command, "--configs", str(folder), "--data", str(data)]
        memo.unlink(missing_ok=True)  # Dagster answers (its own memo says fresh) and writes the warm memo again
        through_dagster = cli(*args)
        assert through_dagster.returncode == 0, through_dagster.stderr
        assert through_dagster.stderr.strip().endswith("dagster imported: True") and memo.is_file()
        warm_answer = cli(*args)
        assert warm_answer.returncode == 0, warm_answer.stderr
        assert warm_answer.stderr.strip().endswith("dagster imported: False")
        assert warm_answer.stdout == through_dagster.stdout
        if command[0] == "run":
            assert UP_TO_DATE_LINE in warm_answer.stderr  # Dagster says so too, in its own words per partition
            assert "nDCG@10" in warm_answer.stdout


def test_whatever_the_answer_depends_on_sends_the_warm_start_back_to_dagster(write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    data = tmp_path / "data"
    assert run_pipeline(folder, data, log=quiet).failures == []
    rows = warm_status(folder, data, None, None, lock=True)
    assert rows and all(row.state == "fresh" for row in rows)
    assert warm_status(folder, data, ["ngrams"], ["tiny"], lock=True) == rows  # the same selection, named

    # A config edit: a facet has a new version; the run it needs leaves a memo again.
    edited = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol(n_resamples=300))
    assert edited == folder and warm_status(folder, data, None, None, lock=True) is None
    assert any(row.state == "stale" for row in project_status(folder, data))
    assert run_pipeline(folder, data, log=quiet).failures == []
    assert warm_status(folder, data, None, None, lock=True) == rows

    # Anything recorded in the run history since, by anyone.
    instance = open_instance(data)
    instance.report_runless_asset_event(dg.AssetObservation(asset_key="elsewhere"))
    assert warm_status(folder, data, None, None, lock=True) is None
    assert all(row.state == "fresh" for row in project_status(folder, data, instance=instance))  # Dagster: still fresh
    # status records nothing in the instance; its "all fresh", read from the kept states brought up
    # to the newest record, goes to the warm start's file beside it
    assert warm_status(folder, data, None, None, lock=True) == rows
    assert run_pipeline(folder, data, instance=instance, log=quiet).failures == []
    assert warm_status(folder, data, None, None, lock=True) == rows

    # Another process holds the data folder: run waits for it through Dagster; status holds no lock.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from graphbase.home import DataFolderLock; from embedpyramid.store import store_path; "
        "DataFolderLock(store_path(sys.argv[1]), None).acquire(); print('held', flush=True); time.sleep(30)"),
        str(data)], cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert warm_status(folder, data, None, None, lock=True) is None
        assert warm_status(folder, data, None, None, lock=False) == rows
    finally:
        holder.kill()
        holder.wait()
    assert warm_status(folder, data, None, None, lock=True) == rows

    # Something recorded while the run history's files were read: no memo rather than one that hides it.
    memo = data / "dagster_home" / WARM_MEMO
    memo.unlink()
    config = load_config(folder)
    remember_warm(config, data, list(config.models.values()), ["tiny"], rows, still_fresh=lambda: False)
    assert not memo.exists() and warm_status(folder, data, None, None, lock=True) is None
    remember_warm(config, data, list(config.models.values()), ["tiny"], rows, still_fresh=lambda: True)
    assert warm_status(folder, data, None, None, lock=True) == rows

    # An instance whose dagster.yaml was edited may keep its records elsewhere (Postgres).
    instance_yaml = data / "dagster_home" / "dagster.yaml"
    shipped = instance_yaml.read_text()
    instance_yaml.write_text(shipped + "# storage moved\n")
    assert warm_status(folder, data, None, None, lock=True) is None
    instance_yaml.write_text(shipped)
    assert warm_status(folder, data, None, None, lock=True) == rows


def test_the_code_digest_follows_every_file_of_the_projects_packages(tmp_path, monkeypatch):
    package = tmp_path / "probe_package"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    (package / "templates" / "page.j2").write_text("<p>{{ x }}</p>\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warm, "PACKAGES", ("probe_package",))
    first = code_digest()
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"bytecode")
    assert code_digest() == first  # bytecode is not source
    (package / "templates" / "page.j2").write_text("<p>{{ y }}</p>\n")
    assert code_digest() != first
    monkeypatch.setattr(warm, "PACKAGES", ("probe_package", "no_such_package_here"))
    assert code_digest() != first
