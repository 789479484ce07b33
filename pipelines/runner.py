"""Materialize the evaluation graph in-process: the same assets, jobs and stale status the
Dagster UI shows.

Like the UI's "materialize stale and missing", asked of Dagster itself: the config facets are
reported (:func:`graphbase.freshness.observe_config`), then every selected partition whose
Dagster state is missing, stale or failed is materialized, in waves — a wave materializes what
needs work now, after which Dagster says what else turned stale because an upstream data
version really changed (exactly what the automation requests tick by tick). Identical data
re-frozen, or an embedding that came out the same, stops the wave there.

Order: each selected dataset is frozen (``refresh_datasets`` job; a task dataset of family F by
``freeze_F``) and its model-independent assets (L5's BM25) go through the ``evaluate_dataset``
job; what the selected partitions read in another card's partition (a bi-encoder rerank's ``by``
card's embeddings, by the graph's partition mappings) is materialized there next, even for a
card outside ``--models`` (then only that); each (card, dataset) partition goes through the
``evaluate`` job (``evaluate_F`` for a task dataset), then the ``summary`` job rebuilds the
comparisons of each dataset where something changed, the results database and the report. A failing partition is reported and does not
stop the others; a dataset that fails to freeze skips only its own partitions; what was already
written stays.
Every run carries the tags of :func:`graphbase.instance.run_tags`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import dagster as dg

from embedpyramid import progress
from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.config.selection import select_datasets, select_models
from embedpyramid.current_inputs import excluded_keys
from embedpyramid.rendering.tables import first_few
from embedpyramid.store import ArtifactStore, StorePath, store_path
from graphbase.dagster_internals import release_connections
from graphbase.freshness import (
    UP_TO_DATE,
    AssetState,
    Freshness,
    graph_signature,
    known_fresh,
    observe_config,
    remember_fresh,
    report_up_to_date,
    summary_inputs,
)
from graphbase.home import DataFolderLock
from graphbase.instance import (
    bind,
    fail_abandoned_runs,
    open_instance,
    run_history_errors,
    run_tags,
)
from graphbase.partitions import (
    apply_partition_sync,
    dataset_partitions,
    model_dataset_key,
    model_dataset_partitions,
    task_family_assets,
)
from graphbase.pools import ensure_pools
from graphbase.warm import UP_TO_DATE_LINE, LevelStatus, remember_warm
from pipelines.automation import (
    dataset_evaluation_job,
    evaluation_job,
    refresh_datasets_job,
    summary_assets,
    summary_job,
    summary_runs,
    task_evaluation_jobs,
    task_freeze_jobs,
)
from pipelines.graph import build_definitions


@dataclass
class RunReport:
    """What one invocation did: datasets frozen, partitions materialized (card key, dataset) or
    up to date, the assets materialized, the embedding tables encoded (``query``, ``document``,
    ``raw_query``, ``raw_document``) and those derived without encoding from another card's
    forward pass (``derived``), config facets that changed, abandoned runs marked failed,
    failures, the partitions (card key, dataset) where what other cards' partitions read was
    materialized first (``read_across``), whether (or why not) the summary was built, and the
    input partitions the summaries left out because they are not current (the summaries'
    remaining causes)."""

    frozen: list[str] = field(default_factory=list)
    materialized: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    assets: list[tuple[str, str, str]] = field(default_factory=list)
    encoded: list[tuple[str, str, str]] = field(default_factory=list)
    derived: list[tuple[str, str, str]] = field(default_factory=list)
    config_changes: list[str] = field(default_factory=list)
    abandoned_runs: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    read_across: list[tuple[str, str]] = field(default_factory=list)
    summary_built: bool = False
    summary_skipped: str | None = None
    summary_excludes: list[str] = field(default_factory=list)


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
    _freshness: tuple[int | None, Freshness] | None = field(default=None, init=False, repr=False)

    def freshness(self) -> Freshness:
        """The states of the graph's partitions as the instance holds them now: the same object,
        with every state it has read, until anything new is recorded in the event log (a run, a
        failure, a config version: by this process or another), then a new one. Dagster's stale
        answer for a partition costs a dozen event-log queries; the waves of a run ask it again
        for the same partitions between two runs."""
        mark = self.instance.event_log_storage.get_maximum_record_id()
        if self._freshness is None or self._freshness[0] != mark:
            self._freshness = (mark, Freshness(self.instance, self.defs.resolve_asset_graph()))
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
    and register its cards and datasets as partitions: the bookkeeping every command shares."""
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


