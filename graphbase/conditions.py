"""The automation conditions of the graph: request what is missing or stale, as ``embedpyramid run``
would, reading the same states (:mod:`graphbase.freshness`), with bounded retries after a failure,
summaries held while anything upstream is requested or running."""

from __future__ import annotations

from typing import Any

import dagster as dg

from graphbase.dagster_internals import (
    candidate_partitions,
    subset_of,
    unpartitioned,
)
from graphbase.freshness import Freshness
from graphbase.freshness_store import kept_freshness


class _FreshnessCondition(dg.AutomationCondition):
    """True for the candidate partitions :meth:`holds` for, read off the same :class:`Freshness`
    that ``embedpyramid run`` plans its waves with, so the automation and the CLI cannot disagree."""

    only_not_fresh = False
    """Whether :meth:`holds` is false for every fresh partition: then only the partitions the kept
    states leave possibly not fresh are asked about (a quiet tick visits no partition)."""

    @property
    def requires_cursor(self) -> bool:
        return False

    def holds(self, freshness: Freshness, key: dg.AssetKey, partition: str | None) -> bool:
        raise NotImplementedError

    def evaluate(self, context: Any) -> dg.AutomationResult:
        view = context.asset_graph_view
        freshness = _tick_freshness(view)
        within = (freshness.kept.possibly_not_fresh(context.key)
                  if self.only_not_fresh and freshness.kept is not None else None)
        true = [partition for partition in candidate_partitions(context, within)
                if self.holds(freshness, context.key, partition)]
        return dg.AutomationResult(context, true_subset=subset_of(view, context.key, true))


_TICK: list[tuple[Any, Freshness]] = []
"""The states of the tick being evaluated, with Dagster's view of that tick."""


def _tick_freshness(view: Any) -> Freshness:
    """One :class:`Freshness` per tick, shared by every condition of every asset: Dagster builds
    one asset graph view per tick, and every state read from it is of that moment; the states
    kept in the instance, brought up to date with what was recorded since the last tick
    (:func:`~graphbase.freshness_store.kept_freshness`: a quiet tick recomputes nothing)."""
    if not _TICK or _TICK[0][0] is not view:
        _TICK[:] = [(view, kept_freshness(view.instance, view.asset_graph))]
    return _TICK[0][1]


class StaleCondition(_FreshnessCondition):
    """True for the partitions that are stale *directly* (the UI's "Unsynced"): a config facet,
    an input's data version or the asset's code version changed since it was materialized; for a
    summary, also an input partition with a new data version since it was built. Partitions
    stale only because something upstream is not fresh wait for it (their upstream is requested
    first).
    """

    only_not_fresh = True

    @property
    def name(self) -> str:
        return "stale"

    @property
    def description(self) -> str:
        return "a config facet, an upstream data version or the code version changed since the last materialization"

    def holds(self, freshness: Freshness, key: dg.AssetKey, partition: str | None) -> bool:
        found = freshness.state(key, partition)
        return found.state == "stale" and found.direct


class WaitsForOtherPartition(_FreshnessCondition):
    """True for the partitions that read an asset partition of another partition (a bi-encoder
    rerank reads its ``by`` card's embeddings) which is not fresh: another run materializes it,
    so they wait for it, missing or stale, as ``embedpyramid run`` materializes it first."""

    @property
    def name(self) -> str:
        return "waits_for_other_partition"

    @property
    def description(self) -> str:
        return "an input in another partition (another card's embeddings) is missing, stale or failed"

    def holds(self, freshness: Freshness, key: dg.AssetKey, partition: str | None) -> bool:
        return partition is not None and freshness.waits_for_other_partition(key, partition)


AUTOMATION_RETRIES = 2
"""How many times the automation requests a partition again after its run failed (a step failed,
the run failed at dequeue or lost its worker) before it leaves it failed until an input changes."""


class FailedWithRetriesLeft(_FreshnessCondition):
    """True for the partitions whose latest run failed and which have failed at most
    :data:`AUTOMATION_RETRIES` times since they were last materialized: the automation requests
    them again, a bounded number of times (every attempt is a run in the instance, so the count
    survives a daemon restart)."""

    only_not_fresh = True

    @property
    def name(self) -> str:
        return "failed_with_retries_left"

    @property
    def description(self) -> str:
        return f"its last run failed and it has failed at most {AUTOMATION_RETRIES} times since it was materialized"

    def holds(self, freshness: Freshness, key: dg.AssetKey, partition: str | None) -> bool:
        return (freshness.direct_state(key, partition).state == "failed"
                and freshness.failed_attempts(key, partition, AUTOMATION_RETRIES) <= AUTOMATION_RETRIES)


