"""Every Dagster internal the project relies on, behind one small surface.

Dagster offers no public API for an asset partition's stale status and its causes (the UI reads
them through GraphQL, backed by ``CachingStaleStatusResolver``), nor for mapping one asset
partition to its parents' partitions. This module is the only place that imports ``dagster._``;
``tests/graph/test_dagster_internals.py`` checks its contract against the installed Dagster
(hence the pin ``dagster<1.14``: a minor release may move these names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._time import get_current_datetime
from dagster_shared.check import CheckError
from dagster_shared.record import record

__all__ = ["DATA_VERSION_TAG", "DagsterStaleness", "StaleCause", "all_partitions", "asset_graph_of", "candidate_partitions", "checks_named", "graph_view",
           "parent_partitions", "partition_dimensions", "subset_of"]

DirectStatus = Literal["fresh", "stale", "missing"]


@dataclass(frozen=True)
class StaleCause:
    """One root cause Dagster gives for a stale partition: which asset partition changed, and how."""

    asset: dg.AssetKey
    partition: str | None
    reason: str


def graph_view(instance: dg.DagsterInstance, asset_graph: Any) -> AssetGraphView:
    """A read view of the instance at this moment (what the automation daemon evaluates on)."""
    return AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance, asset_graph=asset_graph,
    )


class DagsterStaleness:
    """Dagster's own, direct stale status of asset partitions (the UI's "Unsynced"): an asset
    partition is stale when its code version or the data version of one of its direct
    dependencies changed since it was materialized. One resolver caches what it reads."""

    def __init__(self, view: AssetGraphView):
        self.view = view
        self._resolver = CachingStaleStatusResolver(view.instance, view.asset_graph, view)

    def status(self, asset: dg.AssetKey, partition: str | None) -> DirectStatus:
        status = self._resolver.get_status(asset, partition)
        return {StaleStatus.STALE: "stale", StaleStatus.MISSING: "missing"}.get(status, "fresh")  # type: ignore[return-value]

    def root_causes(self, asset: dg.AssetKey, partition: str | None) -> list[StaleCause]:
        return [StaleCause(cause.asset_key, cause.partition_key, cause.reason)
                for cause in self._resolver.get_stale_root_causes(asset, partition)]


def parent_partitions(view: AssetGraphView, child: dg.AssetKey, partition: str | None,
                      parent: dg.AssetKey) -> list[str | None]:
    """The partitions of ``parent`` that ``child``'s ``partition`` reads, by the graph's partition
    mappings (``[None]`` for an unpartitioned parent; every partition for an unpartitioned child)."""
    graph = view.asset_graph
    if graph.get(parent).partitions_def is None:
        return [None]
    subset = view.get_asset_subset_from_asset_partitions(child, {AssetKeyPartitionKey(child, partition)})
    return sorted(view.compute_parent_subset(parent, subset).expensively_compute_partition_keys())


def candidate_partitions(context: Any) -> list[str | None]:
    """The partitions an automation condition is asked about (None for an unpartitioned asset)."""
    return sorted({candidate.partition_key for candidate in context.candidate_subset.expensively_compute_asset_partitions()},
                  key=str)


def subset_of(view: AssetGraphView, asset: dg.AssetKey, partitions: Iterable[str | None]) -> Any:
    """The subset of ``asset`` holding ``partitions``, for an automation condition's result."""
    return view.get_asset_subset_from_asset_partitions(asset, {AssetKeyPartitionKey(asset, p) for p in partitions})


def all_partitions(view: AssetGraphView, asset: dg.AssetKey) -> list[str]:
    """Every partition an asset has now (dynamic partitions included)."""
    return sorted(view.get_full_subset(key=asset).expensively_compute_partition_keys())


def partition_dimensions(graph_or_assets: Any, asset: dg.AssetKey, partition: str) -> dict[str, str]:
    """A partition key by dimension (``{"model": ..., "dataset": ...}``); a one-dimensional
    partition is named by its partitions definition (``datasets``, ``sts_datasets``). The asset
    is looked up in an asset graph or an assets definition."""
    partitions_def = (graph_or_assets.partitions_def if isinstance(graph_or_assets, dg.AssetsDefinition)
                      else graph_or_assets.get(asset).partitions_def)
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return dict(partitions_def.get_partition_key_from_str(partition).keys_by_dimension)
    return {getattr(partitions_def, "name", None) or "partition": partition}



def asset_graph_of(context: Any, build: Callable[[], Any]) -> Any:
    """The whole asset graph of the code location a step runs in: its repository's, or, for a job
    executed in-process (whose step has no repository and whose own asset layer marks every
    asset outside the job's selection as not materializable), the one ``build`` returns."""
    try:
        return context.repository_def.asset_graph
    except CheckError:
        return build()


@record
class _ChecksNamed(dg.AssetSelection):
    """Every asset check of a given name, whatever its asset (to keep checks out of jobs)."""

    name: str

    def resolve_inner(self, asset_graph: Any, allow_missing: bool) -> AbstractSet[dg.AssetKey]:
        return set()

    def resolve_checks_inner(self, asset_graph: Any, allow_missing: bool) -> AbstractSet[dg.AssetCheckKey]:
        return {key for key in asset_graph.asset_check_keys if key.name == self.name}

    def to_serializable_asset_selection(self, asset_graph: Any) -> dg.AssetSelection:
        return dg.AssetSelection.checks(*sorted(self.resolve_checks_inner(asset_graph, True), key=str))


def checks_named(name: str) -> dg.AssetSelection:
    """A selection of every asset check called ``name`` (Dagster selects checks by key only)."""
    return _ChecksNamed(name=name)
