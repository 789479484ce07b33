"""A summary never mixes versions: what each result was computed from is recorded; a summary
uses only input partitions whose inputs are the current ones and names the others; staleness is
followed upstream, so ``status`` lists what ``run`` will do; failed and first-time partitions are
seen; the nightly schedules and the one-writer lock hold for runs the CLI did not launch."""

import datetime
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from graph_helpers import beir_folder, quick_protocol, toy

from embedpyramid.config import TASK_FAMILIES, load_config
from graphbase.config_observation import observe_config
from graphbase.instance import read_binding
from graphbase.partitions import MODELS, model_dataset_key
from graphbase.up_to_date import UP_TO_DATE, report_up_to_date
from graphbase.warm import UP_TO_DATE_LINE
from pipelines.automation import nightly_refresh, nightly_summary, nightly_task_refresh
from pipelines.graph import build_definitions
from pipelines.runner import run_pipeline
from pipelines.session import open_session, selection_states
from pipelines.status import project_status

REPO = Path(__file__).resolve().parents[2]


def two_cards(write_configs, tmp_path, **datasets) -> tuple[Path, Path]:
    """A config of two trigram cards (``ngrams`` the baseline) on a 12-document BEIR dataset."""
    beir = beir_folder(tmp_path / "tiny-beir")
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)},
                           datasets={"tiny": {"loader": "beir", "path": str(beir)}, **datasets},
                           protocol=quick_protocol())
    return folder, beir


def verdicts(data: Path) -> list[str]:
    return [verdict["text"] for verdict in json.loads((data / "report" / "verdict.json").read_text())]


def test_an_edited_qrels_file_and_a_one_model_run_give_no_verdict_across_versions(write_configs, tmp_path):
    folder, beir = two_cards(write_configs, tmp_path)
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    assert verdicts(data)[0].startswith("tiny · nDCG@10 over 12 queries")
    baseline = load_config(folder).models["ngrams"].key

    # New qrels, then only the other card is evaluated: the baseline's metrics on disk are of
    # the old qrels, so they must not meet the new ones in a test.
    (beir / "qrels" / "test.tsv").write_text("".join(f"q{i}\td{(i + 1) % 12}\t1\n" for i in range(12)))
    report = run_pipeline(folder, data, instance=instance, models=["ngrams-24"], log=lambda _: None)
    assert report.failures == [] and report.summary_built
    assert "input retrieval_metrics [tiny|ngrams] is stale (frozen_dataset [tiny] has a new data version)" in \
        report.summary_excludes
    assert verdicts(data) == [
        "tiny: no verdict: comparing would mix versions. Not compared (not current): "
        f"{baseline} × tiny (retrieval_metrics) excluded: stale (frozen_dataset [tiny] has a new data version)."]
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM comparisons").fetchone() == (0,)
        assert db.execute("SELECT DISTINCT model FROM per_query_metrics").fetchall() == [
            (load_config(folder).models["ngrams-24"].key,)]
        excluded = db.execute("SELECT asset, dataset, model, state, reason FROM excluded_partitions "
                          "WHERE asset = 'retrieval_metrics'").fetchall()
        assert excluded == [("retrieval_metrics", "tiny", baseline, "stale",
                             "frozen_dataset [tiny] has a new data version")]
        recorded = db.execute("SELECT asset, model, dataset_version, facets FROM provenance "
                          "WHERE asset = 'retrieval_metrics'").fetchall()
    frozen = json.loads((data / "datasets" / "tiny" / "manifest.json").read_text())["version"]
    assert [(asset, model, version) for asset, model, version, _ in recorded] == [
        ("retrieval_metrics", load_config(folder).models["ngrams-24"].key, frozen)]
    assert set(json.loads(recorded[0][3])) == {"config/conventions [tiny]", "config/measures", "config/references [tiny]"}
    report_md = (data / "report" / "report.md").read_text()
    assert "Excluded partitions" in report_md and "no verdict: comparing would mix versions" in report_md

    # The summary is not fresh while an input is excluded, and says why.
    rows = {(row.model, row.level): row for row in project_status(folder, data, instance=instance)}
    assert rows[(None, "summary")].state == "stale"
    assert "input retrieval_metrics [tiny|ngrams] is stale (frozen_dataset [tiny] has a new data version)" in \
        rows[(None, "summary")].why
    assert rows[(baseline, "l2_retrieval")].state == "stale"

    # Evaluating the baseline on the new qrels brings the verdict back, with nothing excluded.
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).summary_excludes == []
    assert verdicts(data)[0].startswith("tiny · nDCG@10 over 12 queries")
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM excluded_partitions").fetchone() == (0,)
    assert {row.state for row in project_status(folder, data, instance=instance)} == {"fresh"}


