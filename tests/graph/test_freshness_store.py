"""The kept states (graphbase/freshness_store.py) against the full walk they stand for.

Random sequences of what happens to a deployment — a real run, a materialization reported with
a new or an identical data version, a config facet observed with a new version, a run that
fails, a wipe, a card added or removed, a code change — each followed by the kept states
brought up to date and compared, partition by partition, with a full walk of Dagster's stale
status (:func:`graphbase.freshness_store.reconcile`: empty when they agree). Then the scheduled
reconcile: a kept state that disagrees fails the tick, with the partition named, and is repaired.
"""

from __future__ import annotations

import random
import warnings

import dagster as dg
import pytest
from dagster._core.events import AssetMaterializationPlannedData, DagsterEvent
from dagster._core.utils import make_new_run_id
from graph_helpers import toy

from embedpyramid.config import load_config
from graphbase import freshness_store
from graphbase.config_observation import observe_config
from graphbase.dagster_internals import DATA_VERSION_TAG, all_partitions
from graphbase.freshness import AssetState, Freshness
from graphbase.freshness_store import STORE_KEY, kept_freshness, reconcile
from graphbase.instance import open_instance
from graphbase.partitions import model_dataset_key
from pipelines.automation import freshness_reconcile
from pipelines.runner import run_pipeline
from pipelines.session import Session, open_session


def _graph(defs: dg.Definitions, changed: set[str]) -> object:
    """The graph of ``defs`` with a new code version for each asset in ``changed``."""
    if not changed:
        return defs.resolve_asset_graph()

    def edit(spec: dg.AssetSpec) -> dg.AssetSpec:
        return (spec.replace_attributes(code_version=f"{spec.code_version}-edited")
                if spec.key.to_user_string() in changed else spec)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assets = [dg.map_asset_specs(edit, [one])[0] if isinstance(one, dg.AssetsDefinition) else one
                  for one in defs.assets or ()]
        return dg.Definitions(assets=assets, resources=defs.resources).resolve_asset_graph()


def _cards(extra: list[str]) -> dict:
    return {"a": toy(16), "b": toy(18), **{name: toy(20 + index) for index, name in enumerate(extra)}}


def _crashed_run(instance: dg.DagsterInstance, graph: object, asset: dg.AssetKey, partition: str | None, *,
                 canceled: bool) -> None:
    """A run that planned ``asset``'s ``partition`` and ended before materializing it: its worker
    lost (failed) or canceled, with no failed-materialization event (what a killed run leaves).
    The kept states are compared while it runs too, so that its end is read from the run's
    status change alone."""
    run = instance.add_run(dg.DagsterRun(job_name="evaluate", run_id=make_new_run_id(),
                                         status=dg.DagsterRunStatus.STARTED))
    instance.report_dagster_event(DagsterEvent(
        event_type_value=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED.value, job_name="evaluate",
        event_specific_data=AssetMaterializationPlannedData(asset, partition=partition)), run_id=run.run_id)
    assert reconcile(instance, graph) == [], "while the run is in progress"
    if canceled:
        instance.report_run_canceled(run)
    else:
        instance.report_run_failed(run)


@pytest.mark.parametrize("seed", [7, 11])
def test_kept_states_equal_a_full_walk_after_every_step_of_a_random_history(write_configs, tiny, tmp_path, seed):
    """Twelve random steps per seed (about a minute each): two cards on two datasets to begin with."""
    rng = random.Random(seed)
    datasets = {**tiny, "other": {**tiny["tiny"]}}
    extra: list[str] = []
    folder = write_configs(models=_cards(extra), datasets=datasets)
    data = tmp_path / "data"
    instance = open_instance(data)
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    session = open_session(load_config(folder), data, instance, log=lambda _: None, verbose=False)
    changed: set[str] = set()
    assert reconcile(instance, _graph(session.defs, changed)) == []
    done = []
    for step in range(12):
        graph = _graph(session.defs, changed)
        view = session.freshness().view
        partitions = {key: all_partitions(view, key) if graph.get(key).partitions_def else [None]
                      for key in graph.get_all_asset_keys()}
        materializable = sorted(key for key in partitions if graph.get(key).is_materializable and partitions[key])
        facets = sorted(key for key in partitions if graph.get(key).is_observable and partitions[key])
        kind = rng.choice(["materialize", "materialize", "observe", "observe", "fail", "run", "wipe",
                           "new card", "remove card", "code change"])
        if kind == "materialize":
            asset = rng.choice(materializable)
            instance.report_runless_asset_event(dg.AssetMaterialization(
                asset, partition=rng.choice(partitions[asset]), tags={DATA_VERSION_TAG: rng.choice(["x", "y"])}))
        elif kind == "observe":
            asset = rng.choice(facets)
            instance.report_runless_asset_event(dg.AssetObservation(
                asset, partition=rng.choice(partitions[asset]), tags={DATA_VERSION_TAG: rng.choice(["p", "q"])}))
        elif kind == "fail":
            asset = rng.choice(materializable)
            _crashed_run(instance, graph, asset, rng.choice(partitions[asset]), canceled=rng.random() < 0.5)
        elif kind == "run":
            report = run_pipeline(folder, data, instance=instance, datasets=[rng.choice(sorted(datasets))],
                                  log=lambda _: None)
            assert report.failures == []
        elif kind == "wipe":
            instance.wipe_assets([rng.choice(materializable)])
        elif kind in ("new card", "remove card"):
            if kind == "new card":
                extra.append(f"c{step}")
            elif extra:
                extra.pop(0)
            folder = write_configs(models=_cards(extra), datasets=datasets)
            session = open_session(load_config(folder), data, instance, log=lambda _: None, verbose=False)
            observe_config(instance, session.config)
        else:
            changed.add(rng.choice(materializable).to_user_string())
        done.append(kind)
        assert reconcile(instance, _graph(session.defs, changed)) == [], f"after {done}"


