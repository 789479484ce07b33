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
current versions as observations (:func:`observe_config`, only when a version changed), and
Dagster's stale status (read by :class:`Freshness`) does the rest — the UI's "Unsynced", the
:class:`StaleCondition` of the automation and ``embedpyramid run`` / ``status`` all read it.

Dagster's stale status is direct (a partition turns stale when a direct input has a new data
version, not while an input is itself stale); :class:`Freshness` follows it upstream, so
``status`` shows every partition ``run`` recomputes, and gives each summary the input partitions
it must exclude. Dagster exposes that status only through internals (the class behind the UI's
GraphQL ``staleStatus``), which :mod:`graphbase.dagster_internals` alone imports.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg

from embedpyramid.config import ProjectConfig
from embedpyramid.current_inputs import INPUTS_DIGEST, ExcludedInput, SummaryInputs
from embedpyramid.hashing import sha256_json
from embedpyramid.store import ArtifactStore, read_json
from graphbase.dagster_internals import (
    DATA_VERSION_TAG,
    DagsterStaleness,
    StaleCause,
    all_partitions,
    asset_graph_of,
    candidate_partitions,
    graph_view,
    parent_partitions,
    partition_dimensions,
    subset_of,
    unpartitioned,
)
from graphbase.facets import CONFIG, Facet, facet_partition, project_facets
from graphbase.partitions import (
    dataset_partitions,
    model_partitions,
    task_dataset_partitions,
)

State = Literal["fresh", "stale", "missing", "failed"]


def facet_source_asset(facet: Facet) -> dg.SourceAsset:
    """The observable source asset of ``facet``; observing it (the UI's "Observe sources") reads the
    config folder of the ``project`` resource."""
    partitions = {"model": model_partitions, "dataset": dataset_partitions, None: None,
                  **task_dataset_partitions}[facet.partitioned_by]

    def observe(context: dg.OpExecutionContext) -> dg.DataVersion | dg.DataVersionsByPartition:
        config = context.resources.project.config
        versions = {partition: facet.version(config, partition)[0] for partition in facet.partitions(config)}
        return dg.DataVersionsByPartition(versions) if facet.partitioned_by else dg.DataVersion(versions[None])

    observe.__doc__ = facet.description
    with warnings.catch_warnings():
        # Observable source assets are beta in Dagster 1.13; they are what makes Dagster read
        # observed versions as the current version of an external asset.
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.observable_source_asset(
            key=facet.key, description=facet.description, group_name=CONFIG, partitions_def=partitions,
            required_resource_keys={"project"},
        )(observe)


def provenance_record(context: dg.AssetExecutionContext, config: ProjectConfig, store: ArtifactStore,
                      asset: dg.AssetKey | None = None) -> dict[str, Any]:
    """What the asset partition being materialized is computed from: the frozen dataset's content
    hash, the card key, the version of every config facet it reads and its code version (Dagster
    records the same as the materialization's data-version provenance, with the data versions
    of its inputs). ``asset``: which of a multi-asset's assets (the step's only asset if None)."""
    asset = asset or context.asset_key
    keys = partition_dimensions(context.assets_def, asset, context.partition_key) if context.has_partition_key else {}
    model = keys.get("model")
    dataset = keys.get("dataset") or next(iter(keys.values()), None)
    facets = {facet.key: facet for facet in project_facets(config)}
    versions = {}
    for dep in sorted(context.assets_def.asset_deps[asset]):
        if dep in facets:
            partition = facet_partition(facets[dep], model, dataset)
            versions[_where(dep, partition)] = facets[dep].version(config, partition)[0]
    manifest = store.dataset_dir(dataset) / "manifest.json" if dataset else None
    return {
        "asset": asset.to_user_string(),
        "partition": context.partition_key if context.has_partition_key else None,
        "dataset": dataset,
        "dataset_version": read_json(manifest)["version"] if manifest is not None and manifest.is_file() else None,
        "card_key": config.models[model].key if model in config.models else None,
        "code_version": context.assets_def.code_versions_by_key[asset],
        "facets": versions,
    }


