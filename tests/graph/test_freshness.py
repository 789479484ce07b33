"""One notion of stale: what the UI shows, what the automation requests and what the CLI runs
are the same partitions — for config edits, code versions, re-frozen data and removed cards."""

import datetime
import json

import dagster as dg
from graph_helpers import beir_folder, plan_and_automation, quick_protocol, requested_by_automation, toy

from assets.retrieval import EXACT_TOPK, l2_retrieval
from embedpyramid.config import load_config
from graphbase.conditions import EVALUATE_WHEN_STALE, SUMMARIZE_WHEN_STALE, UpstreamBusy, WaitsForOtherPartition
from graphbase.config_observation import config_observations
from graphbase.dagster_internals import DATA_VERSION_TAG
from graphbase.facets import MODEL_CARD
from graphbase.instance import bind, open_instance
from graphbase.partitions import MODELS, model_dataset_key
from pipelines import graph
from pipelines.automation import nightly_refresh
from pipelines.definitions import _location_folders
from pipelines.graph import build_definitions
from pipelines.runner import run_pipeline
from pipelines.session import open_session, pending_states
from pipelines.status import project_status


def test_identical_data_refrozen_nightly_requests_nothing_and_changed_data_only_its_partitions(
        write_configs, tiny, tmp_path):
    beir = beir_folder(tmp_path / "beir")
    datasets = {**tiny, "other": {"loader": "beir", "path": str(beir)}}
    folder = write_configs(models={"ngrams": toy()}, datasets=datasets, protocol=quick_protocol())
    data = tmp_path / "data"
    instance = open_instance(data)
    assert run_pipeline(folder, data, instance=instance).failures == []
    defs = build_definitions(folder, data)
    _, cursor = requested_by_automation(defs, instance)

    # The 02:00 schedule re-freezes every dataset: same content, same data version, nothing moves.
    context = dg.build_schedule_context(instance=instance,
                                        scheduled_execution_time=datetime.datetime(2026, 11, 30, 2, 0))
    requests = list(nightly_refresh(context))
    assert sorted(request.partition_key for request in requests) == ["other", "tiny"]
    for request in requests:
        assert defs.resolve_job_def("refresh_datasets").execute_in_process(
            partition_key=request.partition_key, instance=instance).success
    requested, cursor = requested_by_automation(defs, instance, cursor)
    assert requested == set()
    assert plan_and_automation(folder, data, instance)[:2] == (set(), set())

    # New data in one dataset: its source version changes, it is re-frozen, then only its own
    # partitions (and the summaries) are evaluated again.
    with (beir / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "d99", "text": "Seals bark too."}) + "\n")
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/dataset_source [other]"]
    assert requested == planned == {("frozen_dataset", "other")}
    report = run_pipeline(folder, data, instance=instance)
    key = load_config(folder).models["ngrams"].key
    assert report.frozen == ["other"] and report.materialized == [(key, "other")]
    assert report.skipped == [(key, "tiny")] and report.summary_built


def test_a_new_code_version_makes_exactly_that_asset_stale_everywhere(write_configs, tiny, tmp_path,
                                                                       monkeypatch):
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny,
                           protocol=quick_protocol())
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance).failures == []
    bumped = l2_retrieval.map_asset_specs(
        lambda spec: spec.replace_attributes(code_version="2") if spec.key == EXACT_TOPK else spec)
    monkeypatch.setattr(graph, "ASSETS", [bumped if asset is l2_retrieval else asset for asset in graph.ASSETS])
    planned, requested, _ = plan_and_automation(folder, data, instance)
    partitions = {str(model_dataset_key(name, "tiny")) for name in ("ngrams", "ngrams-24")}
    assert requested == planned == {("exact_topk", partition) for partition in partitions}
    session = open_session(folder, data, instance, log=lambda _line: None, verbose=False)
    states = pending_states(session, list(session.config.models.values()), ["tiny"])
    assert {(state.asset, state.causes) for state in states} == {("exact_topk", ("has a new code version",))}
    # The search is deterministic: the new run has the same content, so nothing downstream moves.
    report = run_pipeline(folder, data, instance=instance)
    assert sorted(asset for _, _, asset in report.assets) == ["exact_topk", "exact_topk"]