def test_status_after_a_card_edit_lists_exactly_what_the_next_run_materializes(write_configs, tmp_path):
    folder, _ = two_cards(write_configs, tmp_path)
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    edited = write_configs(models={"ngrams": toy(), "ngrams-24": toy(20)},
                           datasets={"tiny": {"loader": "beir", "path": str(tmp_path / "tiny-beir")}},
                           protocol=quick_protocol())
    session = open_session(edited, data, instance, log=lambda _: None, verbose=False)
    from graphbase.config_observation import observe_config

    observe_config(instance, session.config)
    states = selection_states(session, list(session.config.models.values()), ["tiny"])
    card_partition = str(model_dataset_key("ngrams-24", "tiny"))
    listed = {(state.asset, state.partition) for state in states if state.needs_work and state.partition == card_partition}
    assert all(state.causes == ("config/model_card [ngrams-24] has a new data version",)
               for state in states if state.needs_work and state.partition == card_partition)
    report = run_pipeline(edited, data, instance=instance, log=lambda _: None)
    partition = str(model_dataset_key("ngrams-24", "tiny"))
    assert listed == {(asset, partition) for _, _, asset in report.assets}
    assert len(listed) == 10 and report.summary_built
    # The summaries: the edited card's dataset's comparisons, and every summary over all datasets.
    assert {(state.asset, state.partition) for state in states
            if state.needs_work and state.partition in (None, "tiny")} == {
        ("comparisons", "tiny"), ("results_db", None), ("comparison_report", None), ("benchmark_transfer", None),
        ("task_comparisons", None)}


@pytest.mark.heavy
def test_a_partition_materialized_for_the_first_time_stales_the_summaries(write_configs, tmp_path):
    other = beir_folder(tmp_path / "other-beir")
    folder, _ = two_cards(write_configs, tmp_path, other={"loader": "beir", "path": str(other)})
    (tmp_path / "home").mkdir()
    instance, data = dg.DagsterInstance.from_config(str(tmp_path / "home")), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, datasets=["tiny"], log=lambda _: None).failures == []
    defs = build_definitions(folder, data)
    # As the automation or the UI would: freeze and evaluate the other dataset, outside the CLI.
    assert defs.resolve_job_def("refresh_datasets").execute_in_process(partition_key="other", instance=instance).success
    job = defs.resolve_job_def("evaluate")
    for card in ("ngrams", "ngrams-24"):
        assert job.execute_in_process(partition_key=model_dataset_key(card, "other"), instance=instance).success
    rows = {(row.dataset, row.level): row for row in project_status(folder, data, instance=instance)}
    assert rows[(None, "summary")].state == "stale"
    assert "retrieval_metrics [other|ngrams] has a new data version" in rows[(None, "summary")].why
    # The nightly summary rebuilds what changed, and nothing once that is done.
    context = dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def(),
                                        scheduled_execution_time=datetime.datetime(2026, 11, 30, 4, 0))
    tiny_before = (data / "comparisons" / "datasets" / "tiny" / "comparisons.parquet").stat().st_mtime_ns
    # One run: the new dataset's comparisons (tiny's are current) and the summaries over every dataset.
    (request,) = nightly_summary.evaluate_tick(context).run_requests
    assert request.partition_key == "other"
    assert {key.to_user_string() for key in request.asset_selection} == {
        "comparisons", "results_db", "comparison_report", "benchmark_transfer", "task_comparisons"}
    assert defs.resolve_job_def("summary").execute_in_process(
        instance=instance, asset_selection=request.asset_selection, partition_key=request.partition_key).success
    assert nightly_summary.evaluate_tick(context).run_requests == []
    assert [verdict.split(" · ")[0] for verdict in verdicts(data)] == ["tiny", "other"]
    comparisons = instance.fetch_materializations(dg.AssetKey("comparisons"), limit=10).records
    assert sorted(record.partition_key for record in comparisons) == ["other", "tiny"]
    assert (data / "comparisons" / "datasets" / "tiny" / "comparisons.parquet").stat().st_mtime_ns == tiny_before
    # results.duckdb read the new dataset's files only (its qrels, each card's metrics and run)
    # and kept every file of the dataset it held already.
    built = instance.fetch_materializations(dg.AssetKey("results_db"), limit=1).records[0].asset_materialization
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        sources = [source for (source,) in con.execute("SELECT source FROM t_sources").fetchall()]
    new = [source for source in sources if "/other/" in source]
    assert len(new) == 5 and built.metadata["sources_read"].value == len(new)
    assert built.metadata["sources_kept"].value == len(sources) - len(new) > 0