def observe_config(instance: dg.DagsterInstance, config: ProjectConfig) -> list[str]:
    """Report each facet version of ``config`` that differs from the latest one Dagster holds, as
    an observation carrying the fragment; return what changed ("config/measures", ...)."""
    changed = []
    for event in config_observations(instance, config):
        instance.report_runless_asset_event(event)
        changed.append(event.asset_key.to_user_string() + (f" [{event.partition}]" if event.partition else ""))
    return changed


def pending_facet_versions(instance: dg.DagsterInstance, config: ProjectConfig) -> dict[tuple[dg.AssetKey, str | None], str]:
    """The facet versions of ``config`` that Dagster does not hold yet, by (facet, partition):
    what :func:`observe_config` would record, read without recording it."""
    return {(event.asset_key, event.partition): event.tags[DATA_VERSION_TAG]
            for event in config_observations(instance, config)}


def config_observations(instance: dg.DagsterInstance, config: ProjectConfig) -> list[dg.AssetObservation]:
    """The observations that would bring Dagster's facet versions up to date with ``config``."""
    events = []
    for facet in project_facets(config):
        partitions = facet.partitions(config)
        if facet.partitioned_by is None:
            record = instance.get_latest_data_version_record(facet.key, True, None)
            latest = {None: record.event_log_entry.tags.get(DATA_VERSION_TAG)
                      if record and record.event_log_entry.tags else None}
        else:  # one query per facet, every partition at once
            tags = instance.event_log_storage.get_latest_tags_by_partition(
                facet.key, dg.DagsterEventType.ASSET_OBSERVATION, [DATA_VERSION_TAG], asset_partitions=partitions)
            latest = {partition: tags.get(partition, {}).get(DATA_VERSION_TAG) for partition in partitions}
        for partition in partitions:
            version, fragment = facet.version(config, partition)
            recorded = latest[partition]
            if recorded != version:
                events.append(dg.AssetObservation(
                    asset_key=facet.key, partition=partition, tags={DATA_VERSION_TAG: version},
                    metadata={"fragment": dg.MetadataValue.json(fragment),
                              "config_folder": dg.MetadataValue.path(str(config.directory))},
                ))
    return events


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


def _cause_text(cause: StaleCause, asset: dg.AssetKey, partition: str | None) -> str:
    """"config/measures has a new data version", or just "has a new code version" for the asset itself."""
    if cause.asset == asset and cause.partition == partition:
        return cause.reason
    where = f" [{cause.partition}]" if cause.partition else ""
    return f"{cause.asset.to_user_string()}{where} {cause.reason}"