def _one_card_run(write_configs, tiny, tmp_path) -> tuple[dg.DagsterInstance, Session]:
    """One toy card evaluated on the tiny dataset by ``embedpyramid run``'s runner, on a data
    folder's instance: the instance and a session of that config."""
    folder = write_configs(models={"a": toy(16)}, datasets=tiny)
    data = tmp_path / "data"
    instance = open_instance(data)
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    return instance, open_session(load_config(folder), data, instance, log=lambda _: None, verbose=False)


def test_a_quiet_refresh_reads_the_kept_states_and_asks_dagster_nothing(write_configs, tiny, tmp_path):
    instance, session = _one_card_run(write_configs, tiny, tmp_path)
    graph = session.defs.resolve_asset_graph()
    kept_freshness(instance, graph)
    quiet = kept_freshness(instance, graph)
    assert quiet.kept is not None and quiet.kept.dirty == set()
    key = dg.AssetKey("retrieval_metrics")
    assert quiet.state(key, str(model_dataset_key("a", "tiny"))).state == "fresh"
    assert "dagster" not in quiet.__dict__  # Dagster's stale resolver was never built


def test_the_scheduled_reconcile_fails_loudly_on_a_kept_state_a_full_walk_disagrees_with(write_configs, tiny, tmp_path):
    instance, session = _one_card_run(write_configs, tiny, tmp_path)
    graph = session.defs.resolve_asset_graph()
    kept_freshness(instance, graph)
    # A kept state that no event explains (what a bug in the incremental rules would leave).
    stored = instance.daemon_cursor_storage.get_cursor_values({STORE_KEY})[STORE_KEY]
    partition = str(model_dataset_key("a", "tiny"))
    wrong = stored.replace('"states":[]', f'"causes":[[]],"states":[["exact_topk","{partition}","missing",true,0]]'
                           ).replace('"causes":[],', "", 1)
    assert wrong != stored
    instance.daemon_cursor_storage.set_cursor_values({STORE_KEY: wrong})
    assert kept_freshness(instance, graph).state(dg.AssetKey("exact_topk"), partition).state == "missing"
    context = dg.build_schedule_context(instance=instance, repository_def=session.defs.get_repository_def())
    with pytest.raises(Exception, match=rf"exact_topk \[{partition}\]: kept missing, a full walk finds fresh"):
        freshness_reconcile(context)
    assert Freshness(instance, graph).state(dg.AssetKey("exact_topk"), partition) == AssetState(
        "exact_topk", partition, "fresh")
    assert reconcile(instance, graph) == []  # repaired


def test_on_a_storage_whose_ids_commit_out_of_order_a_reread_window_recomputes_only_what_it_had_not_seen(
        write_configs, tiny, tmp_path, monkeypatch):
    """Postgres assigns ids before commit: the kept cursor stays behind the newest id and every
    refresh reads that window again. The events already applied are skipped (a quiet tick on
    Postgres recomputes nothing); one the window holds that was not applied (a lower id that
    committed late, here: taken out of the kept ``seen``) marks its partition and what is below."""
    monkeypatch.setattr(freshness_store, "is_sqlite_event_log", lambda _instance: False)
    instance, session = _one_card_run(write_configs, tiny, tmp_path)
    graph = session.defs.resolve_asset_graph()
    kept_freshness(instance, graph)
    stored = freshness_store._read(instance)
    newest = instance.event_log_storage.get_maximum_record_id()
    assert stored.cursor < newest and stored.seen  # the run's events are younger than the window

    quiet = kept_freshness(instance, graph)
    assert quiet.kept.dirty == set() and "dagster" not in quiet.__dict__

    partition = str(model_dataset_key("a", "tiny"))
    metrics = instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey("retrieval_metrics"),
                                                                    asset_partitions=[partition]), limit=1).records[0]
    assert metrics.storage_id in stored.seen
    stored.seen.remove(metrics.storage_id)
    instance.daemon_cursor_storage.set_cursor_values({STORE_KEY: stored.dump()})
    late = kept_freshness(instance, graph)
    assert {(asset.to_user_string(), p) for asset, p in late.kept.dirty} >= {("retrieval_metrics", partition)}
    assert ("frozen_dataset", "tiny") not in {(asset.to_user_string(), p) for asset, p in late.kept.dirty}
    assert reconcile(instance, graph) == []