SHOWN = 3
"""Names a progress or status line shows before "+N more" (all of them with ``--verbose``)."""


def run_pipeline(
    configs_dir: str | Path,
    data_dir: str | StorePath,
    *,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    instance: dg.DagsterInstance | None = None,
    log: Callable[[str], None] = print,
    wait: bool = True,
    verbose: bool = False,
    command: Sequence[str] = ("run",),
) -> RunReport:
    """Bring the selected partitions up to date, then the summary; see the module docstring.

    ``models`` are card names or keys. ``wait=False`` refuses to queue behind another process
    that holds the data folder (:class:`graphbase.instance.DataFolderBusy`), at once: the lock
    is taken before the config is read. ``command`` (the CLI's arguments) is recorded in every
    run's tags; ``verbose`` also lists every name in the progress lines.
    """
    store = ArtifactStore.at(data_dir)
    report = RunReport()
    # The lock before anything slow: a busy folder is answered (wait=False) or waited for
    # before the config loads and the instance opens.
    with run_history_errors(store.root), DataFolderLock(store.root, instance, wait=wait, notify=log).held():
        config = load_config(configs_dir)
        selected_models, selected_datasets = select_models(config, models), select_datasets(config, datasets)
        instance = instance or open_instance(store.root)
        session = open_session(config, store.root, instance, log, verbose)
        report.abandoned_runs = fail_abandoned_runs(session.instance)
        for run_id in report.abandoned_runs:
            log(f"run {run_id}: its process is gone; marked failed")
        report.config_changes = observe_config(session.instance, session.config)
        if report.config_changes:
            shown = len(report.config_changes) if verbose else SHOWN
            log(f"config changed: {first_few(report.config_changes, 'settings', shown=shown)}")
        asked = _asked(session, selected_models, selected_datasets)
        signature = graph_signature(session.defs.resolve_asset_graph(), asked)
        if known_fresh(session.instance, signature):
            log(UP_TO_DATE_LINE)
            report.skipped = [(model.key, dataset) for dataset in selected_datasets for model in selected_models]
            _remember_warm(session, selected_models, selected_datasets, signature)
            return report
        tags = run_tags(session.config.directory, command)
        healthy = [dataset for dataset in selected_datasets
                   if _freeze(session, dataset, tags, report) and _evaluate_dataset(session, dataset, tags, report)]
        for dataset in healthy:
            _materialize_read_across(session, selected_models, dataset, tags, report)
            for model in selected_models:
                _evaluate(session, model, dataset, tags, report)
        settled = _summarize(session, tags, report)
        report_up_to_date(session.instance, session.defs.resolve_asset_graph(), settled)
        if (not report.failures and healthy == selected_datasets and report.summary_skipped is None
                and not report.summary_excludes):
            remember_fresh(session.instance, signature)
            _remember_warm(session, selected_models, selected_datasets, signature)
    return report