def test_run_rewrites_the_comparisons_of_the_dataset_that_changed_only(write_configs, tmp_path):
    other = beir_folder(tmp_path / "other-beir")
    folder, _ = two_cards(write_configs, tmp_path, other={"loader": "beir", "path": str(other)})
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    files = {dataset: data / "comparisons" / "datasets" / dataset / "comparisons.parquet" for dataset in ("tiny", "other")}
    before = {dataset: path.stat().st_mtime_ns for dataset, path in files.items()}
    # New qrels on one dataset: its partitions and its comparisons are recomputed, tiny's are not.
    (other / "qrels" / "test.tsv").write_text("".join(f"q{i}\td{(i + 1) % 12}\t1\n" for i in range(12)))
    report = run_pipeline(folder, data, instance=instance, log=lambda _: None)
    assert report.failures == [] and report.summary_built and report.frozen == ["other"]
    assert {dataset for _, dataset in report.materialized} == {"other"}
    assert files["tiny"].stat().st_mtime_ns == before["tiny"] and files["other"].stat().st_mtime_ns != before["other"]
    runs = [record for record in instance.fetch_materializations(dg.AssetKey("comparisons"), limit=10).records]
    assert sorted(record.partition_key for record in runs) == ["other", "other", "tiny"]
    # One summary run (the first command had one per dataset): other's comparisons, then the
    # summaries over every dataset, which read both datasets' comparisons.
    summary_runs = instance.get_runs(dg.RunsFilter(job_name="summary"))
    assert [run.tags.get("dagster/partition") for run in summary_runs] == ["other", "other", "tiny"]
    last = instance.get_records_for_run(summary_runs[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    assert {record.event_log_entry.dagster_event.asset_key.to_user_string() for record in last.records} >= {
        "comparisons", "results_db", "comparison_report"}
    assert [verdict.split(" · ")[0] for verdict in verdicts(data)] == ["tiny", "other"]
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as db:
        assert db.execute("SELECT DISTINCT dataset FROM comparisons ORDER BY dataset").fetchall() == [("other",), ("tiny",)]
    assert {row.state for row in project_status(folder, data, instance=instance)} == {"fresh"}


def test_a_card_added_stales_its_datasets_comparisons_only_and_a_card_removed_stales_them_again(
        write_configs, tmp_path):
    other = beir_folder(tmp_path / "other-beir")
    folder, beir = two_cards(write_configs, tmp_path, other={"loader": "beir", "path": str(other)})
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    datasets = {"tiny": {"loader": "beir", "path": str(beir)}, "other": {"loader": "beir", "path": str(other)}}
    three = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24), "ngrams-32": toy(32)}, datasets=datasets,
                          protocol=quick_protocol())
    # Evaluated on `other` only: tiny's comparisons stay fresh (the new card's partition there is
    # missing, which only excludes it), other's are stale by the new partitions' data versions.
    assert run_pipeline(three, data, instance=instance, datasets=["other"], log=lambda _: None).failures == []
    session = open_session(three, data, instance, log=lambda _: None, verbose=False)
    freshness = session.freshness()
    assert not freshness.state(dg.AssetKey("comparisons"), "tiny").needs_work_now
    assert freshness.state(dg.AssetKey("comparisons"), "other").state == "fresh"
    compared = pl.read_parquet(data / "comparisons" / "datasets" / "other" / "comparisons.parquet")
    added = load_config(three).models["ngrams-32"].key
    assert added in set(compared["model_b"])
    # Removed again: its partitions are deleted, and each comparisons partition that read them
    # is stale (nothing else upstream changed), then rebuilt without it.
    write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=datasets, protocol=quick_protocol())
    session = open_session(folder, data, instance, log=lambda _: None, verbose=False)
    state = session.freshness().state(dg.AssetKey("comparisons"), "other")
    assert state.needs_work_now and state.causes == ("an input partition it read is gone (a card or dataset left "
                                                     "the config)",)
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).summary_built
    compared = pl.read_parquet(data / "comparisons" / "datasets" / "other" / "comparisons.parquet")
    assert added not in set(compared["model_b"])
    assert {row.state for row in project_status(folder, data, instance=instance)} == {"fresh"}


