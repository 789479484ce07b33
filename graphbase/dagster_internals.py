"""Every Dagster internal the project relies on, behind one small surface.

Dagster offers no public API for an asset partition's stale status and its causes (the UI reads
them through GraphQL, backed by ``CachingStaleStatusResolver``), nor for mapping one asset
partition to its parents' partitions, nor for an event log that does not build a database engine
per query. This module is the only place that imports ``dagster._``;
``tests/graph/test_dagster_internals.py`` checks its contract against the installed Dagster
(hence the pin ``dagster<1.14``: a minor release may move these names).
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from dagster._serdes import ConfigurableClassData
from dagster._time import get_current_datetime
from dagster._utils.caching_instance_queryer import CachingInstanceQueryer
from dagster_shared.check import CheckError
from dagster_shared.record import record

__all__ = ["DATA_VERSION_TAG", "DagsterStaleness", "ReusedEngineSqliteStorage", "StaleCause", "all_partitions", "asset_graph_of", "candidate_partitions", "hold_connections",
           "checks_named", "child_partitions", "graph_view", "is_sqlite_event_log", "open_sqlite_home", "parent_partitions", "partition_dimensions", "planned_partitions", "release_connections", "subset_of",
           "unpartitioned", "wipe_times"]

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


class _AssetWideQueryer(CachingInstanceQueryer):
    """Dagster's caching queryer, except that the latest record of one partition of an asset is
    read together with every other partition's of that asset: two queries per asset and event
    type (the partitions' latest storage ids, then those records) instead of one per partition.
    The record is the one Dagster's queryer returns (:meth:`_latest_records`); an unpartitioned
    asset and a record before a cursor are read as Dagster reads them."""

    CHUNK = 500
    """Storage ids per query (SQLite's default limit on bound parameters is 999)."""

    def __init__(self, view: AssetGraphView):
        super().__init__(instance=view.instance, asset_graph=view.asset_graph, loading_context=view,
                         evaluation_time=view.effective_dt)
        self._by_partition: dict[dg.AssetKey, dict[str, Any]] = {}

    def _get_latest_materialization_or_observation_record(self, *, asset_partition: AssetKeyPartitionKey,
                                                          before_cursor: int | None = None) -> Any:
        key, partition = asset_partition.asset_key, asset_partition.partition_key
        if before_cursor is not None or partition is None or not self.asset_graph.has(key):
            return super()._get_latest_materialization_or_observation_record(
                asset_partition=asset_partition, before_cursor=before_cursor)
        if key not in self._by_partition:
            self._by_partition[key] = self._latest_records(key)
        return self._by_partition[key].get(partition)

    def latest_storage_ids(self, key: dg.AssetKey, event_type: dg.DagsterEventType) -> Mapping[str, int]:
        """The storage id of the latest ``event_type`` event of every partition of ``key``, in one
        query; those of the asset's own kind of event (its materializations, an observed source's
        observations) are the ones this queryer caches for the asset."""
        if self.asset_graph.has(key) and event_type == self._event_type_for_key(key):
            own = self._get_latest_materialization_or_observation_storage_ids_by_asset_partition(asset_key=key)
            return {p.partition_key: i for p, i in own.items() if p.partition_key is not None and i is not None}
        return self.instance.get_latest_storage_id_by_partition(key, event_type)

    def _latest_records(self, key: dg.AssetKey) -> dict[str, Any]:
        """The latest materialization of every partition of ``key``; of an observable asset, the
        latest materialization or observation, whichever is later (Dagster's rule: by timestamp,
        the materialization on a tie)."""
        kinds = [self._event_type_for_key(key)]
        if self.asset_graph.get(key).is_observable:
            kinds.append(dg.DagsterEventType.ASSET_MATERIALIZATION)
        fetch = {dg.DagsterEventType.ASSET_MATERIALIZATION: self.instance.fetch_materializations,
                 dg.DagsterEventType.ASSET_OBSERVATION: self.instance.fetch_observations}
        latest: dict[str, Any] = {}
        for event_type in kinds:
            ordered = sorted(self.latest_storage_ids(key, event_type).values())
            for start in range(0, len(ordered), self.CHUNK):
                chunk = ordered[start:start + self.CHUNK]
                for found in fetch[event_type](dg.AssetRecordsFilter(asset_key=key, storage_ids=chunk), limit=len(chunk)).records:
                    before = latest.get(found.partition_key)
                    if before is None or _later(found, before):
                        latest[found.partition_key] = found
        return latest


def _later(record: Any, other: Any) -> bool:
    """Whether ``record`` is the later of two, a materialization winning a tie (Dagster's order)."""
    materialized = (lambda r: r.event_log_entry.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION)
    return (record.timestamp, materialized(record)) > (other.timestamp, materialized(other))


class _Resolver(CachingStaleStatusResolver):
    """Dagster's stale status resolver, except that whether a partitioned input changed since a
    materialization read it is first answered from the storage id of the input partition's
    latest event (read per asset by the queryer): none after the cursor the materialization
    recorded means no change, without a query per (partition, input); when there is one,
    Dagster's own comparison of the data versions before and after decides. The event is the
    one Dagster's query would look at: a materialization of a materialized input, an
    observation of an observed source (a config facet); other inputs are Dagster's to answer.

    ``pending`` holds data versions of observable sources (config facets) as they would be
    once observed, without recording them: each one is the source partition's current data
    version, and an asset that read another version has it as a stale cause, as it would after
    the observation (a read-only ``status`` of an edited config)."""

    def __init__(self, *args: Any, pending: Mapping[tuple[dg.AssetKey, str | None], str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pending = pending

    def _is_dep_updated(self, provenance: Any, dep_key: AssetKeyPartitionKey) -> bool:
        pending = self._pending.get((dep_key.asset_key, dep_key.partition_key))
        if pending is not None:
            return provenance.input_data_versions.get(dep_key.asset_key) != dg.DataVersion(pending)
        cursor = provenance.input_storage_ids.get(dep_key.asset_key)
        dep = self.asset_graph.get(dep_key.asset_key)
        if dep_key.partition_key is not None and cursor is not None and dep.is_external == dep.is_observable:
            latest = self.instance_queryer.get_latest_materialization_or_observation_storage_id(dep_key)
            if latest is None or latest <= cursor:
                return False
        return super()._is_dep_updated(provenance, dep_key)

    def _get_current_data_version(self, *, key: AssetKeyPartitionKey) -> Any:
        pending = self._pending.get((key.asset_key, key.partition_key))
        return dg.DataVersion(pending) if pending is not None else super()._get_current_data_version(key=key)


class DagsterStaleness:
    """Dagster's own, direct stale status of asset partitions (the UI's "Unsynced"): an asset
    partition is stale when its code version or the data version of one of its direct
    dependencies changed since it was materialized. One resolver caches what it reads, and it
    reads through one caching queryer: without it, Dagster's resolver asks the event log for the
    dynamic partitions (the cards) again at each partition it resolves. The queryer reads the
    graph's asset records in one query and a partition's latest materialization with every other
    partition's of its asset (:class:`_AssetWideQueryer`): the stale status of a whole graph
    asks the event log per asset, not per partition."""

    def __init__(self, view: AssetGraphView, pending: Mapping[tuple[dg.AssetKey, str | None], str] | None = None):
        self.view = view
        self._queryer = _AssetWideQueryer(view)
        self._queryer.prefetch_asset_records(view.asset_graph.get_all_asset_keys())
        self._resolver = _Resolver(view.instance, view.asset_graph, view, instance_queryer=self._queryer,
                                   pending=pending or {})

    def latest_storage_ids(self, asset: dg.AssetKey, event_type: dg.DagsterEventType) -> Mapping[str, int]:
        """The storage id of the latest ``event_type`` event of every partition of ``asset``: one
        query per asset, none for the kind the resolver has read already."""
        return self._queryer.latest_storage_ids(asset, event_type)

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


def child_partitions(view: AssetGraphView, parent: dg.AssetKey, partitions: Iterable[str | None],
                     child: dg.AssetKey) -> set[str | None]:
    """The partitions of ``child`` that read any of ``partitions`` of ``parent``, by the graph's
    partition mappings (``{None}`` for an unpartitioned child that reads one of them)."""
    subset = view.get_asset_subset_from_asset_partitions(parent, {AssetKeyPartitionKey(parent, p) for p in partitions})
    return {found.partition_key for found in view.compute_child_subset(child, subset).expensively_compute_asset_partitions()}


def planned_partitions(instance: dg.DagsterInstance, run_id: str | None, graph: Any,
                       records: Iterable[Any] | None = None) -> dict[dg.AssetKey, set[str | None] | None]:
    """The (asset, partitions) that planned-materialization ``records`` name, by default those of
    run ``run_id`` (None: every partition of the asset; a backfill plans a range in one event)."""
    if records is None:
        records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED).records
    planned: dict[dg.AssetKey, set[str | None] | None] = {}
    for planned_record in records:
        data = planned_record.event_log_entry.dagster_event.event_specific_data
        if not graph.has(data.asset_key) or planned.get(data.asset_key, ()) is None:
            continue
        if data.partition is not None or graph.get(data.asset_key).partitions_def is None:
            planned.setdefault(data.asset_key, set()).add(data.partition)  # type: ignore[union-attr]
        elif data.partitions_subset is not None:
            planned.setdefault(data.asset_key, set()).update(data.partitions_subset.get_partition_keys())  # type: ignore[union-attr]
        else:
            planned[data.asset_key] = None
    return planned


def wipe_times(instance: dg.DagsterInstance, assets: Iterable[dg.AssetKey]) -> dict[str, float]:
    """Per asset with a history, when it was last wiped (0 if never), in one query: an asset
    wiped since its last event has no history (no record) until its next event. A wipe is seen
    only so: on SQLite its event is in no shard a cursor reads."""
    return {record.asset_entry.asset_key.to_user_string():
            getattr(record.asset_entry.asset_details, "last_wipe_timestamp", None) or 0.0
            for record in instance.get_asset_records(list(assets))}


def is_sqlite_event_log(instance: dg.DagsterInstance) -> bool:
    """Whether the event log is SQLite's, which assigns ids one write at a time (Postgres assigns
    them before commit, so a lower id can become visible after a higher one)."""
    return isinstance(instance.event_log_storage, SqliteEventLogStorage)


_HOLDING: weakref.WeakSet[dg.DagsterInstance] = weakref.WeakSet()


def hold_connections(instance: dg.DagsterInstance) -> None:
    """Let a database-backed instance keep one connection open for the rest of its life.

    dagster-postgres builds its engines with SQLAlchemy's ``NullPool``: every query opens a new
    connection (about 6 ms on 127.0.0.1, more across a network and with TLS), and a freshness
    refresh or a tick asks hundreds of queries. Dagster's webserver calls
    ``optimize_for_webserver`` on its instance for this; the same call here gives the instance a
    pool of one connection (and a few overflow, without a statement timeout). A tick's instance is
    built for that one sensor evaluation and disposed after it; a CLI command's lives as long as
    the command. dagster-postgres's ``dispose`` leaves its engines alone (with ``NullPool`` there
    was nothing to close), so the instance's ``dispose`` here also closes the held connections,
    and so does its garbage collection. SQLite storages keep their own engines
    (:class:`ReusedEngineSqliteStorage`) and are left as they are; each instance is changed once."""
    if is_sqlite_event_log(instance) or instance in _HOLDING:
        return
    instance.optimize_for_webserver(statement_timeout=0, pool_recycle=3600, max_overflow=4)
    _HOLDING.add(instance)
    engines = [engine for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage)
               if (engine := getattr(storage, "_engine", None)) is not None]

    def close() -> None:
        for engine in engines:
            engine.dispose()

    weakref.finalize(instance, close)
    held = weakref.ref(instance)  # no cycle through the instance's own attribute

    def dispose_and_close() -> None:
        if (found := held()) is not None:
            type(found).dispose(found)
        close()

    instance.dispose = dispose_and_close  # type: ignore[method-assign]


def candidate_partitions(context: Any, within: Iterable[str | None] | None = None) -> list[str | None]:
    """The partitions an automation condition is asked about (None for an unpartitioned asset);
    only those ``within`` when given (intersected as Dagster's subsets, without visiting every
    candidate)."""
    subset = context.candidate_subset
    if within is not None:
        subset = subset.compute_intersection(subset_of(context.asset_graph_view, context.key, within))
    return sorted({candidate.partition_key for candidate in subset.expensively_compute_asset_partitions()}, key=str)


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


@record
class _Unpartitioned(dg.AssetSelection):
    """Every materializable asset without partitions."""

    def resolve_inner(self, asset_graph: Any, allow_missing: bool) -> AbstractSet[dg.AssetKey]:
        return {key for key in asset_graph.materializable_asset_keys if asset_graph.get(key).partitions_def is None}

    def to_serializable_asset_selection(self, asset_graph: Any) -> dg.AssetSelection:
        return dg.AssetSelection.assets(*sorted(self.resolve_inner(asset_graph, True)))


def unpartitioned() -> dg.AssetSelection:
    """A selection of every materializable asset without partitions, whatever the graph."""
    return _Unpartitioned()


class _ReusedEngineEventLog(SqliteEventLogStorage):
    """Dagster's SQLite event log, but one SQLAlchemy engine per database file (a run's, the
    index) instead of a new engine for every query, and its connection kept open between queries
    until :meth:`release`. Building an engine (its dialect, its first connect) cost more than the
    query itself, thousands of times per ``embedpyramid run`` (measured: a cold run of bench_peers
    at 1,000 documents took 25.8 CPU-s instead of 30.0, and bench_partition's whole run 4.1
    instead of 7.3); closing the connection after each query made SQLite fold the write-ahead log
    back into the database and delete it every time (bench_partition's whole run 5.45 CPU-s
    instead of 6.75 with the connections kept, AMD EPYC, 2026-12-06). The engines kept are the
    most recently used :data:`ENGINES_KEPT`.

    Kept connections leave a database's ``-wal`` and ``-shm`` files beside it, and the database
    changes again when they close: the runner releases them after every Dagster run and before it
    reads the run history's files for the warm start; every live event log releases them at exit.
    Between releases the files are in SQLite's WAL mode as Dagster sets it, so other processes
    (``dagster dev``, the daemon's runs) read and write them as before."""

    ENGINES_KEPT = 64

    def __init__(self, base_dir: str, inst_data: Any = None):
        super().__init__(base_dir, inst_data)
        self._engines: OrderedDict[str, Any] = OrderedDict()
        self._engines_lock = threading.Lock()
        self._tables: set[str] = set()
        _LIVE_EVENT_LOGS.add(self)

    def _engine(self, shard: str) -> Any:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = create_engine(self.conn_string_for_shard(shard),
                                       connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
                self._engines[shard] = engine
                while len(self._engines) > self.ENGINES_KEPT:
                    self._engines.popitem(last=False)[1].dispose()
            self._engines.move_to_end(shard)
            return engine

    def release(self) -> None:
        """Close the connections kept open (a connection in use closes when it is returned); the
        engines stay and connect again at the next query."""
        with self._engines_lock:
            for engine in self._engines.values():
                engine.dispose()

    def dispose(self) -> None:
        self.release()
        super().dispose()

    def has_table(self, table_name: str) -> bool:
        """Asked before most queries; a table once there stays (a migration only adds tables)."""
        if table_name in self._tables:
            return True
        engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as connection:
            found = bool(engine.dialect.has_table(connection, table_name))
        if found:
            self._tables.add(table_name)
        return found

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:  # Dagster's own, less the engine per call
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as connection, connection.begin():
                yield connection


_LIVE_EVENT_LOGS: weakref.WeakSet[_ReusedEngineEventLog] = weakref.WeakSet()


@atexit.register
def _release_live_event_logs() -> None:
    for event_log in list(_LIVE_EVENT_LOGS):
        event_log.release()


def release_connections(instance: dg.DagsterInstance) -> None:
    """Close the database connections the instance's event log keeps open, so that its files
    settle (no-op for any other storage)."""
    event_log = instance.event_log_storage
    if isinstance(event_log, _ReusedEngineEventLog):
        event_log.release()


class ReusedEngineSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage (the same files under ``base_dir``) with an event log that reuses
    its engines (:class:`_ReusedEngineEventLog`)."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        super().__init__(base_dir, inst_data)
        self._event_log_storage = _ReusedEngineEventLog(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> ReusedEngineSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


_DAGSTER_SQLITE = (DagsterSqliteStorage.__module__, DagsterSqliteStorage.__name__)


def open_sqlite_home(home: str) -> dg.DagsterInstance:
    """The instance of the folder ``home`` (its ``dagster.yaml``), as ``DagsterInstance.from_config``
    opens it, except that Dagster's default SQLite storage is :class:`ReusedEngineSqliteStorage`
    on the same files. The swap is made in the instance's reference, not in ``dagster.yaml``:
    the processes a run starts rebuild the instance from that reference (with this storage), the
    file names no path (a copied or moved data folder keeps its own run history, as with Dagster's
    default), and ``dagster dev`` reads the same files through Dagster's own storage. A storage
    the file names is kept when it is another class (Postgres, a custom one); a ``sqlite:``
    ``base_dir`` it names is kept too (only the class changes)."""
    ref = InstanceRef.from_dir(home)
    storage = ref.storage_data
    if storage is not None and (storage.module_name, storage.class_name) == _DAGSTER_SQLITE:
        ref = ref._replace(storage_data=ConfigurableClassData(__name__, ReusedEngineSqliteStorage.__name__, storage.config_yaml))
    return dg.DagsterInstance.from_ref(ref)
