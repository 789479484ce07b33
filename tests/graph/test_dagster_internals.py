"""The contract of graphbase.dagster_internals against the installed Dagster: the only module that
imports Dagster internals. If a Dagster release moves or changes one of them, this fails first."""

import shutil

import dagster as dg

from graphbase.dagster_internals import (
    DATA_VERSION_TAG,
    DagsterStaleness,
    StaleCause,
    all_partitions,
    asset_graph_of,
    candidate_partitions,
    checks_named,
    graph_view,
    open_sqlite_home,
    parent_partitions,
    partition_dimensions,
    release_connections,
    subset_of,
    unpartitioned,
)

DATASETS = dg.StaticPartitionsDefinition(["x", "y"])
PAIRS = dg.MultiPartitionsDefinition({"model": dg.StaticPartitionsDefinition(["m"]), "dataset": DATASETS})
VERSIONS = {"x": "1", "y": "1"}


@dg.asset(partitions_def=DATASETS, code_version="1")
def frozen(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(data_version=dg.DataVersion(context.partition_key + VERSIONS[context.partition_key]))


@dg.asset(partitions_def=PAIRS, deps=[frozen], code_version="1", check_specs=[dg.AssetCheckSpec("shape", asset="metrics")])
def metrics(context: dg.AssetExecutionContext):
    graphs.append(asset_graph_of(context, lambda: "rebuilt"))
    yield dg.MaterializeResult(check_results=[dg.AssetCheckResult(check_name="shape", passed=True)])


@dg.asset_check(asset="metrics", name="other")
def other() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset(deps=[metrics], code_version="1")
def summary() -> None:
    return None


graphs: list = []
DEFS = dg.Definitions(assets=[frozen, metrics, summary], asset_checks=[other])


def materialize(instance: dg.DagsterInstance, asset, partition: str | None = None) -> None:
    assert dg.materialize([asset], instance=instance, partition_key=partition, selection=[asset]).success


def test_direct_stale_status_causes_and_partition_mappings():
    instance = dg.DagsterInstance.ephemeral()
    graph = DEFS.resolve_asset_graph()
    pair = str(dg.MultiPartitionKey({"model": "m", "dataset": "x"}))
    staleness = DagsterStaleness(graph_view(instance, graph))
    assert staleness.status(metrics.key, pair) == "missing"
    for dataset in ("x", "y"):
        materialize(instance, frozen, dataset)
    for dataset in ("x", "y"):
        materialize(instance, metrics, str(dg.MultiPartitionKey({"model": "m", "dataset": dataset})))
    materialize(instance, summary)
    view = graph_view(instance, graph)
    assert DagsterStaleness(view).status(metrics.key, pair) == "fresh"

    VERSIONS["x"] = "2"
    try:
        materialize(instance, frozen, "x")
    finally:
        VERSIONS["x"] = "1"
    staleness = DagsterStaleness(graph_view(instance, graph))
    assert staleness.status(metrics.key, pair) == "stale"
    assert staleness.root_causes(metrics.key, pair) == [StaleCause(frozen.key, "x", "has a new data version")]
    # Direct only: the summary reads metrics, which is stale but has not changed yet.
    assert staleness.status(summary.key, None) == "fresh"
    record = instance.get_latest_data_version_record(frozen.key, False, "x")
    assert record.event_log_entry.tags[DATA_VERSION_TAG] == "x2"

    assert parent_partitions(view, metrics.key, pair, frozen.key) == ["x"]
    assert parent_partitions(view, summary.key, None, metrics.key) == sorted(
        str(dg.MultiPartitionKey({"model": "m", "dataset": d})) for d in ("x", "y"))
    assert all_partitions(view, frozen.key) == ["x", "y"]
    assert partition_dimensions(graph, metrics.key, pair) == {"model": "m", "dataset": "x"}
    assert partition_dimensions(metrics, metrics.key, pair) == {"model": "m", "dataset": "x"}
    assert partition_dimensions(graph, frozen.key, "y") == {"partition": "y"}


@dg.observable_source_asset(partitions_def=DATASETS)
def settings() -> dg.DataVersion:
    raise AssertionError("observed by reported events only")


@dg.asset(partitions_def=DATASETS, deps=[settings], code_version="1")
def tuned() -> None:
    return None


def test_the_asset_wide_reads_give_dagsters_own_answers_with_fewer_queries(monkeypatch):
    # DagsterStaleness reads a partition's latest record with its asset's others and answers "no
    # input changed" from it; on every partition it must say what Dagster's own resolver says: a
    # changed input version (x), an input materialized again with the same version (y: not
    # stale), a summary over both, an observed input (a config facet) with a new version and
    # one observed again with the same, and a partition never materialized.
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._core.definitions.events import AssetKeyPartitionKey
    from dagster._utils.caching_instance_queryer import CachingInstanceQueryer

    from graphbase.dagster_internals import _AssetWideQueryer

    instance = dg.DagsterInstance.ephemeral()
    graph = dg.Definitions(assets=[frozen, metrics, summary, settings, tuned]).resolve_asset_graph()
    pairs = [str(dg.MultiPartitionKey({"model": "m", "dataset": d})) for d in ("x", "y")]

    def observe(partition: str, version: str) -> None:
        instance.report_runless_asset_event(dg.AssetObservation(settings.key, partition=partition,
                                                                tags={DATA_VERSION_TAG: version}))

    for dataset in ("x", "y"):
        materialize(instance, frozen, dataset)
        observe(dataset, "a")
        materialize(instance, tuned, dataset)
    materialize(instance, metrics, pairs[0])
    materialize(instance, summary)
    VERSIONS["x"] = "2"
    try:
        materialize(instance, frozen, "x")
    finally:
        VERSIONS["x"] = "1"
    materialize(instance, frozen, "y")
    materialize(instance, metrics, pairs[1])
    materialize(instance, frozen, "y")  # same version again: a newer record, no new data version
    observe("x", "b")
    observe("y", "a")

    queries = []
    for method in ("fetch_materializations", "fetch_observations"):
        original = getattr(dg.DagsterInstance, method)
        monkeypatch.setattr(dg.DagsterInstance, method, lambda self, *args, _f=original, **kwargs:
                            queries.append(args) or _f(self, *args, **kwargs))
    asked = ([(frozen.key, d) for d in ("x", "y")] + [(metrics.key, p) for p in pairs] + [(summary.key, None)]
             + [(tuned.key, d) for d in ("x", "y")])
    ours = DagsterStaleness(graph_view(instance, graph))
    found = [(ours.status(key, partition), ours.root_causes(key, partition)) for key, partition in asked]
    ours_queries, queries[:] = len(queries), []
    dagster = CachingStaleStatusResolver(instance, graph, graph_view(instance, graph))
    expected = [({"stale": "stale", "missing": "missing"}.get(dagster.get_status(key, partition).value.lower(), "fresh"),
                 [StaleCause(c.asset_key, c.partition_key, c.reason) for c in dagster.get_stale_root_causes(key, partition)])
                for key, partition in asked]
    assert found == expected
    assert [status for status, _ in found] == ["fresh", "fresh", "stale", "fresh", "stale", "stale", "fresh"]
    assert ours_queries < len(queries), (ours_queries, len(queries))
    # The latest record of every partition, read per asset, is the one Dagster's queryer reads
    # per partition (an observed source's included).
    plain = CachingInstanceQueryer(instance, graph, graph_view(instance, graph))
    wide = _AssetWideQueryer(graph_view(instance, graph))
    for key, partition in asked + [(settings.key, d) for d in ("x", "y")]:
        partition_key = AssetKeyPartitionKey(key, partition)
        expected_record = plain.get_latest_materialization_or_observation_record(partition_key)
        found_record = wide.get_latest_materialization_or_observation_record(partition_key)
        assert (found_record.storage_id if found_record else None) == (expected_record.storage_id if expected_record else None)


def test_checks_are_selected_by_name_and_an_in_process_step_gets_the_built_graph():
    graph = DEFS.resolve_asset_graph()
    assert checks_named("shape").resolve_checks(graph) == {dg.AssetCheckKey(metrics.key, "shape")}
    assert unpartitioned().resolve(graph) == {summary.key}
    assert unpartitioned().to_serializable_asset_selection(graph).resolve(graph) == {summary.key}
    job = dg.define_asset_job("job", selection=dg.AssetSelection.assets(metrics) - checks_named("other"))
    resolved = dg.Definitions(assets=[frozen, metrics, summary], asset_checks=[other], jobs=[job]).resolve_job_def("job")
    assert {key.name for key in resolved.asset_layer.asset_graph.asset_check_keys} == {"shape"}
    graphs.clear()
    materialize(dg.DagsterInstance.ephemeral(), metrics, str(dg.MultiPartitionKey({"model": "m", "dataset": "x"})))
    assert graphs == ["rebuilt"]


class FirstPartition(dg.AutomationCondition):
    """True for the first of the candidate partitions, through the adapter's two helpers."""

    @property
    def name(self) -> str:
        return "first"

    def evaluate(self, context):
        first = candidate_partitions(context)[:1]
        return dg.AutomationResult(context, true_subset=subset_of(context.asset_graph_view, context.key, first))


def test_automation_conditions_read_candidates_and_return_subsets():
    asset = frozen.with_attributes(automation_condition=FirstPartition())
    result = dg.evaluate_automation_conditions(dg.Definitions(assets=[asset]), dg.DagsterInstance.ephemeral())
    (evaluated,) = result.results
    assert evaluated.true_subset.expensively_compute_partition_keys() == {"x"}


def test_the_sqlite_storage_reuses_a_bounded_set_of_engines_and_reads_what_dagster_wrote(tmp_path, monkeypatch):
    # Dagster's own SQLite storage writes the history first; the reused-engine one reads the same files.
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as plain:
        materialize(plain, frozen, "x")
    monkeypatch.setattr("graphbase.dagster_internals._ReusedEngineEventLog.ENGINES_KEPT", 2)
    with open_sqlite_home(str(tmp_path)) as instance:
        events = instance.event_log_storage
        assert type(events).__name__ == "_ReusedEngineEventLog"
        assert instance.get_latest_materialization_event(frozen.key).dagster_event.partition == "x"
        for _ in range(3):  # three more runs: a database file each, besides the index
            materialize(instance, frozen, "y")
        assert len(events._engines) == 2  # the most recently used files' engines; the others disposed
        runs = instance.get_runs()
        assert len(runs) == 4 and len(events.get_all_run_ids()) == 4
        assert all(any(event.dagster_event and event.dagster_event.is_step_success
                       for event in instance.all_logs(run.run_id)) for run in runs)
        # What a run's processes rebuild the instance from names the same storage on the same files.
        with dg.DagsterInstance.from_ref(instance.get_ref()) as rebuilt:
            assert type(rebuilt.event_log_storage).__name__ == "_ReusedEngineEventLog"
            assert len(rebuilt.get_runs()) == 4
    with dg.DagsterInstance.from_config(str(tmp_path)) as plain:  # and Dagster's storage reads what it wrote
        assert len(plain.get_runs()) == 4


def test_the_event_log_keeps_its_connections_open_until_released_then_its_files_settle(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

    def history() -> dict[str, tuple[int, int]]:
        return {str(path.relative_to(tmp_path)): (path.stat().st_size, path.stat().st_mtime_ns)
                for path in sorted(tmp_path.rglob("*.db*"))}

    with open_sqlite_home(str(tmp_path)) as instance:
        materialize(instance, frozen, "x")
        (index,) = tmp_path.rglob("index.db")
        # The index's connection stayed open after the run: its write-ahead log is still beside it.
        assert index.with_name("index.db-wal").is_file()
        release_connections(instance)
        settled = history()
        assert settled and not [name for name in settled if name.endswith(("-wal", "-shm"))]
        # A read through the same instance reconnects, and once released leaves the files as they were.
        assert instance.get_latest_materialization_event(frozen.key).dagster_event.partition == "x"
        release_connections(instance)
        assert history() == settled
    with dg.DagsterInstance.from_config(str(tmp_path)) as plain:  # Dagster's own storage reads every event
        assert plain.get_latest_materialization_event(frozen.key).dagster_event.partition == "x"


def test_a_copied_sqlite_home_keeps_its_own_history_and_other_storages_are_kept(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with open_sqlite_home(str(tmp_path / "a")) as first:
        materialize(first, frozen, "x")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    with open_sqlite_home(str(tmp_path / "b")) as copy:
        materialize(copy, frozen, "y")
        assert len(copy.get_runs()) == 2
    with open_sqlite_home(str(tmp_path / "a")) as first:
        assert len(first.get_runs()) == 1  # the copy's run went to the copy's files only
    # A dagster.yaml that names its storages one by one (Dagster's older form) is opened as it is.
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "dagster.yaml").write_text("\n".join([
        "event_log_storage:", "  module: dagster._core.storage.event_log", "  class: SqliteEventLogStorage",
        "  config:", f"    base_dir: {tmp_path / 'c' / 'events'}", ""]))
    with open_sqlite_home(str(tmp_path / "c")) as composite:
        assert type(composite.event_log_storage).__name__ == "SqliteEventLogStorage"