class UpstreamBusy(dg.AutomationCondition):
    """True while any partitioned asset upstream of the target (at any depth) is requested on
    this tick, in any run, or is being materialized: the summaries wait until every partition
    they read has settled, as ``embedpyramid run`` builds them after the partitions (the
    summaries among themselves run together)."""

    @property
    def name(self) -> str:
        return "upstream_busy"

    @property
    def description(self) -> str:
        return "an upstream partition is requested on this tick or being materialized"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: Any) -> dg.AutomationResult:
        if context.candidate_subset.is_empty:  # nothing to hold (a quiet tick): no query for the runs
            return dg.AutomationResult(context, true_subset=context.get_empty_subset())
        graph = context.asset_graph
        ancestors = {key for key in graph.get_ancestor_asset_keys(context.key)
                     if graph.get(key).is_materializable and graph.get(key).partitions_def is not None}
        requested = any(not context.request_subsets_by_key[key].is_empty
                        for key in ancestors if key in context.request_subsets_by_key)
        running = requested or any(
            ancestors & set(record.dagster_run.asset_selection or ())
            for record in context.asset_graph_view.instance.get_run_records(
                dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
                                        dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED])))
        return dg.AutomationResult(context, true_subset=context.candidate_subset if running else context.get_empty_subset())


class MaterializedNow(dg.AutomationCondition):
    """True for the candidate partitions that have a materialization in the instance now.

    After Dagster's ``missing`` it finds the partitions a run materialized while the tick was
    evaluating: Dagster's status cache takes what is materialized from the asset records read when
    the tick began, and what is in progress from the runs when it reaches the asset, so a partition
    materialized in between looks neither materialized nor in progress, and was requested again
    (a run ending during a tick of several seconds, tests/deploy/test_single_host.py)."""

    @property
    def name(self) -> str:
        return "materialized_now"

    @property
    def description(self) -> str:
        return "materialized since the tick began"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: Any) -> dg.AutomationResult:
        instance = context.asset_graph_view.instance
        candidates = candidate_partitions(context)
        if not candidates:  # nothing was missing (a quiet tick): no query
            done: list[str | None] = []
        elif candidates == [None]:
            done = candidates if instance.fetch_materializations(context.key, limit=1).records else []
        else:  # one query for the asset, however many partitions a first tick asks about
            materialized = instance.get_materialized_partitions(context.key)
            done = [partition for partition in candidates if partition in materialized]
        return dg.AutomationResult(context, true_subset=subset_of(context.asset_graph_view, context.key, done))


def _evaluation_condition(*, summary: bool) -> dg.AutomationCondition:
    """Request what is missing or stale: not while it or an upstream runs; after a failure again
    at most :data:`AUTOMATION_RETRIES` times (:class:`FailedWithRetriesLeft`), then not until an
    upstream updates (the CLI retries failures when asked; the daemon never loops); what a run
    materialized while the tick evaluated is left alone (:class:`MaterializedNow`). Per-partition
    assets wait for missing upstreams (a new dataset is frozen on one tick, its partitions
    evaluated on the next: Dagster runs differently partitioned assets apart) and for what they
    read in another partition until it is fresh (:class:`WaitsForOtherPartition`). The summaries
    summarize what is evaluated: they need one evaluated upstream partition and wait while
    anything upstream is requested or running (their own group runs together), and while an
    unpartitioned asset they read (results.duckdb, for the report) is missing and not requested
    on this tick: a run upstream can end while a tick evaluates, after the tick left
    results.duckdb alone for it and before it reaches the report (the report then ran alone and
    failed: tests/deploy/test_single_host.py)."""
    # Dagster's cached failed status first: the attempts are counted for failed partitions only.
    retry = (dg.AutomationCondition.execution_failed() & FailedWithRetriesLeft()).with_label("failed, retries left")
    needed = (dg.AutomationCondition.missing() | StaleCondition() | retry).with_label("missing, stale or to retry")
    condition = (
        needed
        & (~dg.AutomationCondition.execution_failed() | dg.AutomationCondition.any_deps_updated() | retry)
        & ~dg.AutomationCondition.in_progress()
        & ~dg.AutomationCondition.any_deps_in_progress()
    )
    materializable = dg.AssetSelection.all()
    if summary:
        partitions = materializable - dg.AssetSelection.groups("summary")
        condition = (
            condition
            & dg.AutomationCondition.any_deps_match(~dg.AutomationCondition.missing()).allow(partitions)
            & ~UpstreamBusy()
            & ~dg.AutomationCondition.any_deps_missing().allow(unpartitioned())
        )
    else:
        condition = (condition & ~dg.AutomationCondition.any_deps_missing().allow(materializable)
                     & ~WaitsForOtherPartition())
    # Last, so that it reads the instance after every other part of the condition has.
    condition = condition & ~(dg.AutomationCondition.missing() & MaterializedNow()).with_label(
        "missing when the tick began, materialized since")
    return condition.with_label("summary: missing or stale" if summary else "missing or stale")


EVALUATE_WHEN_STALE = _evaluation_condition(summary=False)
SUMMARIZE_WHEN_STALE = _evaluation_condition(summary=True)