def _where(asset: dg.AssetKey, partition: str | None) -> str:
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
                 abandoned: frozenset[str] = frozenset()):
        """``pending``: config facet versions not recorded yet (:func:`pending_facet_versions`),
        read as if observed; ``abandoned``: ids of runs still shown in progress whose process is
        gone, read as failed. Both let ``status`` answer for a config without writing anything."""
        self.instance, self.graph = instance, asset_graph
        self.view = graph_view(instance, asset_graph)
        self.dagster = DagsterStaleness(self.view, pending)
        self.abandoned = abandoned
        self._memo: dict[tuple[dg.AssetKey, str | None], AssetState] = {}
        self._storage_ids: dict[tuple[dg.AssetKey, dg.DagsterEventType], Mapping[str, int]] = {}
        self._registered: dict[str, set[str]] = {}

    def states(self, asset_partitions: Iterable[tuple[dg.AssetKey, str | None]]) -> list[AssetState]:
        return [self.state(asset, partition) for asset, partition in asset_partitions]

    def state(self, asset: dg.AssetKey, partition: str | None) -> AssetState:
        key = (asset, partition)
        if key not in self._memo:
            if partition is not None and not self._registered_partition(asset, partition):
                # A card or dataset of the config that is not a partition yet (status of an edited
                # config registers nothing): never materialized, whatever Dagster would say.
                self._memo[key] = AssetState(asset.to_user_string(), partition, "missing")
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
                changed.append(f"{_where(parent, parent_partition)} has a new data version")
            found = self.state(parent, parent_partition)
            if self._not_current(parent, found):
                excluded.append(f"input {_where(parent, parent_partition)} is {found.state}"
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
        return sha256_json(sorted(_where(parent, parent_partition) for parent, parent_partition in inputs
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
    return [f"{_where(asset, partition)} " + ("never materialized" if state.state == "missing" else "failed")]


UP_TO_DATE = "up_to_date"
"""The asset-level check that turns WARN (in the lineage and on the asset page) while any
partition of the asset is stale, missing or failed: the UI shows staleness per partition only."""


def up_to_date_evaluations(freshness: Freshness, assets: Iterable[dg.AssetKey]) -> list[dg.AssetCheckEvaluation]:
    """Per asset: passed when every partition is fresh; else WARN, with how many partitions are
    not and the first few with their causes."""
    evaluations = []
    for asset in assets:
        partitions = all_partitions(freshness.view, asset) if freshness.graph.get(asset).partitions_def else [None]
        behind = [state for partition in partitions if (state := freshness.state(asset, partition)).needs_work]
        lines = [f"{state.partition or asset.to_user_string()}: {state.state}"
                 + (f" ({'; '.join(state.causes)})" if state.causes else "") for state in behind]
        evaluations.append(dg.AssetCheckEvaluation(
            asset_key=asset, check_name=UP_TO_DATE, passed=not behind, severity=dg.AssetCheckSeverity.WARN,
            description=(f"{len(behind)} of {len(partitions)} partitions need work" if behind
                         else "every partition is fresh"),
            metadata={"partitions": dg.MetadataValue.int(len(partitions)),
                      "not_fresh": dg.MetadataValue.int(len(behind)),
                      "first": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines[:10])
                                                   + (f"\n- +{len(lines) - 10} more" if len(lines) > 10 else ""))},
        ))
    return evaluations


def report_up_to_date(instance: dg.DagsterInstance, asset_graph: Any, freshness: Freshness | None = None) -> int:
    """Record the ``up_to_date`` check of every materializable asset whose outcome changed since
    its last evaluation (the CLI after each command, the config sensor on each tick); returns
    how many were recorded. ``freshness``: the states already read at this moment (``status``),
    if nothing was recorded since."""
    freshness = freshness or Freshness(instance, asset_graph)
    assets = sorted(key for key in asset_graph.get_all_asset_keys() if asset_graph.get(key).is_materializable)
    recorded = 0
    for evaluation in up_to_date_evaluations(freshness, assets):
        latest = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(evaluation.asset_key, UP_TO_DATE))
        previous = latest.event.asset_check_evaluation if latest and latest.event else None
        if previous is None or previous.passed != evaluation.passed or previous.metadata != evaluation.metadata:
            instance.report_runless_asset_event(evaluation)
            recorded += 1
    return recorded


_LOCATION_GRAPH: list[Callable[[str, str], Any]] = []


def provide_location_graph(build: Callable[[str, str], Any]) -> None:
    """Register how the asset graph of a (config folder, data folder) is built: the code location
    (:func:`pipelines.graph.location_asset_graph`) does so when it is imported, so this layer
    never imports the layers above it."""
    _LOCATION_GRAPH[:] = [build]


def location_graph(context: Any, configs_dir: str, data_dir: str) -> Any:
    """The whole asset graph a step runs in (see :func:`~graphbase.dagster_internals.asset_graph_of`):
    the repository's, or, in-process, the one the registered builder returns."""

    def build() -> Any:
        if not _LOCATION_GRAPH:
            raise RuntimeError("no asset graph is registered for an in-process step: build the definitions with "
                               "pipelines.graph.build_definitions")
        return _LOCATION_GRAPH[0](configs_dir, data_dir)

    return asset_graph_of(context, build)


