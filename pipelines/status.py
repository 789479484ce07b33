"""``embedpyramid status``: Dagster's state of every level of a selection, as the UI shows it,
without materializing anything."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import dagster as dg

from embedpyramid.config import ResolvedModel, load_config
from embedpyramid.config.selection import select_datasets, select_models
from embedpyramid.store import StorePath, store_path
from graphbase.dagster_internals import release_connections
from graphbase.freshness import AssetState
from graphbase.freshness_store import every_fresh, kept_freshness
from graphbase.instance import run_history_errors
from graphbase.partitions import model_dataset_key
from graphbase.warm import LevelStatus, remember_warm
from pipelines.session import Session, read_only_session, selection_targets, summary_targets

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


def project_status(
    configs_dir: str | Path,
    data_dir: str | StorePath,
    *,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> list[LevelStatus]:
    """Dagster's state of every level of every selected dataset × card, and of the summary, for the
    config as it is now, recording nothing (:func:`~pipelines.session.read_only_session`): the
    config's new versions are read as if observed, so what this prints is what ``run`` would do
    and what the UI shows once it has, and the instance stays as it was for everyone else. When
    the config holds no new version, no run was abandoned and Dagster last found the whole
    selection fresh in the states the instance keeps (:mod:`graphbase.freshness_store`), the warm
    start's file beside the run history (:mod:`graphbase.warm`, no part of the instance's
    records) keeps that answer for the next command.
    """
    with run_history_errors(store_path(data_dir)):
        config = load_config(configs_dir)
        selected_models, selected_datasets = select_models(config, models), select_datasets(config, datasets)
        session = read_only_session(config, data_dir, instance)
        asked = selection_targets(session, selected_models, selected_datasets)
        if not session.pending and not session.abandoned and every_fresh(session.freshness(), asked):
            rows = _fresh_rows(session, selected_models, selected_datasets)
            remember_warm_selection(session, selected_models, selected_datasets, asked, rows)
            return rows
        return _level_rows(session, selected_models, selected_datasets, session.states)


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


def remember_warm_selection(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str],
                            asked: Sequence[tuple[str, str | None]], rows: Sequence[LevelStatus] | None = None) -> None:
    """Keep Dagster's "all fresh" of this selection (``asked``: its (asset, partition) pairs) for
    the warm start (:mod:`graphbase.warm`), confirmed by the instance's states once the run
    history's files are read. The event log's connections are closed before those files are
    read and after Dagster is asked, so that they are read as the next command finds them; the
    confirmation writes nothing (kept states written then would change the files just read)."""
    def still_fresh() -> bool:
        try:
            return every_fresh(kept_freshness(session.instance, session.defs.resolve_asset_graph(),
                                              record=False), asked)
        finally:
            release_connections(session.instance)

    rows = _fresh_rows(session, models, datasets) if rows is None else rows
    release_connections(session.instance)
    remember_warm(session.config, session.store.root, models, datasets, rows, still_fresh)


def _fresh_rows(session: Session, models: Sequence[ResolvedModel], datasets: Sequence[str]) -> list[LevelStatus]:
    """The status rows of a selection Dagster found all fresh."""
    return _level_rows(session, models, datasets,
                       lambda assets, partition: [AssetState(asset, partition, "fresh") for asset in assets])
