"""One notion of "stale": Dagster's own, read by the UI, the automation and the CLI alike.

Everything a number depends on reaches Dagster as a version:

- **code**: every asset's ``code_version`` is derived from the source it runs
  (:func:`embedpyramid.code_version.function_version`: its module and the ``embedpyramid`` modules
  its function imports, transitively), so editing core code stales exactly the assets that run it.
- **data**: every asset returns a content hash as its data version (or Dagster derives one from
  its inputs), so re-freezing identical data moves nothing downstream.
- **config**: every fragment of the config folder that changes a number is a *facet*, an
  observable source asset under ``config/`` (group ``config``) whose data version is the sha256
  of the fragment: the card of each model (its data version *is* the card hash), the source of each
  dataset, the search depth, the measures, each dataset's metric conventions, the resampling
  settings, the comparison settings, the ANN settings and each index spec, each task dataset's
  entry (one facet per L2 task family) and the task summary's settings, the L5 latency sample and
  each L5 system (its content hash), and judge.yaml. Facets are partitioned like their fragment
  (per card name, per dataset, per task family's dataset, or not at all), so an edit makes
  exactly the right partitions stale, with the cause "config/<facet> [partition] has a new data
  version".

An asset declares what its numbers depend on by listing facets among its deps::

    @dg.asset(deps=["exact_topk", *facet_deps(MEASURES, CONVENTIONS)],
              code_version=function_version(__file__, "retrieval_metrics"), ...)

and a new pyramid level with a new kind of setting adds one :class:`Facet` (a name, what it
means, how to cut it from a :class:`~embedpyramid.config.ProjectConfig`, how it is partitioned)
to ``STATIC_FACETS``. Nothing else is needed: the CLI and the config sensor report the facets'
current versions as observations (:func:`graphbase.config_observation.observe_config`, only when a
version changed), and
Dagster's stale status (read by :class:`Freshness`) does the rest — the UI's "Unsynced", the
:class:`graphbase.conditions.StaleCondition` of the automation and ``embedpyramid run`` / ``status`` all read it.

Dagster's stale status is direct (a partition turns stale when a direct input has a new data
version, not while an input is itself stale); :class:`Freshness` follows it upstream, so
``status`` shows every partition ``run`` recomputes, and gives each summary the input partitions
it must exclude. Dagster exposes that status only through internals (the class behind the UI's
GraphQL ``staleStatus``), which :mod:`graphbase.dagster_internals` alone imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import dagster as dg

from embedpyramid.config import ProjectConfig
from embedpyramid.current_inputs import INPUTS_DIGEST, ExcludedInput, SummaryInputs
from embedpyramid.hashing import sha256_json
from graphbase.dagster_internals import (
    DATA_VERSION_TAG,
    DagsterStaleness,
    StaleCause,
    all_partitions,
    graph_view,
    parent_partitions,
    partition_dimensions,
)
from graphbase.partitions import (
    dataset_partitions,
)

State = Literal["fresh", "stale", "missing", "failed"]


@dataclass(frozen=True)
class AssetState:
    """One asset partition: fresh, stale (with its root causes), missing, or failed (its latest
    run failed or was killed before it was materialized).

    ``direct`` says whether materializing it now would change anything: True when Dagster itself
    reports it (a config facet, the code version or a direct input's data version changed, or it
    is missing or failed), or for a summary when an input partition has a new data version since
    it was built; False when it is listed only because something upstream is not fresh (it is
    recomputed once that upstream is, unless the upstream's new data is identical) or, for a
    summary, because an input partition it must exclude is not current.
    """

    asset: str
    partition: str | None
    state: State
    causes: tuple[str, ...] = ()
    direct: bool = True

    @property
    def needs_work(self) -> bool:
        return self.state != "fresh"

    @property
    def needs_work_now(self) -> bool:
        """What ``embedpyramid run`` and the automation materialize in this wave."""
        return self.needs_work and self.direct


@dataclass
class KeptStates:
    """States kept from an earlier moment (:mod:`graphbase.freshness_store`): each (asset,
    partition) is the kept state (fresh when none is kept) unless it is ``dirty``, which
    :class:`Freshness` computes again."""

    states: Mapping[tuple[dg.AssetKey, str | None], AssetState]
    dirty: set[tuple[dg.AssetKey, str | None]] = field(default_factory=set)
    _kept_by_asset: dict[dg.AssetKey, set[str | None]] | None = field(default=None, init=False, repr=False)

    def state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        return self.states.get((asset, partition)) or AssetState(asset.to_user_string(), partition, "fresh")

    def possibly_not_fresh(self, asset: dg.AssetKey) -> set[str | None]:
        """The partitions of ``asset`` that may not be fresh: those kept as not fresh and those
        dirty; every other partition of it is fresh (what a quiet tick asks about, without
        visiting each partition)."""
        if self._kept_by_asset is None:
            self._kept_by_asset = {}
            for found, partition in self.states:
                self._kept_by_asset.setdefault(found, set()).add(partition)
        return self._kept_by_asset.get(asset, set()) | {partition for found, partition in self.dirty if found == asset}


def _cause_text(cause: StaleCause, asset: dg.AssetKey, partition: str | None) -> str:
    """"config/measures has a new data version", or just "has a new code version" for the asset itself."""
    if cause.asset == asset and cause.partition == partition:
        return cause.reason
    where = f" [{cause.partition}]" if cause.partition else ""
    return f"{cause.asset.to_user_string()}{where} {cause.reason}"


def partition_label(asset: dg.AssetKey, partition: str | None) -> str:
    """``asset [partition]``, or the asset alone."""
    return asset.to_user_string() + (f" [{partition}]" if partition else "")


def _summarizes(own: dg.PartitionsDefinition | None, parent: dg.PartitionsDefinition | None) -> bool:
    """Whether an asset partitioned by ``own`` reads many partitions of a parent partitioned by
    ``parent`` per partition of its own: an unpartitioned asset over a partitioned parent, or an
    asset partitioned by one dimension of a multi-partitioned parent."""
    if parent is None:
        return False
    if own is None:
        return True
    return isinstance(parent, dg.MultiPartitionsDefinition) and any(
        dimension.partitions_def == own for dimension in parent.partitions_defs)


class Freshness:
    """The state of every asset partition of a graph at one moment, followed upstream.

    Dagster's own stale status is direct: an asset partition turns stale when one of its direct
    inputs has a new data version, not while an input is itself stale. Here a partition is also
    stale when anything upstream of it is not fresh (with the upstream's root causes), so
    ``embedpyramid status`` shows every partition that ``run`` will recompute. A summary
    (:meth:`is_summary`: unpartitioned over partitioned inputs, or one dataset's partition over
    every card's partition on it) is stale when one of its input partitions has a new data
    version since it was built (Dagster misses a partition materialized for the first time) or
    is not current: a summary never uses such an input (:func:`summary_inputs`).
    """

    def __init__(self, instance: dg.DagsterInstance, asset_graph: Any, *,
                 pending: Mapping[tuple[dg.AssetKey, str | None], str] | None = None,
                 abandoned: frozenset[str] = frozenset(), kept: KeptStates | None = None):
        """``pending``: config facet versions not recorded yet
        (:func:`~graphbase.config_observation.pending_facet_versions`), read as if observed;
        ``abandoned``: ids of runs still shown in progress whose process is gone, read as failed.
        Both let ``status`` answer for a config without writing anything. ``kept``: states kept
        from an earlier moment, read instead of computed except where dirty
        (:func:`graphbase.freshness_store.kept_freshness`)."""
        self.instance, self.graph = instance, asset_graph
        self.view = graph_view(instance, asset_graph)
        self.pending, self.abandoned, self.kept = pending, abandoned, kept
        self._memo: dict[tuple[dg.AssetKey, str | None], AssetState] = {}
        self._storage_ids: dict[tuple[dg.AssetKey, dg.DagsterEventType], Mapping[str, int]] = {}
        self._registered: dict[str, set[str]] = {}

    @cached_property
    def dagster(self) -> DagsterStaleness:
        """Dagster's own stale status, asked only for the states not kept."""
        return DagsterStaleness(self.view, self.pending)

    def states(self, asset_partitions: Iterable[tuple[dg.AssetKey, str | None]]) -> list[AssetState]:
        return [self.state(asset, partition) for asset, partition in asset_partitions]

    def state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        key = (asset, partition)
        if key not in self._memo:
            if partition is not None and not self._registered_partition(asset, partition):
                # A card or dataset of the config that is not a partition yet (status of an edited
                # config registers nothing): never materialized, whatever Dagster would say.
                self._memo[key] = AssetState(asset.to_user_string(), partition, "missing")
            elif self.kept is not None and key not in self.kept.dirty:
                self._memo[key] = self.kept.state(asset, partition)
            elif self.is_summary(asset):
                self._memo[key] = self._summary_state(asset, partition)
            else:
                self._memo[key] = self._partition_state(asset, partition)
        return self._memo[key]

    def _registered_partition(self, asset: dg.AssetKey, partition: str) -> bool:
        """Whether every dynamic key of ``partition`` is a partition in the instance."""
        partitions_def = self.graph.get(asset).partitions_def
        dimensions = ([(d.partitions_def, key) for d in partitions_def.partitions_defs
                       for name, key in partition_dimensions(self.graph, asset, partition).items() if d.name == name]
                      if isinstance(partitions_def, dg.MultiPartitionsDefinition) else [(partitions_def, partition)])
        for definition, key in dimensions:
            if isinstance(definition, dg.DynamicPartitionsDefinition):
                if definition.name not in self._registered:
                    self._registered[definition.name] = set(self.instance.get_dynamic_partitions(definition.name))
                if key not in self._registered[definition.name]:
                    return False
        return True

    def direct_state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        """Dagster's own answer, plus "failed"."""
        status = self.dagster.status(asset, partition)
        causes: tuple[str, ...] = ()
        state: State = status
        if status == "stale":
            causes = tuple(sorted({_cause_text(cause, asset, partition)
                                   for cause in self.dagster.root_causes(asset, partition)}))
        if self._latest_run_failed(asset, partition):
            state = "failed"
        return AssetState(asset.to_user_string(), partition, state, causes)

    def _partition_state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        own = self.direct_state(asset, partition)
        upstream: set[str] = set()
        for parent in self._materializable_parents(asset):
            for parent_partition in parent_partitions(self.view, asset, partition, parent):
                found = self.state(parent, parent_partition)
                if found.needs_work:
                    upstream |= set(_upstream_causes(found, parent, parent_partition))
        if partition is not None and self.waits_for_other_partition(asset, partition):
            # What it reads in another partition (a rerank's by card's embeddings) is
            # materialized by another run, which must come first: missing, stale or failed, it
            # waits for that run (the runner orders them so, the automation holds it).
            return AssetState(own.asset, partition, own.state if own.needs_work else "stale",
                              tuple(sorted({*own.causes, *upstream})), direct=False)
        if own.needs_work or not upstream:
            return own
        return AssetState(own.asset, partition, "stale", tuple(sorted(upstream)), direct=False)

    def waits_for_other_partition(self, asset: dg.AssetKey, partition: str) -> bool:
        """Whether a partition it reads in another partition (:meth:`other_partition_parents`)
        is not fresh."""
        return any(self.state(parent, parent_partition).needs_work
                   for parent, parent_partition in self.other_partition_parents(asset, partition))

    def other_partition_parents(self, asset: dg.AssetKey, partition: str) -> list[tuple[dg.AssetKey, str]]:
        """The (parent, partition) pairs that ``asset``'s ``partition`` reads in *another* partition
        of its own partitions definition, by the graph's partition mappings (a rerank's ``by``
        card's embeddings): what must be materialized before it, in that partition."""
        partitions_def = self.graph.get(asset).partitions_def
        return [(parent, parent_partition) for parent in self._materializable_parents(asset)
                if self.graph.get(parent).partitions_def == partitions_def
                for parent_partition in parent_partitions(self.view, asset, partition, parent)
                if parent_partition is not None and parent_partition != partition]

    def _summary_state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        own = self.direct_state(asset, partition)
        if own.state in ("missing", "failed"):
            return own
        latest = self.instance.get_latest_data_version_record(asset, False, partition)
        cursor = latest.storage_id if latest else None
        changed, excluded = [], []
        inputs = self.input_partitions(asset, partition)
        for parent, parent_partition in inputs:
            if self._changed_since(parent, parent_partition, cursor):
                changed.append(f"{partition_label(parent, parent_partition)} has a new data version")
            found = self.state(parent, parent_partition)
            if self._not_current(parent, found):
                excluded.append(f"input {partition_label(parent, parent_partition)} is {found.state}"
                                + (f" ({'; '.join(found.causes)})" if found.causes else ""))
        if not changed and self._inputs_left(latest, inputs):
            changed.append("an input partition it read is gone (a card or dataset left the config)")
        if changed or own.needs_work:
            return AssetState(own.asset, partition, "stale", tuple(sorted({*own.causes, *changed, *excluded})))
        summarized = {parent for parent, _ in inputs}
        upstream = {cause for parent in self._materializable_parents(asset) if parent not in summarized
                    for parent_partition in parent_partitions(self.view, asset, partition, parent)
                    if (found := self.state(parent, parent_partition)).needs_work
                    for cause in _upstream_causes(found, parent, parent_partition)}
        if excluded or upstream:
            return AssetState(own.asset, partition, "stale", tuple(sorted({*excluded, *upstream})), direct=False)
        return own

    def input_partitions(self, summary: dg.AssetKey, partition: str | None = None) -> list[tuple[dg.AssetKey, str]]:
        """Every (partitioned input asset, partition) a summary (or one partition of a summary
        partitioned by dataset) reads, of the inputs that summarize across partitions."""
        own = self.graph.get(summary).partitions_def
        return [(parent, parent_partition) for parent in self._materializable_parents(summary)
                if _summarizes(own, self.graph.get(parent).partitions_def)
                for parent_partition in parent_partitions(self.view, summary, partition, parent)
                if parent_partition is not None]

    def inputs_digest(self, summary: dg.AssetKey, partition: str | None = None) -> str:
        """The sha256 of the summary's input partitions that have a materialization (recorded
        with each summary: :data:`~embedpyramid.current_inputs.INPUTS_DIGEST`)."""
        return self._digest(self.input_partitions(summary, partition))

    def _digest(self, inputs: list[tuple[dg.AssetKey, str]]) -> str:
        return sha256_json(sorted(partition_label(parent, parent_partition) for parent, parent_partition in inputs
                                  if self.dagster.status(parent, parent_partition) != "missing"))

    def _inputs_left(self, latest: Any, inputs: list[tuple[dg.AssetKey, str]]) -> bool:
        """Whether an input partition the summary read when it was built (``inputs``: those it
        reads now) has no materialization now (its card or dataset left the config, so Dagster
        deleted the partition): nothing else upstream changed, yet its tables still hold that
        partition's rows. A new input partition is seen by its data version instead."""
        materialization = latest.asset_materialization if latest is not None else None
        recorded = materialization.metadata.get(INPUTS_DIGEST) if materialization is not None else None
        return recorded is not None and recorded.value != self._digest(inputs)

    def summarizes_something(self, summary: dg.AssetKey, partition: str | None = None) -> bool:
        """Whether an input partition of the summary has ever been materialized: a summary of
        nothing (a dataset nothing is evaluated on yet) is not built."""
        return any(self.state(parent, parent_partition).state != "missing"
                   for parent, parent_partition in self.input_partitions(summary, partition))

    def upstream_not_current(self, summary: dg.AssetKey,
                             partition: str | None = None) -> list[tuple[dg.AssetKey, str, AssetState]]:
        """(asset, partition, state) of every partition upstream of ``summary``, at any depth, that
        is not current: what a summary must not read. For a summary partitioned by dataset, the
        partitions of that dataset only. A summary upstream counts as not current only when
        rebuilding it would change it (:meth:`_not_current`)."""
        ancestors = sorted(key for key in self.graph.get_ancestor_asset_keys(summary)
                           if self.graph.get(key).is_materializable and self.graph.get(key).partitions_def is not None)
        return [(asset, found_partition, found) for asset in ancestors
                for found_partition in all_partitions(self.view, asset)
                if partition is None or self._dataset_of(asset, found_partition) == partition
                if self._not_current(asset, found := self.state(asset, found_partition))]

    def _not_current(self, asset: dg.AssetKey, state: AssetState) -> bool:
        """Whether a summary must leave out ``asset``'s partition in ``state``: any state but
        fresh, except a summary partition that is stale only because it left out inputs that
        are not current (it says so; the summary reading it leaves out the same inputs itself)."""
        return state.needs_work_now if self.is_summary(asset) else state.needs_work

    def _dataset_of(self, asset: dg.AssetKey, partition: str) -> str | None:
        dimensions = partition_dimensions(self.graph, asset, partition)
        return dimensions.get("dataset", dimensions.get(dataset_partitions.name))

    def is_summary(self, asset: dg.AssetKey) -> bool:
        """Whether ``asset`` summarizes across partitions: unpartitioned with a partitioned input,
        or partitioned by one dimension of an input's partitions (``comparisons``, per dataset,
        over every (model, dataset) partition of that dataset)."""
        own = self.graph.get(asset).partitions_def
        return any(_summarizes(own, self.graph.get(parent).partitions_def)
                   for parent in self._materializable_parents(asset))

    def _materializable_parents(self, asset: dg.AssetKey) -> list[dg.AssetKey]:
        return sorted(parent for parent in self.graph.get(asset).parent_keys
                      if self.graph.has(parent) and self.graph.get(parent).is_materializable)

    def _changed_since(self, asset: dg.AssetKey, partition: str | None, cursor: int | None) -> bool:
        """Whether the partition's data version changed after storage id ``cursor`` (the
        summary's materialization)."""
        if cursor is None:
            return False
        if partition is not None:  # nothing after the cursor: answered by the asset's one query
            latest = self._latest_storage_ids(asset, dg.DagsterEventType.ASSET_MATERIALIZATION).get(partition)
            if latest is None or latest <= cursor:
                return False
        after = self.instance.get_latest_data_version_record(asset, False, partition, after_cursor=cursor)
        if after is None:
            return False
        before = self.instance.get_latest_data_version_record(asset, False, partition, before_cursor=cursor + 1)
        version = (lambda record: record.event_log_entry.tags.get(DATA_VERSION_TAG)
                   if record is not None and record.event_log_entry.tags else None)
        return before is None or version(before) != version(after)

    def _latest_run_failed(self, asset: dg.AssetKey, partition: str | None) -> bool:
        """Whether the latest run that planned this partition failed, or was killed or canceled,
        and nothing materialized it since (a killed run records no failed materialization)."""
        records_filter = dg.AssetRecordsFilter(asset, asset_partitions=[partition] if partition else None)
        if partition is None:
            materialized = self.instance.fetch_materializations(records_filter, limit=1).records
            last = materialized[0].storage_id if materialized else -1
        else:
            last = self._latest_storage_ids(asset, dg.DagsterEventType.ASSET_MATERIALIZATION).get(partition, -1)
        if partition is None:
            failed = self.instance.fetch_failed_materializations(records_filter, limit=1).records
            last_failed = failed[0].storage_id if failed else None
        else:
            last_failed = self._latest_storage_ids(asset, dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE).get(partition)
        if last_failed is not None and last_failed > last:
            return True
        if partition is not None:
            planned_id = self._latest_storage_ids(asset, dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED).get(partition)
            if planned_id is None or planned_id < last:
                return False
        planned = self.instance.get_latest_planned_materialization_info(asset, partition)
        if planned is None or planned.storage_id < last:
            return False
        run = self.instance.get_run_by_id(planned.run_id)
        return run is not None and (run.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
                                    or run.run_id in self.abandoned)

    def _latest_storage_ids(self, asset: dg.AssetKey, event_type: dg.DagsterEventType) -> Mapping[str, int]:
        """The storage id of the latest event of ``event_type`` of every partition of ``asset``:
        one query per asset instead of one per partition (none for the materializations the stale
        status has read already)."""
        key = (asset, event_type)
        if key not in self._storage_ids:
            self._storage_ids[key] = self.dagster.latest_storage_ids(asset, event_type)
        return self._storage_ids[key]

    def failed_attempts(self, asset: dg.AssetKey, partition: str | None, most: int) -> int:
        """How many runs that planned this partition failed, or were killed or canceled, since it
        was last materialized (counted up to ``most + 1``): a run that failed at dequeue or lost
        its worker counts as one, as a step failure does."""
        records_filter = dg.AssetRecordsFilter(asset, asset_partitions=[partition] if partition else None)
        materialized = self.instance.fetch_materializations(records_filter, limit=1).records
        since = dg.AssetRecordsFilter(asset, asset_partitions=[partition] if partition else None,
                                      after_storage_id=materialized[0].storage_id if materialized else None)
        # After the last materialization every run that planned it failed or is still going (a
        # run in progress is not counted), so most + 2 records hold most + 1 failures.
        planned = self.instance.fetch_planned_materializations(since, limit=most + 2).records
        if not planned:
            return 0
        runs = self.instance.get_runs(dg.RunsFilter(run_ids=sorted({record.run_id for record in planned})))
        return sum(run.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED) for run in runs)


def summary_inputs(freshness: Freshness, summary: dg.AssetKey, config: ProjectConfig,
                   partition: str | None = None) -> SummaryInputs:
    """What a summary asset (or one dataset's partition of it) must leave out: every partition
    upstream of it that is not current, named as the core names its inputs (asset, dataset,
    card key)."""
    excluded = []
    for asset, upstream, state in freshness.upstream_not_current(summary, partition):
        keys = partition_dimensions(freshness.graph, asset, upstream)
        name = keys.get("model")
        if name is not None and name not in config.models:
            continue
        dataset = keys.get("dataset") or next(iter(keys.values()))
        reason = "; ".join(state.causes) or ("never materialized" if state.state == "missing" else "its last run failed")
        excluded.append(ExcludedInput(asset.to_user_string(), dataset, config.models[name].key if name else None,
                                      state.state, reason))
    return SummaryInputs(tuple(excluded), freshness.inputs_digest(summary, partition))


def _upstream_causes(state: AssetState, asset: dg.AssetKey, partition: str | None) -> list[str]:
    """The root causes an upstream partition passes down: its own stale causes, or that it is
    missing or failed."""
    if state.state == "stale":
        return list(state.causes)
    return [f"{partition_label(asset, partition)} " + ("never materialized" if state.state == "missing" else "failed")]


