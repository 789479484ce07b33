"""Materialize the evaluation graph in-process: the same assets, jobs and stale status the
Dagster UI shows.

Like the UI's "materialize stale and missing", asked of Dagster itself: the config facets are
reported (:func:`graphbase.config_observation.observe_config`), then every selected partition whose
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
from pathlib import Path
from typing import Any

import dagster as dg

from embedpyramid.config import ResolvedModel, load_config
from embedpyramid.config.selection import select_datasets, select_models
from embedpyramid.current_inputs import excluded_keys, task_asset_name
from embedpyramid.rendering.tables import first_few
from embedpyramid.store import ArtifactStore, StorePath
from graphbase.config_observation import observe_config
from graphbase.freshness import AssetState, Freshness, summary_inputs
from graphbase.freshness_store import every_fresh
from graphbase.home import DataFolderLock
from graphbase.instance import fail_abandoned_runs, open_instance, run_history_errors, run_tags
from graphbase.partitions import model_dataset_key, model_dataset_partitions
from graphbase.up_to_date import report_up_to_date
from graphbase.warm import UP_TO_DATE_LINE
from pipelines.automation import dataset_evaluation_job, summary_job, summary_runs
from pipelines.session import Session, open_session, selection_targets, summary_targets
from pipelines.status import remember_warm_selection


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
        asked = selection_targets(session, selected_models, selected_datasets)
        if every_fresh(session.freshness(), asked):
            log(UP_TO_DATE_LINE)
            report.skipped = [(model.key, dataset) for dataset in selected_datasets for model in selected_models]
            remember_warm_selection(session, selected_models, selected_datasets, asked)
            return report
        tags = run_tags(session.config.directory, command)
        _announce_freezing(session, selected_datasets)
        healthy = [dataset for dataset in selected_datasets
                   if _freeze(session, dataset, tags, report) and _evaluate_dataset(session, dataset, tags, report)]
        for dataset in healthy:
            _materialize_read_across(session, selected_models, dataset, tags, report)
            _announce_partitions(session, selected_models, dataset)
            for model in selected_models:
                _evaluate(session, model, dataset, tags, report)
        settled = _summarize(session, tags, report)
        report_up_to_date(session.instance, session.defs.resolve_asset_graph(), settled)
        if (not report.failures and healthy == selected_datasets and report.summary_skipped is None
                and not report.summary_excludes):
            remember_warm_selection(session, selected_models, selected_datasets, asked)
    return report


def _announce_freezing(session: Session, datasets: Sequence[str]) -> None:
    """One line for the datasets to freeze, grouped by why (each dataset's own line with --verbose)."""
    if session.verbose:
        return
    states = [state for dataset in datasets for state in session.states([session.jobs(dataset).frozen_asset], dataset)
              if state.needs_work]
    if states:
        by_kind: dict[str, list[str]] = {}
        for state in states:
            by_kind.setdefault(_KINDS[state.state], []).append(str(state.partition))
        session.log("freezing " + "; ".join(f"{first_few(names, 'datasets')} ({kind})" for kind, names in by_kind.items()))


def _announce_partitions(session: Session, models: Sequence[ResolvedModel], dataset: str) -> None:
    """One line for what the dataset's (card, dataset) partitions need, the cards grouped by it
    (each partition's waves with --verbose)."""
    if session.verbose:
        return
    assets = list(session.jobs(dataset).assets)
    by_work: dict[str, list[str]] = {}
    for model in models:
        todo = [state for state in session.states(assets, str(model_dataset_key(model.name, dataset)))
                if state.needs_work_now]
        if todo:
            by_work.setdefault(_brief(todo), []).append(model.key)
    if by_work:
        session.log(f"{dataset}: " + "; ".join(
            f"{len(cards)} card{'s' if len(cards) > 1 else ''} ({first_few(cards)}) — {work}"
            for work, cards in by_work.items()))


def _freeze(session: Session, dataset: str, tags: dict[str, str], report: RunReport) -> bool:
    jobs = session.jobs(dataset)
    (state,) = session.states([jobs.frozen_asset], dataset)
    if not state.needs_work:
        session.detail(f"dataset {dataset}: up to date")
        return True
    session.detail(f"dataset {dataset}: freezing, {_why(state, session.verbose)}")
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
        session.detail(f"dataset {dataset}: {_describe(todo, session.verbose)}")
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
        session.detail(f"{model.key} × {dataset}: up to date")
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
        session.detail(f"{label}: {_describe(todo, session.verbose)}")
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
        evaluated = _evaluated_inputs(session)
        if not any(evaluated.values()):
            report.summary_skipped = ("nothing is evaluated yet for the current cards: "
                                      + first_few([f"{asset} on {dataset}" for asset, dataset in evaluated],
                                                  "dataset results", separator="; ")
                                      + " — none materialized (see the failures above, or run without --datasets)")
            session.log(f"summary skipped: {report.summary_skipped}")
            return None
        session.log(f"summary: {_describe(todo, verbose=True) if session.verbose else _brief(todo)}")
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


def _evaluated_inputs(session: Session) -> dict[tuple[str, str], bool]:
    """Per (the asset a summary reads, dataset): whether any current card has it materialized —
    ``retrieval_metrics`` of a retrieval dataset, ``task_<family>`` of a task dataset."""
    config = session.config
    wanted = [("retrieval_metrics", dataset) for dataset in config.datasets_with_data()]
    wanted += [(task_asset_name(spec.task), dataset) for dataset, spec in config.task_datasets.items()]
    return {(asset, dataset): any(session.instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey(asset), asset_partitions=[str(model_dataset_key(name, dataset))]), limit=1).records
        for name in config.models) for asset, dataset in wanted}


def _describe(states: Sequence[AssetState], verbose: bool = False) -> str:
    """What a wave materializes and why, grouped by reason, upstream first: "never materialized:
    28 assets: a, b, c +25 more; stale (config/measures has a new data version): d" (every name
    when ``verbose``)."""
    by_reason: dict[str, list[str]] = {}
    for state in states:
        by_reason.setdefault(_why(state, verbose), []).append(state.asset)
    return "; ".join(f"{reason}: {first_few(assets, 'assets', shown=len(assets) if verbose else SHOWN)}"
                     for reason, assets in by_reason.items())


_KINDS = {"missing": "never materialized", "stale": "stale", "failed": "its last run failed", "fresh": "fresh"}


def _brief(states: Sequence[AssetState]) -> str:
    """What a wave materializes, grouped by the kind of reason alone: "never materialized: 28
    assets: a, b, c +25 more; stale: d" (the causes are in ``status`` and with --verbose)."""
    by_kind: dict[str, list[str]] = {}
    for state in states:
        by_kind.setdefault(_KINDS[state.state], []).append(state.asset)
    return "; ".join(f"{kind}: {first_few(assets, 'assets')}" for kind, assets in by_kind.items())


def _why(state: AssetState, verbose: bool = False) -> str:
    if state.state == "stale":
        return f"stale ({first_few(state.causes, 'causes', shown=len(state.causes) if verbose else SHOWN)})"
    return _KINDS[state.state]


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


