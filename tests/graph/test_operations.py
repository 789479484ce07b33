"""Operations that run unattended: faults a real user meets, each reproduced for real (killed
processes, locked files, full disks, read-only folders, hostile paths) with the CLI's answer: one
line naming the path and what to do, a non-zero exit, nothing lost or half-written."""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from graph_helpers import beir_folder, quick_protocol, small_ann, toy

from embedpyramid.cli import main
from embedpyramid.config import load_config
from embedpyramid.store import DataFolderBusy
from embedpyramid.summary.results import read_leaderboard
from graphbase.home import DataFolderLock
from graphbase.instance import PID_TAG, open_instance
from graphbase.partitions import model_dataset_key
from graphbase.warm import WARM_MEMO
from pipelines.runner import run_pipeline

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "fixtures"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def cli(*args: str, preexec_fn=None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "embedpyramid.cli", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, preexec_fn=preexec_fn, timeout=timeout)


def assert_one_error_line(stderr: str, *fragments: str) -> str:
    """The last line is the error, naming what it should; no traceback anywhere."""
    assert "Traceback" not in stderr, stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), stderr
    for fragment in fragments:
        assert fragment in line, line
    return line


def test_a_killed_run_is_marked_failed_by_the_next_one(write_configs, tiny, tmp_path):
    slow = {"backend": "entry-point", "entry_point": "toy_encoders:SlowNgrams", "options": {"dim": 16, "seconds": 3},
            "run": {"batch_size": 4}}
    folder = write_configs(models={"slow": slow}, datasets=tiny, protocol=quick_protocol())
    data = tmp_path / "data"
    with (tmp_path / "killed.log").open("w") as output:
        process = subprocess.Popen([sys.executable, "-m", "embedpyramid.cli", "run", "--configs", str(folder), "--data",
                                    str(data)], cwd=REPO, env=ENV, stdout=output, stderr=output, start_new_session=True)
    instance = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            if (data / "dagster_home" / "history" / "runs.db").is_file():
                instance = instance or open_instance(data)
                started = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
                if any(r.dagster_run.job_name == "evaluate" for r in started):
                    break
            time.sleep(0.5)
        else:
            pytest.fail(f"the run never started encoding: {(tmp_path / 'killed.log').read_text()[-2000:]}")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    ghost = next(r.dagster_run for r in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])))
    assert ghost.tags[PID_TAG] == str(process.pid)

    fast = write_configs(models={"slow": {**slow, "options": {"dim": 16, "seconds": 0}}}, datasets=tiny,
                         protocol=quick_protocol())
    lines: list[str] = []
    report = run_pipeline(fast, data, log=lines.append)
    assert report.abandoned_runs == [ghost.run_id] and report.failures == []
    assert f"run {ghost.run_id}: its process is gone; marked failed" in lines
    instance = open_instance(data)
    assert instance.get_run_by_id(ghost.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    assert not list(data.rglob("*.tmp"))


def test_processes_opening_a_new_run_history_at_once_do_not_corrupt_it(tmp_path):
    opener = ("import sys; from graphbase.instance import open_instance; from embedpyramid.store import store_path; "
              "print(len(open_instance(store_path(sys.argv[1])).get_run_records()))")
    for attempt in range(4):  # unserialized, about one attempt in four breaks the schema here
        data = tmp_path / f"data-{attempt}"
        openers = [subprocess.Popen([sys.executable, "-c", opener, str(data)], cwd=REPO, env=ENV, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
        results = [process.communicate(timeout=300) for process in openers]
        assert [process.returncode for process in openers] == [0] * 4, results
        assert [out.strip() for out, _ in results] == ["0"] * 4


def test_a_copied_data_folder_keeps_its_own_run_history(tmp_path):
    # The instance of a data folder names no path in its dagster.yaml: a copy writes to its own files.
    @dg.asset
    def step() -> None:
        return None

    first = tmp_path / "first"
    assert dg.materialize([step], instance=open_instance(first)).success
    shutil.copytree(first, tmp_path / "copy")
    copy = open_instance(tmp_path / "copy")
    assert type(copy.event_log_storage).__name__ == "_ReusedEngineEventLog"
    assert dg.materialize([step], instance=copy).success
    assert len(copy.get_run_records()) == 2
    assert len(open_instance(first).get_run_records()) == 1


def test_a_dataset_broken_after_a_good_run_fails_alone_and_a_new_card_still_runs(write_configs, tiny, tmp_path,
                                                                                 capsys):
    beir = beir_folder(tmp_path / "beir")
    datasets = {**tiny, "animals": {"loader": "beir", "path": str(beir)}}
    folder = write_configs(models={"ngrams": toy()}, datasets=datasets, protocol=quick_protocol())
    data = tmp_path / "data"
    assert main(["run", "--configs", str(folder), "--data", str(data)]) == 0
    with (beir / "corpus.jsonl").open("a") as handle:
        handle.write('{"_id": "d3", "text": \n')
    added = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=datasets, protocol=quick_protocol())
    capsys.readouterr()
    assert main(["run", "--configs", str(added), "--data", str(data)]) == 1
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].startswith("FAILED frozen_dataset[animals]: ")
    assert "corpus.jsonl:13: malformed JSON" in failed[0] and "Traceback" not in err
    new_key = load_config(added).models["ngrams-24"].key
    assert (data / "metrics" / "tiny" / new_key / "exact.parquet").is_file()
    assert not (data / "metrics" / "animals" / new_key).exists()
    assert (data / "datasets" / "animals" / "corpus.parquet").is_file()  # the last good freeze is kept


def test_question_marks_and_brackets_in_the_data_path_are_taken_literally(write_configs, tiny, tmp_path,
                                                                          capsys, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    data = tmp_path / "runs[1]?x=1#a%20b"
    assert main(["run", "--configs", str(folder), "--data", str(data)]) == 0
    assert (data / "dagster_home" / "history" / "runs.db").is_file() and (data / "results.duckdb").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cache", "configs", "tiny-beir", data.name])
    capsys.readouterr()
    assert main(["leaderboard", "--data", str(data), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["run", "--configs", str(folder), "--data", str(data)]) == 0
    assert "up to date" in capsys.readouterr().err


def test_a_read_only_data_folder_is_refused_with_one_line(write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny)
    data = tmp_path / "data"
    data.mkdir()
    if os.geteuid() == 0:  # root ignores permission bits; an immutable folder refuses root too
        if subprocess.run(["chattr", "+i", str(data)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a filesystem without chattr +i: cannot make a folder read-only")
    else:
        data.chmod(0o555)
    try:
        result = cli("run", "--configs", str(folder), "--data", str(data))
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(data)], check=True)
        data.chmod(0o755)
    assert result.returncode == 2
    assert_one_error_line(result.stderr, f"cannot write {data}", "make the data folder writable")
    assert list(data.iterdir()) == []


def files_up_to(size: int) -> Callable[[], None]:
    """A child process's ``preexec_fn``: its writes past ``size`` bytes of a file fail as on a full
    disk (EFBIG instead of ENOSPC: the same path in SQLite and DuckDB)."""

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return small_disk


def test_a_full_disk_gives_one_line_and_the_next_run_finishes_the_work(write_configs, small_chatterbot, tmp_path):
    folder = write_configs(models={"ngrams": toy()}, datasets=small_chatterbot, protocol=quick_protocol())
    data = tmp_path / "data"
    # The event log's write-ahead logs, kept while a run's connections are open, pass 600 kB
    # within the first runs, with a run started.
    result = cli("run", "--configs", str(folder), "--data", str(data), preexec_fn=files_up_to(600_000))
    assert result.returncode == 2
    assert_one_error_line(result.stderr, str(data / "dagster_home"), "free space")
    assert not list(data.rglob("*.tmp"))
    again = cli("run", "--configs", str(folder), "--data", str(data))
    assert again.returncode == 0, again.stderr
    assert "its process is gone; marked failed" in again.stderr and (data / "results.duckdb").is_file()


def test_a_disk_that_fills_while_the_results_database_is_written_leaves_the_old_one(write_configs, small_chatterbot,
                                                                                  tmp_path):
    folder = write_configs(models={"ngrams": toy()}, datasets=small_chatterbot, protocol=quick_protocol())
    data = tmp_path / "data"
    # Within 3 MB the run history and every table fit, and DuckDB's write-ahead log too, but not
    # the database it folds that log into.
    result = cli("run", "--configs", str(folder), "--data", str(data), preexec_fn=files_up_to(3_000_000))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (failed,) = [line for line in result.stderr.splitlines() if line.startswith("FAILED ")]
    assert f"{data / 'results.duckdb'}: the results database cannot be written (File too large); free space" in failed
    assert not (data / "results.duckdb").exists()  # no database without its last tables
    again = cli("run", "--configs", str(folder), "--data", str(data))
    assert again.returncode == 0, again.stderr
    assert not read_leaderboard(data / "results.duckdb").is_empty()


def test_leaderboard_while_another_process_holds_the_database(tmp_path):
    db = tmp_path / "data" / "results.duckdb"
    db.parent.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(120)", str(db)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = cli("leaderboard", "--data", str(db.parent))
        assert result.returncode == 2
        assert_one_error_line(result.stderr, str(db), f"PID {holder.pid}", "close that connection")
    finally:
        holder.kill()
        holder.wait()


def test_a_failed_dataset_says_once_why_the_summary_was_skipped(write_configs, tmp_path):
    beir = beir_folder(tmp_path / "beir")
    (beir / "qrels" / "test.tsv").write_text("q1\td99\t1\n")
    folder = write_configs(models={"ngrams": toy()}, datasets={"bad": {"loader": "beir", "path": str(beir)}})
    result = cli("run", "--configs", str(folder), "--data", str(tmp_path / "data"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("FAILED")] == [
        line for line in result.stderr.splitlines() if line.startswith("FAILED frozen_dataset[bad]: ")]
    assert result.stderr.count("summary skipped: ") == 1
    assert "summary skipped: nothing is evaluated yet for the current cards: retrieval_metrics on bad" in result.stderr
    assert "FAILED summary" not in result.stderr and "ValueError" not in result.stderr


def test_two_spec_names_that_share_an_asset_are_a_config_error(write_configs, tiny, capsys):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny,
                           ann=small_ann(**{"flat-a": {"factory": "Flat"}, "flat_a": {"factory": "Flat"}}))
    assert main(["run", "--configs", str(folder)]) == 2
    line = assert_one_error_line(capsys.readouterr().err, "ann.yaml", "indexes.flat-a and indexes.flat_a",
                                 "ann_flat_a", "rename one")
    assert line.count("\n") == 0


@pytest.mark.parametrize("breakage", ["bad card", "broken yaml", "missing folder", "colliding specs"])
def test_validation_fails_on_a_broken_config_and_a_degraded_deployment_loads_and_shows_it(
        write_configs, tiny, tmp_path, breakage):
    if breakage == "bad card":
        folder = write_configs(models={"ngrams": {**toy(), "pooling": "sideways"}}, datasets=tiny)
        expected = f"{folder / 'models.yaml'}:7: models.ngrams.pooling"  # file, line, key
    elif breakage == "broken yaml":
        folder = write_configs(models={"ngrams": toy()}, datasets=tiny, ann=small_ann(flat={"factory": "Flat"}))
        (folder / "ann.yaml").write_text((folder / "ann.yaml").read_text() + "indexes: [unclosed\n")
        expected = f"{folder / 'ann.yaml'}: not valid YAML"  # YAML's own message names the line
    elif breakage == "missing folder":
        folder, expected = tmp_path / "nowhere", "does not exist"
    else:
        folder = write_configs(models={"ngrams": toy()}, datasets=tiny,
                               ann=small_ann(**{"flat-a": {"factory": "Flat"}, "flat_a": {"factory": "Flat"}}))
        expected = "indexes.flat-a and indexes.flat_a"
    env = {**ENV, "EMBEDPYRAMID_CONFIGS": str(folder), "EMBEDPYRAMID_DATA": str(tmp_path / "data"),
           "DAGSTER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

    def validate(**extra: str) -> tuple[int, str]:
        result = subprocess.run([str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w",
                                 "workspace.yaml"], cwd=REPO, env={**env, **extra}, capture_output=True, text=True,
                                timeout=600)
        return result.returncode, re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # without colours

    # A check before a deploy: the location does not load, naming the file, the line and the key.
    code, output = validate()
    assert code != 0 and expected in output, output
    if breakage == "broken yaml":
        assert re.search(r"line \d+, column \d+", output), output
    # A running deployment that keeps a degraded load: it loads, and shows the error where a user looks.
    code, output = validate(EMBEDPYRAMID_CONFIG_ERRORS="degrade")
    assert code == 0, output
    assert expected in output and "config/folder: loads" in output and "embedpyramid - ERROR - config error: " in output
    # Nothing else to warn about but Dagster's own notice that the validate command is superseded.
    assert [line for line in output.splitlines() if "Warning" in line or "WARNING" in line] == [
        line for line in output.splitlines() if "SupersessionWarning" in line]
    if breakage == "bad card":  # whatever the breakage, an unknown setting of the variable is refused
        code, output = validate(EMBEDPYRAMID_CONFIG_ERRORS="lenient")
        assert code != 0 and "EMBEDPYRAMID_CONFIG_ERRORS='lenient': use one of fail, degrade" in output


def test_a_second_run_waits_for_the_first_or_names_it(write_configs, tiny, tmp_path, capsys):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from graphbase.home import DataFolderLock; from graphbase.instance import open_instance; "
        "from embedpyramid.store import store_path; root = store_path(sys.argv[1]); "
        "lock = DataFolderLock(root, open_instance(root)); lock.acquire(); print('held', flush=True); "
        "time.sleep(float(sys.argv[2]))"), str(data), "4"], cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["run", "--configs", str(folder), "--data", str(data), "--no-wait"]) == 2
        assert_one_error_line(capsys.readouterr().err, str(data), f"in use by PID {holder.pid}")
        with pytest.raises(DataFolderBusy):
            DataFolderLock(data, open_instance(data), wait=False).acquire()
        lines: list[str] = []
        report = run_pipeline(folder, data, log=lines.append)
        assert lines[0].startswith(f"waiting for PID {holder.pid} ") and report.failures == []
    finally:
        holder.kill()
        holder.wait()


def test_no_wait_on_a_busy_folder_answers_before_the_config_loads_or_the_instance_opens(tmp_path, capsys):
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from graphbase.home import DataFolderLock; "
        "from embedpyramid.store import store_path; lock = DataFolderLock(store_path(sys.argv[1]), None); "
        "lock.acquire(); print('held', flush=True); time.sleep(30)"), str(data)],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        # The config folder does not exist: a command that read it first would say so instead.
        assert main(["run", "--configs", str(tmp_path / "no-such-configs"), "--data", str(data), "--no-wait"]) == 2
        assert_one_error_line(capsys.readouterr().err, f"{data} is in use by PID {holder.pid}")
        assert not (data / "dagster_home").exists()  # the instance was never opened
    finally:
        holder.kill()
        holder.wait()