def test_an_edited_card_is_stale_with_its_cause_and_a_removed_card_leaves_its_folder(
        write_configs, tiny, tmp_path):
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny,
                           protocol=quick_protocol())
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    assert run_pipeline(folder, data, instance=instance).failures == []
    old_key = load_config(folder).models["ngrams-24"].key
    edited = write_configs(models={"ngrams": toy(), "ngrams-24": toy(20)}, datasets=tiny,
                           protocol=quick_protocol())
    rows = {(row.model, row.level): row for row in project_status(edited, data, instance=instance)}
    new_key = load_config(edited).models["ngrams-24"].key
    assert rows[(new_key, "embeddings")].state == "stale"
    assert rows[(new_key, "embeddings")].why == (
        "config/model_card [ngrams-24] has a new data version (document_embeddings, query_embeddings)")
    # Followed upstream: what reads the embeddings is stale too, with the same root cause.
    assert rows[(new_key, "l2_retrieval")].state == "stale"
    assert rows[(new_key, "l2_retrieval")].why == (
        "config/model_card [ngrams-24] has a new data version (exact_topk, retrieval_metrics)")
    assert {row.state for (model, _), row in rows.items() if model == load_config(folder).models["ngrams"].key} == {"fresh"}
    assert old_key != new_key and sorted(instance.get_dynamic_partitions(MODELS)) == ["ngrams", "ngrams-24"]

    # The instance follows the CLI's folder: one without the card deletes its partition, says so,
    # and keeps its history and artefacts.
    removed = write_configs("removed", models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    lines: list[str] = []
    assert run_pipeline(removed, data, instance=instance, log=lines.append).failures == []
    assert f"partitions deleted, no longer in {removed} (their history stays): models: ngrams-24" in lines
    assert instance.get_dynamic_partitions(MODELS) == ["ngrams"]
    assert instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey("retrieval_metrics"), asset_partitions=[str(model_dataset_key("ngrams-24", "tiny"))]),
        limit=1).records
    assert (data / "metrics" / "tiny" / old_key / "exact.parquet").is_file()


def test_dagster_dev_with_only_dagster_home_follows_the_cli(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    instance = dg.DagsterInstance.from_config(str(home))
    bind(instance, tmp_path / "my-configs", tmp_path / "my-data")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("EMBEDPYRAMID_CONFIGS", raising=False)
    monkeypatch.delenv("EMBEDPYRAMID_DATA", raising=False)
    assert _location_folders() == (str(tmp_path / "my-configs"), str(tmp_path / "my-data"))
    monkeypatch.setenv("EMBEDPYRAMID_CONFIGS", str(tmp_path / "other"))
    assert _location_folders()[0] == str(tmp_path / "other")


def test_observing_the_config_sources_in_dagster_gives_the_cli_versions(write_configs, tiny, tmp_path):
    """The UI's "Observe sources" (the facets' own observe functions) and the CLI's report agree."""
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny)
    instance = dg.DagsterInstance.ephemeral()
    session = open_session(folder, tmp_path / "data", instance, log=lambda _line: None, verbose=False)
    graph = session.defs.resolve_asset_graph()
    facets = sorted(key for key in graph.get_all_asset_keys() if graph.get(key).is_observable)
    jobs = [dg.define_asset_job(f"observe_{index}", selection=[key]) for index, key in enumerate(facets)]
    observing = dg.Definitions.merge(session.defs, dg.Definitions(jobs=jobs))
    for job in jobs:
        assert observing.resolve_job_def(job.name).execute_in_process(instance=instance).success
    assert config_observations(instance, session.config) == []
    record = instance.get_latest_data_version_record(MODEL_CARD.key, True, "ngrams-24")
    assert record.event_log_entry.tags[DATA_VERSION_TAG] == session.config.models["ngrams-24"].card_hash