def _asked(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[tuple[str, str | None]]:
    """Every (asset, partition) a run over this selection brings up to date."""
    asked: list[tuple[str, str | None]] = []
    for dataset in datasets:
        jobs = session.jobs(dataset)
        asked += [(asset, dataset) for asset in (jobs.frozen_asset, *jobs.dataset_assets)]
        asked += [(asset, str(model_dataset_key(model.name, dataset))) for model in models for asset in jobs.assets]
    return asked + summary_targets(session)


def _freeze(session: Session, dataset: str, tags: dict[str, str], report: RunReport) -> bool:
    jobs = session.jobs(dataset)
    (state,) = session.states([jobs.frozen_asset], dataset)
    if not state.needs_work:
        session.log(f"dataset {dataset}: up to date")
        return True
    session.log(f"dataset {dataset}: freezing, {_why(state, session.verbose)}")
    result = session.execute(jobs.freeze_job, [jobs.frozen_asset], dataset, tags)
    if not result.success:
        report.failures.append(f"{jobs.frozen_asset}[{dataset}]: {_failure(result, session.verbose)}")
        session.log(f"dataset {dataset}: failed to freeze; its partitions are skipped this run")
        return False
    report.frozen.append(dataset)
    return True


def _evaluate_dataset(session: Session, dataset: str, tags: dict[str, str], report: RunReport) -> bool:
    """Bring the dataset's model-independent assets up to date; False (and a failure reported)
    when one fails: the dataset's partitions are then skipped, as after a failed freeze."""
    assets = list(session.jobs(dataset).dataset_assets)
    for _wave in range(len(assets) + 1):
        todo = [state for state in session.states(assets, dataset) if state.needs_work_now]
        if not todo:
            return True
        session.log(f"dataset {dataset}: {_describe(todo, session.verbose)}")
        result = session.execute(dataset_evaluation_job.name, [state.asset for state in todo], dataset, tags)
        if not result.success:
            report.failures.append(f"{dataset}: {_failure(result, session.verbose)}")
            session.log(f"dataset {dataset}: its model-independent assets failed; its partitions are skipped this run")
            return False
    return True


def _evaluate(session: Session, model: ResolvedModel, dataset: str, tags: dict[str, str], report: RunReport) -> None:
    materialized = _bring_up_to_date(session, model, dataset, list(session.jobs(dataset).assets), tags, report)
    if materialized is None:
        return
    if materialized or (model.key, dataset) in report.read_across:
        report.materialized.append((model.key, dataset))
    else:
        session.log(f"{model.key} × {dataset}: up to date")
        report.skipped.append((model.key, dataset))


def _bring_up_to_date(session: Session, model: ResolvedModel, dataset: str, assets: Sequence[str],
                      tags: dict[str, str], report: RunReport) -> bool | None:
    """Materialize, in waves, what needs work among ``assets`` of the (card, dataset) partition:
    True when something was materialized, False when all was up to date, None on a failure
    (reported)."""
    partition = model_dataset_key(model.name, dataset)
    label = f"{model.key} × {dataset}"
    job = session.jobs(dataset).evaluate_job
    materialized = False
    for _wave in range(len(assets) + 1):  # a chain of n assets settles in n waves; one more to see it
        states = session.states(assets, str(partition))
        todo = [state for state in states if state.needs_work_now]
        if not todo:
            return materialized
        session.log(f"{label}: {_describe(todo, session.verbose)}")
        result = session.execute(job, [state.asset for state in todo], partition, tags)
        done = set()
        for materialization in _materializations(result):
            name = materialization.asset_key.to_user_string()
            done.add(name)
            report.assets.append((model.key, dataset, name))
            cache_hit = materialization.metadata.get("cache_hit")
            if cache_hit is not None and not cache_hit.value:
                table = (model.key, dataset, name.removesuffix("_embeddings"))
                (report.derived if "derived_from" in materialization.metadata else report.encoded).append(table)
        if not result.success:
            report.failures.append(f"{label}: {_failure(result, session.verbose)}")
            return None
        materialized = True
        if len(todo) == sum(state.needs_work for state in states) and done >= {state.asset for state in todo}:
            return True  # the run materialized everything that needed work: no wave is left
    report.failures.append(f"{label}: not up to date after {len(assets) + 1} runs: "
                           + ", ".join(state.asset for state in session.states(assets, str(partition))
                                       if state.needs_work))
    return None


def _materialize_read_across(session: Session, models: Sequence[ResolvedModel], dataset: str,
                             tags: dict[str, str], report: RunReport) -> None:
    """Before the dataset's partitions, materialize what they read in another card's partition (a
    bi-encoder rerank reads its ``by`` card's embeddings), there: only those assets and what they
    need in that partition, so a card left out of ``--models`` is encoded, not evaluated."""
    for card, assets in _read_across(session, models, dataset):
        model = session.config.models[card]
        if _bring_up_to_date(session, model, dataset, assets, tags, report):
            report.read_across.append((model.key, dataset))


def _read_across(session: Session, models: Sequence[ResolvedModel], dataset: str) -> list[tuple[str, list[str]]]:
    """(card name, its assets, upstream first) that the selected (card, dataset) partitions read
    across partitions, followed through what those assets read in turn; a card read by another
    card that is read comes first."""
    freshness = session.freshness()
    graph = session.defs.resolve_asset_graph()
    evaluated = list(session.jobs(dataset).assets)
    scan = [(dg.AssetKey(asset), str(model_dataset_key(model.name, dataset))) for model in models for asset in evaluated]
    needed: dict[str, set[str]] = {}
    while scan:
        asset, partition = scan.pop()
        for parent, parent_partition in freshness.other_partition_parents(asset, partition):
            upstream = {key.to_user_string() for key in graph.get_ancestor_asset_keys(parent)}
            wanted = {name for name in evaluated if name in upstream or name == parent.to_user_string()}
            new = wanted - needed.setdefault(parent_partition, set())
            needed[parent_partition] |= new
            scan += [(dg.AssetKey(name), parent_partition) for name in new]
    return [(model_dataset_partitions.get_partition_key_from_str(partition).keys_by_dimension["model"],
             [name for name in evaluated if name in assets]) for partition, assets in reversed(needed.items())]


def summary_targets(session: Session) -> list[tuple[str, str | None]]:
    """Every (summary asset, partition), upstream first: one per dataset with data of a summary
    partitioned by dataset (``comparisons``), else the asset itself."""
    graph = session.defs.resolve_asset_graph()
    return [(asset, partition) for asset in summary_assets(session.defs)
            for partition in (session.config.datasets_with_data()
                              if graph.get(dg.AssetKey(asset)).partitions_def is not None else [None])]


def _summarize(session: Session, tags: dict[str, str], report: RunReport) -> Freshness | None:
    """Rebuild the summaries that need it: in the first wave also those that only exclude an
    input partition that is not current (so they say so), then until nothing changes. A
    dataset's comparisons are rebuilt only once something is evaluated on it. One run per
    dataset whose comparisons need work; the summaries over every dataset ride in the last of
    these runs (a run materializes one partition, and the assets with none), with those that
    read the comparisons rebuilt in it. Returns the states it settled on (nothing is recorded
    after them) when none is left to rebuild, else None."""
    targets = summary_targets(session)
    graph = session.defs.resolve_asset_graph()
    for wave in range(len(targets) + 1):
        freshness = session.freshness()
        states = freshness.states([(dg.AssetKey(asset), partition) for asset, partition in targets])
        todo = [state for state in states if (state.needs_work_now
                or (wave == 0 and state.needs_work and _exclusions_changed(session, freshness, state)))
                and (state.partition is None or freshness.summarizes_something(dg.AssetKey(state.asset), state.partition))]
        if not todo:
            report.summary_excludes = sorted({cause for state in states if state.needs_work for cause in state.causes})
            return freshness
        if not _any_evaluated(session):
            report.summary_skipped = "no (model, dataset) partition of the current cards is evaluated yet"
            session.log(f"summary skipped: {report.summary_skipped}")
            return None
        session.log(f"summary: {_describe(todo, session.verbose)}")
        # What reads a dataset's comparisons is rebuilt after them, in the same run.
        rebuilt = {dg.AssetKey(state.asset) for state in todo if state.partition is not None}
        todo_whole = {state.asset for state in todo if state.partition is None}
        whole = [(state.asset, None) for state in states if state.partition is None and (
            state.asset in todo_whole or rebuilt and state.needs_work
            and graph.get_ancestor_asset_keys(dg.AssetKey(state.asset)) & rebuilt)]
        partitioned = [(state.asset, state.partition) for state in todo if state.partition is not None]
        for assets, partition in summary_runs(partitioned + whole, whole_after_several=True):
            result = session.execute(summary_job.name, assets, partition, tags,
                                     label="summary" + (f" · {partition}" if partition else ""))
            if not result.success:
                report.failures.append(f"summary: {_failure(result, session.verbose)}")
                return None
        report.summary_built = True
    return None


def _exclusions_changed(session: Session, freshness: Freshness, state: AssetState) -> bool:
    """Whether the input partitions a summary must leave out are others than those it left out
    when it was last built (it is rebuilt to say so; the same partitions left out again, even
    for another reason, change none of its numbers)."""
    key = dg.AssetKey(state.asset)
    latest = session.instance.fetch_materializations(
        dg.AssetRecordsFilter(key, asset_partitions=[state.partition] if state.partition else None), limit=1).records
    recorded = latest[0].asset_materialization.metadata.get("excluded_inputs") if latest else None
    current = excluded_keys(summary_inputs(freshness, key, session.config, state.partition))
    return recorded is None or sorted(recorded.value) != current


def _any_evaluated(session: Session) -> bool:
    return any(
        session.instance.fetch_materializations(dg.AssetRecordsFilter(
            dg.AssetKey("retrieval_metrics"), asset_partitions=[str(model_dataset_key(name, dataset))]), limit=1).records
        for name in session.config.models for dataset in session.config.datasets
    )


def _describe(states: Sequence[AssetState], verbose: bool = False) -> str:
    """What a wave materializes and why, grouped by reason, upstream first: "never materialized:
    28 assets: a, b, c +25 more; stale (config/measures has a new data version): d" (every name
    when ``verbose``)."""
    by_reason: dict[str, list[str]] = {}
    for state in states:
        by_reason.setdefault(_why(state, verbose), []).append(state.asset)
    return "; ".join(f"{reason}: {first_few(assets, 'assets', shown=len(assets) if verbose else SHOWN)}"
                     for reason, assets in by_reason.items())


def _why(state: AssetState, verbose: bool = False) -> str:
    if state.state == "stale":
        return f"stale ({first_few(state.causes, 'causes', shown=len(state.causes) if verbose else SHOWN)})"
    return {"missing": "never materialized", "failed": "its last run failed", "fresh": "fresh"}[state.state]


def _materializations(result: dg.ExecuteInProcessResult) -> list[Any]:
    return [event.event_specific_data.materialization  # type: ignore[union-attr]
            for event in result.get_asset_materialization_events()]


def _failure(result: dg.ExecuteInProcessResult, verbose: bool = False) -> str:
    """Why a run failed: its failed blocking checks with their findings, else the error raised
    in the asset (the user-code exception, not Dagster's wrapper; with its traceback if verbose)."""
    checks = []
    for event in result.all_events:
        evaluation = getattr(event.event_specific_data, "asset_check_evaluation", None) or event.event_specific_data
        if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            checks.append(f"blocking check {evaluation.check_name} on {evaluation.asset_key.to_user_string()} failed: "
                          + "; ".join(problems.value if problems else []))
    if checks:
        return " | ".join(checks)
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            error = error.cause if error is not None and error.cause is not None else error
            if error is None:
                return "step failed"
            return error.to_string().strip() if verbose else error.message.strip()
    return "run failed"


_SEVERITY = ("failed", "stale", "missing", "fresh")


def level_status(dataset: str | None, model: str | None, level: str, states: Sequence[AssetState]) -> LevelStatus:
    """The worst state of a level's assets (failed, stale, missing, fresh) and the reasons, each
    root cause once with the assets it reaches: "config/model_card [m] has a new data version
    (document_embeddings, query_embeddings)"."""
    worst = min((state.state for state in states), key=_SEVERITY.index)
    by_reason: dict[str, list[str]] = {}
    for state in states:
        reasons = {"stale": list(state.causes), "failed": ["last run failed"], "missing": ["never materialized"],
                   "fresh": []}[state.state]
        for reason in reasons:
            by_reason.setdefault(reason, []).append(state.asset)
    reasons = {reason: sorted(assets) for reason, assets in sorted(by_reason.items())}
    return LevelStatus(dataset, model, level, worst,
                       "; ".join(f"{reason} ({', '.join(assets)})" for reason, assets in reasons.items()), reasons)


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


def project_status(
    configs_dir: str | Path,
    data_dir: str | StorePath,
    *,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> list[LevelStatus]:
    """Dagster's state of every level of every selected dataset × card, and of the summary.

    Nothing is materialized; the config's current versions are reported (as ``run`` does), so
    what this prints is what the UI shows and what ``run`` would do. When Dagster last found the
    whole selection fresh and nothing was recorded since (:func:`~graphbase.freshness.known_fresh`,
    the memo a ``run`` or ``status`` leaves), every level is fresh without asking again.
    """
    with run_history_errors(store_path(data_dir)):
        config = load_config(configs_dir)
        selected_models, selected_datasets = select_models(config, models), select_datasets(config, datasets)
        session = open_session(config, data_dir, instance, print, False)
        fail_abandoned_runs(session.instance)
        observe_config(session.instance, session.config)
        graph = session.defs.resolve_asset_graph()
        signature = graph_signature(graph, _asked(session, selected_models, selected_datasets))
        if known_fresh(session.instance, signature):  # nothing recorded since the up_to_date checks were reported
            rows = _fresh_rows(session, selected_models, selected_datasets)
            _remember_warm(session, selected_models, selected_datasets, signature, rows)
            return rows
        freshness = session.freshness()
        recorded_before = session.instance.event_log_storage.get_maximum_record_id()
        rows = _level_rows(session, selected_models, selected_datasets,
                           lambda assets, partition: session.states(assets, partition, freshness))
        recorded = report_up_to_date(session.instance, graph, freshness)
        # All fresh, and nothing recorded while reading (status holds no lock): the next command asks nothing.
        if (not recorded and all(row.state == "fresh" for row in rows)
                and session.instance.event_log_storage.get_maximum_record_id() == recorded_before):
            remember_fresh(session.instance, signature)
            _remember_warm(session, selected_models, selected_datasets, signature, rows)
        return rows


def _level_rows(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str],
                states: Callable[[list[str], str | None], list[AssetState]]) -> list[LevelStatus]:
    """The status rows of a selection: per dataset its data level (and its L5 systems), per card
    and dataset each level (asset group), then the summary, from ``states(assets, partition)``."""
    graph = session.defs.resolve_asset_graph()
    rows = []
    for dataset in datasets:
        jobs = session.jobs(dataset)
        levels: dict[str, list[str]] = {}
        for asset in jobs.assets:
            levels.setdefault(graph.get(dg.AssetKey(asset)).group_name, []).append(asset)
        rows.append(level_status(dataset, None, "data", states([jobs.frozen_asset], dataset)))
        if jobs.dataset_assets:
            rows.append(level_status(dataset, None, "l5_systems", states(list(jobs.dataset_assets), dataset)))
        for model in models:
            partition = str(model_dataset_key(model.name, dataset))
            rows += [level_status(dataset, model.key, level, states(assets, partition))
                     for level, assets in levels.items()]
    summaries: dict[str | None, list[str]] = {}
    for asset, partition in summary_targets(session):
        summaries.setdefault(partition, []).append(asset)
    rows.append(level_status(None, None, "summary", [state for partition, assets in summaries.items()
                                                     for state in states(assets, partition)]))
    return rows


def _remember_warm(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str], signature: str,
                   rows: Sequence[LevelStatus] | None = None) -> None:
    """Keep Dagster's "all fresh" of this selection for the warm start (:mod:`graphbase.warm`),
    confirmed by Dagster's own memo once the run history's files are read. The event log's
    connections are closed before those files are read and after Dagster is asked, so that they
    are read as the next command finds them."""
    def still_fresh() -> bool:
        try:
            return known_fresh(session.instance, signature)
        finally:
            release_connections(session.instance)

    rows = _fresh_rows(session, models, datasets) if rows is None else rows
    release_connections(session.instance)
    remember_warm(session.config, session.store.root, models, datasets, rows, still_fresh)


def _fresh_rows(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[LevelStatus]:
    """The status rows of a selection Dagster found all fresh."""
    return _level_rows(session, models, datasets,
                       lambda assets, partition: [AssetState(asset, partition, "fresh") for asset in assets])