def test_l4_cuts_at_or_above_a_cards_dimension_are_skipped_and_listed(write_configs, tiny, tmp_path):
    ann = small_ann(flat={"factory": "Flat"}, cut32={"factory": "Flat", "dimension": 32},
                    cut48={"factory": "Flat", "dimension": 48})
    folder = write_configs(models={"ngrams": toy(48), "ngrams-24": toy(24)}, datasets=tiny,
                           protocol=quick_protocol(), ann=ann)
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance).failures == []
    config = load_config(folder)
    wide, narrow = config.models["ngrams"].key, config.models["ngrams-24"].key
    specs = {key: sorted(pl.read_parquet(data / "serving" / "tiny" / key / "summary.parquet")["spec"].unique())
             for key in (wide, narrow)}
    assert specs == {wide: ["cut32", "flat"], narrow: ["flat"]}
    skipped = {
        (name, spec): f"spec '{spec}' (faiss Flat) cuts to {dim} dimensions, but the card's vectors have {have}: "
                      "skipped (a cut must keep fewer dimensions than the vectors have)"
        for name, spec, dim, have in (("ngrams", "cut48", 48, 48), ("ngrams-24", "cut32", 32, 24),
                                      ("ngrams-24", "cut48", 48, 24))}
    for (name, spec), reason in skipped.items():
        record = instance.fetch_materializations(dg.AssetRecordsFilter(
            dg.AssetKey(f"ann_{spec}"), asset_partitions=[model_dataset_key(name, "tiny")]), limit=1).records[0]
        assert record.asset_materialization.metadata["not_applicable"].value == reason
    assert not list((data / "indexes").glob("cut48-*"))  # never built, for either card
    report = (data / "report" / "report.md").read_text()
    assert all(f"{reason}." in report for reason in skipped.values())

    # An L5 system that reads a skipped cut says so, instead of asking for the L4 asset.
    with_systems = write_configs("with-systems", models={"ngrams": toy(48)}, datasets=tiny, protocol=quick_protocol(),
                                 ann=ann, systems={"systems": {"fused": {"kind": "rrf", "inputs": ["exact", "ann:cut48"]}}})
    (failure,) = run_pipeline(with_systems, tmp_path / "data-systems", instance=dg.DagsterInstance.ephemeral()).failures
    assert failure.endswith(f"ann:cut48 is not built for {wide}: {skipped[('ngrams', 'cut48')]}; read another spec or "
                            "the exact run for this card")