def test_a_partition_a_run_materializes_while_the_tick_evaluates_is_not_requested_again(monkeypatch):
    """A run that ends while the automation's tick evaluates: Dagster's status cache has the
    partition neither materialized (asset records read when the tick began) nor in progress (the
    run has ended), so ``missing`` holds; the last part of the condition reads the instance again
    and leaves the partition alone. Here the "run" reports its materialization while the tick
    evaluates the condition's WaitsForOtherPartition part, after the cache was read."""
    frozen_def = dg.StaticPartitionsDefinition(["x"])

    @dg.asset(partitions_def=frozen_def, automation_condition=EVALUATE_WHEN_STALE)
    def frozen() -> None:
        return None

    @dg.asset(partitions_def=frozen_def, deps=[frozen], automation_condition=EVALUATE_WHEN_STALE)
    def metrics() -> None:
        return None

    defs = dg.Definitions(assets=[frozen, metrics])
    instance = dg.DagsterInstance.ephemeral()
    assert dg.materialize([frozen], instance=instance, partition_key="x").success
    assert requested_by_automation(defs, instance)[0] == {("metrics", "x")}

    def run_ends_now(self, freshness, key, partition) -> bool:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition))
        return False

    monkeypatch.setattr(WaitsForOtherPartition, "holds", run_ends_now)
    assert requested_by_automation(defs, instance)[0] == set()
    assert instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey("metrics"), asset_partitions=["x"]),
                                           limit=1).records


def test_a_summary_waits_while_an_unpartitioned_input_is_missing_and_not_requested(monkeypatch):
    """A run upstream that ends while the tick evaluates: the tick left ``results_db`` alone (its
    upstream was running when it got there) and, the run over, found nothing busy when it got to
    the report, which then ran alone before results.duckdb existed (tests/deploy/test_single_host.py).
    Here the upstream is busy for ``results_db`` only."""
    datasets = dg.StaticPartitionsDefinition(["x"])

    @dg.asset(partitions_def=datasets, automation_condition=EVALUATE_WHEN_STALE)
    def metrics() -> None:
        return None

    @dg.asset(deps=[metrics], group_name="summary", automation_condition=SUMMARIZE_WHEN_STALE)
    def results_db() -> None:
        return None

    @dg.asset(deps=[results_db, metrics], group_name="summary", automation_condition=SUMMARIZE_WHEN_STALE)
    def report() -> None:
        return None

    defs = dg.Definitions(assets=[metrics, results_db, report])
    instance = dg.DagsterInstance.ephemeral()
    assert dg.materialize([metrics], instance=instance, partition_key="x").success
    assert requested_by_automation(defs, instance)[0] == {("results_db", None), ("report", None)}  # together
    busy = UpstreamBusy.evaluate

    def busy_for_results_db(self, context):
        if context.key == results_db.key:
            return dg.AutomationResult(context, true_subset=context.candidate_subset)
        return busy(self, context)

    monkeypatch.setattr(UpstreamBusy, "evaluate", busy_for_results_db)
    assert requested_by_automation(defs, instance)[0] == set()
    assert dg.materialize([results_db], instance=instance).success
    assert requested_by_automation(defs, instance)[0] == {("report", None)}


def test_summary_runs_give_each_dataset_a_run_and_place_the_summaries_over_every_dataset():
    from pipelines.automation import summary_runs

    todo = [("comparisons", "a"), ("comparisons", "b"), ("report", None), ("results_db", None)]
    assert summary_runs(todo, whole_after_several=True) == [
        (["comparisons"], "a"), (["comparisons", "report", "results_db"], "b")]
    # The schedule leaves them to the automation when two runs would be unordered on the queue.
    assert summary_runs(todo, whole_after_several=False) == [(["comparisons"], "a"), (["comparisons"], "b")]
    assert summary_runs(todo[1:], whole_after_several=False) == [(["comparisons", "report", "results_db"], "b")]
    assert summary_runs(todo[2:], whole_after_several=False) == [(["report", "results_db"], None)]
    assert summary_runs([], whole_after_several=True) == []