def test_the_nightly_refresh_freezes_every_dataset_with_data(write_configs, tmp_path):
    lee = {"loader": "gensim-lee", "task": "sts"}
    folder = write_configs(models={"ngrams": toy()}, datasets={"tiny": {"loader": "beir", "path": str(
        beir_folder(tmp_path / "tiny-beir"))}, "lee": lee}, protocol=quick_protocol())
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    session = open_session(folder, tmp_path / "data", instance, log=lambda _: None, verbose=False)
    context = dg.build_schedule_context(instance=instance, repository_def=session.defs.get_repository_def(),
                                        scheduled_execution_time=datetime.datetime(2026, 11, 30, 2, 0))
    by_schedule = {schedule.name: [request.partition_key for request in schedule.evaluate_tick(context).run_requests]
                   for schedule in [nightly_refresh, *nightly_task_refresh]}
    assert by_schedule["nightly_refresh"] == ["tiny"] and by_schedule["nightly_refresh_sts"] == ["lee"]
    assert {schedule.job_name for schedule in nightly_task_refresh} == {f"freeze_{family}" for family in TASK_FAMILIES}


def test_up_to_date_checks_warn_on_stale_assets_and_pass_once_evaluated(write_configs, tmp_path):
    folder, _ = two_cards(write_configs, tmp_path)
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []

    def latest(asset: str) -> dg.AssetCheckEvaluation:
        record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), UP_TO_DATE))
        return record.event.asset_check_evaluation

    assert latest("norm_geometry").passed and latest("comparisons").passed
    protocol = quick_protocol()
    protocol["comparison"]["seed"] = 7
    (folder / "protocol.yaml").write_text(json.dumps(protocol))
    # What the config sensor records on its ticks: the new version, then the checks.
    observe_config(instance, load_config(folder))
    report_up_to_date(instance, build_definitions(folder, data).resolve_asset_graph())
    stale = latest("norm_geometry")
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert stale.metadata["not_fresh"].value == 2 and "config/resampling has a new data version" in \
        stale.metadata["first"].value
    assert latest("exact_topk").passed
    run_pipeline(folder, data, instance=instance, log=lambda _: None)
    assert latest("norm_geometry").passed


def test_status_of_an_edited_copy_records_nothing_and_the_next_run_of_the_real_config_sees_no_change(
        write_configs, tmp_path):
    folder, beir = two_cards(write_configs, tmp_path)
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    copy = write_configs("copy", models={"ngrams": toy(), "ngrams-24": toy(24), "ngrams-16": toy(16)},
                         datasets={"tiny": {"loader": "beir", "path": str(beir)}}, protocol=quick_protocol(seed=7))
    recorded, partitions = instance.event_log_storage.get_maximum_record_id(), instance.get_dynamic_partitions(MODELS)

    rows = {(row.model, row.level): row for row in project_status(copy, data, instance=instance)}
    new_key = load_config(copy).models["ngrams-16"].key
    assert rows[(new_key, "l2_retrieval")].state == "missing"  # a card that is no partition yet
    assert rows[(load_config(copy).models["ngrams"].key, "l1_geometry")].why == (
        "config/resampling has a new data version (norm_geometry, normalization_price, pair_sanity)")  # as if observed
    assert rows[(None, "summary")].state == "stale"
    assert instance.event_log_storage.get_maximum_record_id() == recorded  # nothing recorded
    assert instance.get_dynamic_partitions(MODELS) == partitions  # nothing registered
    assert read_binding(instance.root_directory).configs == str(folder)  # still bound to the real config

    lines: list[str] = []
    assert run_pipeline(folder, data, instance=instance, log=lines.append).failures == []
    assert lines == [UP_TO_DATE_LINE]


def test_a_run_launched_outside_the_cli_waits_for_the_cli_lock(write_configs, tmp_path):
    folder, _ = two_cards(write_configs, tmp_path)
    data = tmp_path / "data"
    (tmp_path / "home").mkdir()
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    defs = open_session(folder, data, instance, log=lambda _: None, verbose=False).defs  # registers the partitions
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from graphbase.home import DataFolderLock; from graphbase.instance import open_instance; "
         "root = Path(sys.argv[1]); lock = DataFolderLock(root, open_instance(root)); lock.acquire(); "
         "print('held', flush=True); time.sleep(4); print(time.time(), flush=True); lock.release()", str(data)],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started: list[float] = []
    runner = threading.Thread(target=lambda: started.append(time.time()) or started.append(
        defs.resolve_job_def("refresh_datasets").execute_in_process(partition_key="tiny", instance=instance).success))
    runner.start()
    released = float(holder.stdout.readline())
    runner.join(timeout=120)
    holder.wait()
    assert started[1] is True
    materialized = instance.fetch_materializations(dg.AssetKey("frozen_dataset"), limit=1).records[0]
    assert started[0] < released <= materialized.timestamp + 0.05