def up_to_date_checks(assets: Sequence[dg.AssetKey]) -> dg.AssetChecksDefinition:
    """The ``up_to_date`` check of every materializable asset (also runnable from the UI)."""

    @dg.multi_asset_check(specs=[dg.AssetCheckSpec(UP_TO_DATE, asset=asset, description=(
        "Every partition of this asset is fresh: WARN while one is stale (a config facet, the code or an upstream "
        "changed), missing or failed, with the first few and their root causes")) for asset in assets],
        name="up_to_date_checks", can_subset=True, required_resource_keys={"project"})
    def checks(context):  # Dagster reads the annotation; a string one (postponed annotations) is refused
        project = context.resources.project
        graph = location_graph(context, project.configs_dir, project.data_dir)
        freshness = Freshness(context.instance, graph)
        selected = sorted({key.asset_key for key in context.selected_asset_check_keys})
        for evaluation in up_to_date_evaluations(freshness, selected):
            yield dg.AssetCheckResult(asset_key=evaluation.asset_key, check_name=UP_TO_DATE, passed=evaluation.passed,
                                      severity=evaluation.severity, description=evaluation.description,
                                      metadata=evaluation.metadata)

    return checks


FRESH_MEMO = "embedpyramid/fresh-at"


def graph_signature(asset_graph: Any, asset_partitions: Iterable[tuple[str, str | None]]) -> str:
    """What Dagster's stale answer depends on besides the event log: every asset's code version
    and dependencies, and the (asset, partition) pairs asked about."""
    nodes = sorted((key.to_user_string(), asset_graph.get(key).code_version,
                    sorted(parent.to_user_string() for parent in asset_graph.get(key).parent_keys))
                   for key in asset_graph.get_all_asset_keys())
    return sha256_json({"nodes": nodes, "asked": sorted(asset_partitions, key=str)})


def known_fresh(instance: dg.DagsterInstance, signature: str) -> bool:
    """Whether Dagster found every asked partition fresh for ``signature`` and nothing has been
    recorded since: a memo of Dagster's own answer, void after any new event (a materialization,
    a failure, a changed config version), so a warm run with nothing to do asks nothing."""
    memo = instance.daemon_cursor_storage.get_cursor_values({FRESH_MEMO}).get(FRESH_MEMO)
    return memo == f"{signature}@{instance.event_log_storage.get_maximum_record_id()}"


def remember_fresh(instance: dg.DagsterInstance, signature: str) -> None:
    """Record that Dagster has just found every partition of ``signature`` fresh."""
    memo = f"{signature}@{instance.event_log_storage.get_maximum_record_id()}"
    instance.daemon_cursor_storage.set_cursor_values({FRESH_MEMO: memo})


class _FreshnessCondition(dg.AutomationCondition):
    """True for the candidate partitions :meth:`holds` for, read off the same :class:`Freshness`
    that ``embedpyramid run`` plans its waves with, so the automation and the CLI cannot disagree."""

    @property
    def requires_cursor(self) -> bool:
        return False

    def holds(self, freshness: Freshness, key: dg.AssetKey, partition: str | None) -> bool:
        raise NotImplementedError

    def evaluate(self, context: Any) -> dg.AutomationResult:
        view = context.asset_graph_view
        freshness = _tick_freshness(view)
        true = [partition for partition in candidate_partitions(context) if self.holds(freshness, context.key, partition)]
        return dg.AutomationResult(context, true_subset=subset_of(view, context.key, true))


_TICK: list[tuple[Any, Freshness]] = []
"""The states of the tick being evaluated, with Dagster's view of that tick."""


def _tick_freshness(view: Any) -> Freshness:
    """One :class:`Freshness` per tick, shared by every condition of every asset: Dagster builds
    one asset graph view per tick, and every state read from it is of that moment (a new one per
    condition walked the upstream partitions again for each: ~1.2 s per partition per tick,
    ``benchmarks/bench_summary.py``)."""
    if not _TICK or _TICK[0][0] is not view:
        _TICK[:] = [(view, Freshness(view.instance, view.asset_graph))]
    return _TICK[0][1]


class StaleCondition(_FreshnessCondition):
    """True for the partitions that are stale *directly* (the UI's "Unsynced"): a config facet,
    an input's data version or the asset's code version changed since it was materialized; for a
    summary, also an input partition with a new data version since it was built. Partitions
    stale only because something upstream is not fresh wait for it (their upstream is requested
    first).
    """

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
        if candidates == [None]:
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
