"""A session: one config folder, its asset graph, the data folder's store and a Dagster instance,
ready to ask Dagster for the state of a selection and to launch runs. What the runner
(:mod:`pipelines.runner`) and the ``status`` command (:mod:`pipelines.status`) share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import dagster as dg

from embedpyramid import progress
from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.store import ArtifactStore, StorePath
from graphbase.config_observation import pending_facet_versions
from graphbase.dagster_internals import release_connections
from graphbase.freshness import AssetState, Freshness
from graphbase.freshness_store import kept_freshness
from graphbase.instance import abandoned_runs, bind, open_instance
from graphbase.partitions import (
    apply_partition_sync,
    dataset_partitions,
    model_dataset_key,
    model_dataset_partitions,
    task_family_assets,
)
from graphbase.pools import ensure_pools
from graphbase.up_to_date import UP_TO_DATE
from pipelines.automation import (
    evaluation_job,
    refresh_datasets_job,
    summary_assets,
    task_evaluation_jobs,
    task_freeze_jobs,
)
from pipelines.graph import build_definitions


@dataclass(frozen=True)
class DatasetJobs:
    """How one dataset is brought up to date: the asset that freezes it and its job, the assets
    evaluated once for the dataset (for no model: L5's BM25), and the per-(card, dataset) assets,
    upstream first, and the job that evaluates them."""

    frozen_asset: str
    freeze_job: str
    assets: tuple[str, ...]
    evaluate_job: str
    dataset_assets: tuple[str, ...] = ()


@dataclass
class Session:
    """A config, its graph and an instance, ready to ask for states and launch runs."""

    config: ProjectConfig
    store: ArtifactStore
    defs: dg.Definitions
    instance: dg.DagsterInstance
    log: Callable[[str], None]
    verbose: bool = False
    pending: dict[tuple[dg.AssetKey, str | None], str] = field(default_factory=dict)
    """Config facet versions read as observed without being recorded (a read-only session)."""
    abandoned: frozenset[str] = frozenset()
    """Runs whose process is gone, read as failed without being marked (a read-only session)."""
    record: bool = True
    """Whether the states read are written back to the instance's store (not by ``status``)."""
    _freshness: tuple[int | None, Freshness] | None = field(default=None, init=False, repr=False)

    def detail(self, line: str) -> None:
        """A progress line shown with ``--verbose`` only (every wave of every partition)."""
        if self.verbose:
            self.log(line)

    def freshness(self) -> Freshness:
        """The states of the graph's partitions as the instance holds them now: the same object,
        with every state it has read, until anything new is recorded in the event log (a run, a
        failure, a config version: by this process or another), then the kept states brought up
        to date with what changed (:func:`~graphbase.freshness_store.kept_freshness`)."""
        mark = self.instance.event_log_storage.get_maximum_record_id()
        if self._freshness is None or self._freshness[0] != mark:
            self._freshness = (mark, kept_freshness(self.instance, self.defs.resolve_asset_graph(), pending=self.pending,
                                                    abandoned=self.abandoned, record=self.record))
        return self._freshness[1]

    def states(self, assets: Sequence[str], partition: str | None,
               freshness: Freshness | None = None) -> list[AssetState]:
        return (freshness or self.freshness()).states([(dg.AssetKey(asset), partition) for asset in assets])

    def jobs(self, dataset: str) -> DatasetJobs:
        """Retrieval datasets go through ``evaluate``; a task dataset through its family's jobs."""
        if dataset in self.config.task_datasets:
            family = self.config.task_dataset(dataset).task
            frozen, *assets = task_family_assets(family)
            return DatasetJobs(frozen, task_freeze_jobs[family].name, tuple(assets), task_evaluation_jobs[family].name)
        return self._retrieval_jobs

    @cached_property
    def _retrieval_jobs(self) -> DatasetJobs:
        """Every retrieval dataset's, read off the graph once per session."""
        return DatasetJobs("frozen_dataset", refresh_datasets_job.name, tuple(partition_assets(self.defs)),
                           evaluation_job.name, tuple(dataset_assets(self.defs)))

    def execute(self, job: str, assets: Sequence[str], partition: str | dg.MultiPartitionKey | None,
                tags: dict[str, str], label: str | None = None) -> dg.ExecuteInProcessResult:
        # Dagster's console logger prints every event and a traceback per failure: quiet unless
        # --verbose; every event stays in the instance (the UI) either way.
        level = "INFO" if self.verbose else "CRITICAL"
        job_def = self.defs.resolve_job_def(job)
        selection = {dg.AssetKey(asset) for asset in assets}
        # The asset checks of the selected assets, but not up_to_date: the CLI records that one
        # itself once the command is done.
        checks = {key for key in self.defs.resolve_asset_graph().asset_check_keys
                  if key.asset_key in selection and key.name != UP_TO_DATE}
        try:
            with progress.step(label or _label(partition)):
                result = job_def.get_subset(asset_selection=selection, asset_check_selection=checks).execute_in_process(
                    partition_key=partition, instance=self.instance, tags=tags, raise_on_error=False,
                    run_config={"loggers": {"console": {"config": {"log_level": level}}}},
                )
        finally:
            release_connections(self.instance)
        if _interrupted(result):
            # Dagster turns Ctrl-C inside a step into a failed run and returns; the command stops
            # here instead of going on to the next partition, and the run is recorded as canceled.
            run = self.instance.get_run_by_id(result.run_id)
            if run is not None:
                self.instance.report_run_canceled(run, message="interrupted (Ctrl-C)")
            raise KeyboardInterrupt
        return result


def _label(partition: str | dg.MultiPartitionKey | None) -> str:
    """How the live progress line names a run's partition: ``minilm-l6 × chatterbot-en``."""
    if partition is None:
        return "summary"
    if isinstance(partition, dg.MultiPartitionKey):
        return f"{partition.keys_by_dimension['model']} × {partition.keys_by_dimension['dataset']}"
    return str(partition)


def _interrupted(result: dg.ExecuteInProcessResult) -> bool:
    """Whether a step of the run was stopped by Ctrl-C (SIGINT)."""
    return any(event.is_step_failure and event.step_failure_data is not None
               and event.step_failure_data.error is not None
               and event.step_failure_data.error.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt")
               for event in result.all_events)


def partition_assets(defs: dg.Definitions) -> list[str]:
    """The per-(card, dataset) assets, upstream first."""
    graph = defs.resolve_asset_graph()
    return [key.to_user_string() for key in graph.toposorted_asset_keys
            if graph.get(key).is_materializable and graph.get(key).partitions_def == model_dataset_partitions]


def dataset_assets(defs: dg.Definitions) -> list[str]:
    """The per-dataset assets that evaluate a frozen dataset for no model (L5's BM25), upstream first."""
    graph, summaries = defs.resolve_asset_graph(), summary_assets(defs)
    return [name for key in graph.toposorted_asset_keys
            if graph.get(key).is_materializable and graph.get(key).partitions_def == dataset_partitions
            and (name := key.to_user_string()) != "frozen_dataset" and name not in summaries]


def open_session(
    config: ProjectConfig | str | Path, data_dir: str | StorePath, instance: dg.DagsterInstance | None,
    log: Callable[[str], None], verbose: bool,
) -> Session:
    """Build the graph of a config (or a config folder), open the instance, bind it to the config
    and register its cards and datasets as partitions: the bookkeeping every command that runs
    the graph shares."""
    config = config if isinstance(config, ProjectConfig) else load_config(config)
    store = ArtifactStore.at(data_dir)
    defs = build_definitions(config.directory, store.root)
    instance = instance or open_instance(store.root)
    bind(instance, config.directory, store.root)
    ensure_pools(instance, config)
    deleted = apply_partition_sync(instance, config, delete=True)
    if deleted:
        log(f"partitions deleted, no longer in {config.directory} (their history stays): {', '.join(deleted)}")
    return Session(config, store, defs, instance, log, verbose)


def selection_targets(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[tuple[str, str | None]]:
    """Every (asset, partition) a run over this selection brings up to date, the summaries last."""
    asked: list[tuple[str, str | None]] = []
    for dataset in datasets:
        jobs = session.jobs(dataset)
        asked += [(asset, dataset) for asset in (jobs.frozen_asset, *jobs.dataset_assets)]
        asked += [(asset, str(model_dataset_key(model.name, dataset))) for model in models for asset in jobs.assets]
    return asked + summary_targets(session)


def summary_targets(session: Session) -> list[tuple[str, str | None]]:
    """Every (summary asset, partition), upstream first: one per dataset with data of a summary
    partitioned by dataset (``comparisons``), else the asset itself."""
    graph = session.defs.resolve_asset_graph()
    return [(asset, partition) for asset in summary_assets(session.defs)
            for partition in (session.config.datasets_with_data()
                              if graph.get(dg.AssetKey(asset)).partitions_def is not None else [None])]


def pending_states(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[AssetState]:
    """Every (asset, partition) of the selection that needs work now: what ``run`` materializes
    first, and what the automation requests on its next tick."""
    return [state for state in selection_states(session, models, datasets) if state.needs_work_now]


def selection_states(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[AssetState]:
    """The state of every (asset, partition) of the selection and of the summaries, followed upstream."""
    freshness = session.freshness()
    states = []
    for dataset in datasets:
        jobs = session.jobs(dataset)
        states += session.states([jobs.frozen_asset, *jobs.dataset_assets], dataset, freshness)
        for model in models:
            states += session.states(list(jobs.assets), str(model_dataset_key(model.name, dataset)), freshness)
    return states + freshness.states([(dg.AssetKey(asset), partition) for asset, partition in summary_targets(session)])


def read_only_session(config: ProjectConfig, data_dir: str | StorePath, instance: dg.DagsterInstance | None) -> Session:
    """A session that records nothing: the instance is neither bound to the config nor given its
    partitions, pools, config versions or failed runs. What those would change is read instead:
    the config's facet versions Dagster does not hold yet, as if observed; runs whose process is
    gone, as failed; cards and datasets that are not partitions yet, as never materialized."""
    store = ArtifactStore.at(data_dir)
    defs = build_definitions(config.directory, store.root)
    instance = instance or open_instance(store.root)
    return Session(config, store, defs, instance, print, False, pending=pending_facet_versions(instance, config),
                   abandoned=frozenset(run.run_id for run in abandoned_runs(instance)), record=False)