def imported_by(importtime: str) -> dict[str, str | None]:
    """Each module of a ``python -X importtime`` trace with the module that imported it (children
    are printed before their parent, one indentation step deeper)."""
    entries = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and not line.rstrip().endswith("| package"):
            name = line.rsplit("|", 1)[1]
            entries.append((len(name) - len(name.lstrip()), name.strip()))
    parents: dict[str, str | None] = {}
    for index, (depth, name) in enumerate(entries):
        parent = next((other for deeper, other in entries[index + 1:] if deeper < depth), None)
        parents.setdefault(name, parent)
    return parents


def import_chain(parents: dict[str, str | None], module: str) -> list[str]:
    """The modules through which ``module`` was first imported, the importer last."""
    chain = []
    while (module := parents.get(module)) is not None and module not in chain:
        chain.append(module)
    return chain


def test_a_warm_run_with_nothing_to_do_loads_no_model_library(write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol(),
                           ann=small_ann(flat={"factory": "Flat"}))
    data = tmp_path / "data"
    assert cli("run", "--configs", str(folder), "--data", str(data)).returncode == 0
    warm_memo = data / "dagster_home" / WARM_MEMO
    for through_dagster in (True, False):
        if through_dagster:  # Dagster's own memo answers, and writes the warm memo again
            warm_memo.unlink()
        warm = subprocess.run([sys.executable, "-X", "importtime", "-m", "embedpyramid.cli", "run", "--configs",
                               str(folder), "--data", str(data)], cwd=REPO, env=ENV, capture_output=True, text=True)
        assert warm.returncode == 0 and "up to date" in warm.stderr
        parents = imported_by(warm.stderr)
        assert "embedpyramid.config" in parents and ("dagster" in parents) == through_dagster
        for library in ("sentence_transformers", "transformers", "scipy", "sklearn", "statsmodels"):
            assert library not in parents, f"{library} imported by {' <- '.join(import_chain(parents, library))}"
        # torch may still come in only through the two core modules whose import the issue-10 work
        # makes lazy (exact search, FAISS index helpers); nothing of the orchestration pulls it.
        assert parents.get("torch") in (None, "embedpyramid.retrieval.search", "embedpyramid.serving.index")
