"""The state of every (asset, partition), kept in the instance and brought up to date from what
the event log recorded since, so that a tick, a ``status`` or a wave of ``run`` costs what
changed instead of everything that exists.

One value of the instance's key-value storage (beside the run storage, on SQLite and Postgres
alike; written in one statement, so states and cursor never disagree) holds

- ``cursor``: the event-log record id every kept state reflects;
- ``seen``: the ids above the cursor of the events already applied (Postgres: see below);
- ``assets``: each materializable asset's signature (code version, parents, partitions);
- ``dynamic``: the keys of every dynamic partitions definition (cards, datasets);
- ``wiped``: when each asset's history was last wiped (or that it has none);
- ``states``: every (asset, partition) that is not fresh, with its state, causes and whether it
  is stale directly; a partition not listed is fresh (each cause text is kept once).

:func:`kept_freshness` reads the maximum record id: with the same cursor, signatures and
dynamic keys, every state is the kept one and nothing is asked of Dagster. Otherwise only what
changed is recomputed by the full walk's own rules (:class:`~graphbase.freshness.Freshness`,
seeded with the kept states of everything else):

- the partitions named by the events after the cursor (materializations, observations of
  config facets, failed and planned materializations) and those planned by runs that failed or
  were canceled since;
- every partition of an asset wiped since;
- every partition of an asset whose signature changed (a code change marks that asset once);
- the partitions holding a new card or dataset, and every summary when one left;
- for ``status``, the config facets it reads as observed and the runs it reads as failed;

and everything downstream of those through the graph's partition mappings. On Postgres, ids
can commit out of order, so the cursor stays :data:`SETTLE_SECONDS` behind: the events of that
window are read again at each refresh until they are older, and only those not ``seen`` yet (a
lower id that committed late) mark partitions (SQLite writes one at a time).

A full walk is the reference: :func:`reconcile` compares the two (the ``freshness_reconcile``
schedule fails loudly on any difference and keeps the walk's answer), and
``tests/graph/test_freshness_store.py`` replays random event sequences against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from graphbase.dagster_internals import (
    all_partitions,
    child_partitions,
    hold_connections,
    is_sqlite_event_log,
    planned_partitions,
    wipe_times,
)
from graphbase.freshness import AssetState, Freshness, KeptStates

STORE_KEY = "embedpyramid/freshness"
FORMAT = 2
SETTLE_SECONDS = 60.0
"""How long an event may take to commit after a later id did, on a database that assigns ids
before commit (Postgres): the cursor waits that long behind the newest id."""

PARTITION_EVENTS = (
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_OBSERVATION,
    dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
)
"""The events that change an (asset, partition)'s state, besides a run failing or being canceled."""
RUN_ENDS = (dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED)

Pair = tuple[dg.AssetKey, str | None]


@dataclass
class _Stored:
    cursor: int
    assets: dict[str, str]
    dynamic: dict[str, list[str]]
    wiped: dict[str, float]
    states: dict[Pair, AssetState]
    seen: list[int]

    def dump(self) -> str:
        causes: dict[tuple[str, ...], int] = {}
        rows = [[state.asset, state.partition, state.state, state.direct,
                 causes.setdefault(state.causes, len(causes))] for state in self.states.values()]
        return json.dumps({"format": FORMAT, "cursor": self.cursor, "assets": self.assets, "dynamic": self.dynamic, "wiped": self.wiped,
                           "seen": self.seen, "causes": [list(cause) for cause in causes], "states": rows}, separators=(",", ":"))

    @classmethod
    def load(cls, text: str | None) -> _Stored | None:
        if not text:
            return None
        value = json.loads(text)
        if value.get("format") != FORMAT:
            return None
        causes = [tuple(cause) for cause in value["causes"]]
        states = {(dg.AssetKey.from_user_string(asset), partition):
                  AssetState(asset, partition, state, causes[cause], direct)
                  for asset, partition, state, direct, cause in value["states"]}
        return cls(value["cursor"], value["assets"], value["dynamic"], value["wiped"], states, value["seen"])


def _read(instance: dg.DagsterInstance) -> _Stored | None:
    return _Stored.load(instance.daemon_cursor_storage.get_cursor_values({STORE_KEY}).get(STORE_KEY))


def _write(instance: dg.DagsterInstance, stored: _Stored) -> None:
    instance.daemon_cursor_storage.set_cursor_values({STORE_KEY: stored.dump()})


def _materializable(graph: Any) -> list[dg.AssetKey]:
    return [key for key in graph.toposorted_asset_keys if graph.get(key).is_materializable]


def asset_signatures(graph: Any) -> dict[str, str]:
    """What an asset's states depend on besides the event log: its code version, its parents and
    how it is partitioned."""
    signatures = {}
    for key in _materializable(graph):
        node = graph.get(key)
        definition = node.partitions_def
        dimensions = ([f"{d.name}:{type(d.partitions_def).__name__}:{getattr(d.partitions_def, 'name', None)}"
                       for d in definition.partitions_defs] if isinstance(definition, dg.MultiPartitionsDefinition)
                      else [f"{type(definition).__name__}:{getattr(definition, 'name', None)}"])
        signatures[key.to_user_string()] = json.dumps(
            [node.code_version, sorted(parent.to_user_string() for parent in node.parent_keys), dimensions])
    return signatures


def _dynamic_definitions(graph: Any) -> list[str]:
    names = set()
    for key in graph.get_all_asset_keys():
        definition = graph.get(key).partitions_def
        for one in (definition.partitions_defs if isinstance(definition, dg.MultiPartitionsDefinition) else [definition]):
            definition_of = getattr(one, "partitions_def", one)
            if isinstance(definition_of, dg.DynamicPartitionsDefinition):
                names.add(definition_of.name)
    return sorted(names)


def _dynamic_keys(instance: dg.DagsterInstance, graph: Any) -> dict[str, list[str]]:
    return {name: sorted(instance.get_dynamic_partitions(name)) for name in _dynamic_definitions(graph)}


def kept_freshness(instance: dg.DagsterInstance, asset_graph: Any, *,
                   pending: Mapping[Pair, str] | None = None, abandoned: frozenset[str] = frozenset(),
                   record: bool = True) -> Freshness:
    """The states of every (asset, partition) now: the kept ones brought up to date with what
    changed since (the module's rules), written back unless ``record`` is false (``status``,
    whose ``pending`` facet versions and ``abandoned`` runs are read as if recorded)."""
    hold_connections(instance)
    mark = instance.event_log_storage.get_maximum_record_id() or 0
    stored = _read(instance)
    signatures, dynamic = asset_signatures(asset_graph), _dynamic_keys(instance, asset_graph)
    wiped = wipe_times(instance, _materializable(asset_graph))
    if stored is None:
        freshness = Freshness(instance, asset_graph, pending=pending, abandoned=abandoned)
        states = _walk(freshness)
        if record:
            _write(instance, _Stored(_settled(instance, mark, 0), signatures, dynamic, wiped, states, []))
        return freshness
    kept = KeptStates(stored.states)
    freshness = Freshness(instance, asset_graph, pending=pending, abandoned=abandoned, kept=kept)
    if (stored.cursor == mark and stored.assets == signatures and stored.dynamic == dynamic
            and stored.wiped == wiped and not pending and not abandoned):
        return freshness
    kept.dirty, read = _dirty(freshness, stored, signatures, dynamic, wiped, pending or {}, abandoned)
    gone = _partitions_of_keys(asset_graph, _removed(stored.dynamic, dynamic), {**stored.dynamic, **dynamic})
    states = {pair: state for pair, state in stored.states.items()
              if pair not in kept.dirty and asset_graph.has(pair[0]) and pair[1] not in gone.get(pair[0], ())}
    for asset, partition in sorted(kept.dirty, key=_topological(asset_graph)):
        found = freshness.state(asset, partition)
        if found.needs_work:
            states[(asset, partition)] = found
    if record:  # the settled cursor costs queries on Postgres: only for a refresh that writes
        cursor = _settled(instance, mark, stored.cursor)
        kept_now = _Stored(cursor, signatures, dynamic, wiped, states, sorted(i for i in {*stored.seen, *read} if i > cursor))
        if kept_now != stored:
            _write(instance, kept_now)
    return freshness


def _settled(instance: dg.DagsterInstance, mark: int, cursor: int) -> int:
    """The cursor to keep after reading up to ``mark``: ``mark`` on SQLite, which commits one
    write at a time; elsewhere the newest id, of an event that changes a state, recorded at
    least :data:`SETTLE_SECONDS` ago (a lower id cannot still be uncommitted), and never below
    ``cursor``."""
    if is_sqlite_event_log(instance):
        return mark
    before = time.time() - SETTLE_SECONDS
    newest = [records[0].storage_id for event_type in PARTITION_EVENTS
              if (records := instance.event_log_storage.get_event_records(
                  dg.EventRecordsFilter(event_type, before_timestamp=before), limit=1, ascending=False))]
    newest += [records[0].storage_id for event_type in RUN_ENDS
               if (records := _run_ends(instance, event_type, before_timestamp=before, limit=1))]
    return max([cursor, *(min(mark, newest_id) for newest_id in newest)])


def _run_ends(instance: dg.DagsterInstance, event_type: dg.DagsterEventType, *, limit: int | None = None,
              **where: Any) -> list[Any]:
    """The run failures (or cancellations) ``where`` selects, newest first (``limit`` of them)."""
    found: list[Any] = []
    cursor = None
    while limit is None or len(found) < limit:
        page = instance.fetch_run_status_changes(dg.RunStatusChangeRecordsFilter(event_type, **where),
                                                 limit=limit or 1000, cursor=cursor)
        found += page.records
        if not page.has_more:
            break
        cursor = page.cursor
    return found


def _topological(graph: Any) -> Any:
    order = {key: index for index, key in enumerate(graph.toposorted_asset_keys)}
    return lambda pair: (order[pair[0]], str(pair[1]))


def _walk(freshness: Freshness) -> dict[Pair, AssetState]:
    """The full walk: the state of every partition of every materializable asset, those not
    fresh kept."""
    states = {}
    for asset in _materializable(freshness.graph):
        partitions = all_partitions(freshness.view, asset) if freshness.graph.get(asset).partitions_def else [None]
        for partition in partitions:
            found = freshness.state(asset, partition)
            if found.needs_work:
                states[(asset, partition)] = found
    return states


def _removed(before: Mapping[str, list[str]], now: Mapping[str, list[str]]) -> dict[str, set[str]]:
    return {name: gone for name, keys in before.items() if (gone := set(keys) - set(now.get(name, ())))}


def _partitions_of_keys(graph: Any, keys: Mapping[str, set[str]],
                        universe: Mapping[str, list[str]]) -> dict[dg.AssetKey, set[str]]:
    """Per materializable asset, its partitions that hold one of ``keys`` (dynamic partitions
    definition -> keys); the other dimension of a two-dimensional partition takes every key of
    ``universe`` (or of its static definition)."""
    if not keys:
        return {}
    found: dict[dg.AssetKey, set[str]] = {}
    for asset in _materializable(graph):
        definition = graph.get(asset).partitions_def
        if isinstance(definition, dg.DynamicPartitionsDefinition) and definition.name in keys:
            found[asset] = set(keys[definition.name])
        elif isinstance(definition, dg.MultiPartitionsDefinition):
            dimensions = [(d.name, d.partitions_def) for d in definition.partitions_defs]
            every = {name: (universe.get(part.name, []) if isinstance(part, dg.DynamicPartitionsDefinition)
                            else part.get_partition_keys()) for name, part in dimensions}
            for name, part in dimensions:
                if isinstance(part, dg.DynamicPartitionsDefinition) and part.name in keys:
                    (other, _), = [(n, p) for n, p in dimensions if n != name]
                    found.setdefault(asset, set()).update(
                        str(dg.MultiPartitionKey({name: key, other: other_key}))
                        for key in keys[part.name] for other_key in every[other])
    return found


def _dirty(freshness: Freshness, stored: _Stored, signatures: Mapping[str, str], dynamic: Mapping[str, list[str]],
           wiped: Mapping[str, float], pending: Mapping[Pair, str], abandoned: frozenset[str]) -> tuple[set[Pair], set[int]]:
    """Every (asset, partition) whose state may differ from the kept one, downstream included,
    and the ids of the events read after the kept cursor."""
    instance, graph, view = freshness.instance, freshness.graph, freshness.view
    seeds: dict[dg.AssetKey, set[str | None]] = {}

    def add(asset: dg.AssetKey, partitions: Iterable[str | None] | None) -> None:
        if not graph.has(asset):
            return
        if partitions is None or graph.get(asset).partitions_def is None:
            partitions = all_partitions(view, asset) if graph.get(asset).partitions_def is not None else [None]
        seeds.setdefault(asset, set()).update(partitions)

    for name, signature in signatures.items():
        if stored.assets.get(name) != signature or stored.wiped.get(name) != wiped.get(name):
            add(dg.AssetKey.from_user_string(name), None)
    for asset, partitions in _partitions_of_keys(graph, _removed(dynamic, stored.dynamic), dynamic).items():
        add(asset, partitions)
    if _removed(stored.dynamic, dynamic):
        for asset in _materializable(graph):
            if freshness.is_summary(asset):
                add(asset, None)
    read = _recorded_since(instance, stored.cursor, set(stored.seen), graph, add)
    for asset, partition in pending:
        add(asset, [partition])
    for run_id in abandoned:
        for asset, partitions in planned_partitions(instance, run_id, graph).items():
            add(asset, partitions)
    return _downstream(freshness, seeds), read


def _recorded_since(instance: dg.DagsterInstance, cursor: int, seen: set[int], graph: Any,
                    add: Callable[[dg.AssetKey, Iterable[str | None] | None], None]) -> set[int]:
    """``add`` each (asset, partitions) the events after ``cursor`` name (None: every partition),
    and those planned by the runs that failed or were canceled since, leaving out the events
    ``seen`` (applied at an earlier refresh); returns the ids of every event read."""
    read: set[int] = set()
    for event_type in PARTITION_EVENTS:
        for record in instance.event_log_storage.get_event_records(dg.EventRecordsFilter(event_type, after_cursor=cursor)):
            read.add(record.storage_id)
            if record.asset_key is None or record.storage_id in seen:
                continue
            if event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED:
                for asset, partitions in planned_partitions(instance, None, graph, [record]).items():
                    add(asset, partitions)
            else:
                add(record.asset_key, [record.partition_key])
    for event_type in RUN_ENDS:
        for record in _run_ends(instance, event_type, after_storage_id=cursor):
            read.add(record.storage_id)
            if record.storage_id in seen:
                continue
            for asset, partitions in planned_partitions(instance, record.run_id, graph).items():
                add(asset, partitions)
    return read


def _downstream(freshness: Freshness, seeds: Mapping[dg.AssetKey, set[str | None]]) -> set[Pair]:
    """``seeds`` and every partition downstream of them, through the graph's partition mappings;
    of materializable assets only (the config facets have no state)."""
    graph = freshness.graph
    reached = {asset: set(partitions) for asset, partitions in seeds.items()}
    for asset in graph.toposorted_asset_keys:
        partitions = reached.get(asset)
        if not partitions:
            continue
        for child in sorted(graph.get(asset).child_keys):
            if graph.has(child):
                reached.setdefault(child, set()).update(child_partitions(freshness.view, asset, partitions, child))
    return {(asset, partition) for asset, partitions in reached.items()
            if graph.get(asset).is_materializable for partition in partitions}


def every_fresh(freshness: Freshness, asked: Iterable[tuple[str, str | None]]) -> bool:
    """Whether every asked (asset, partition) is fresh."""
    return all(state.state == "fresh" for state in freshness.states(
        [(dg.AssetKey.from_user_string(asset), partition) for asset, partition in asked]))


def reconcile(instance: dg.DagsterInstance, asset_graph: Any) -> list[str]:
    """The (asset, partition)s whose kept state differs from a full walk's, each with both; the
    walk's states are then kept (so a difference is reported once and repaired)."""
    mark = instance.event_log_storage.get_maximum_record_id() or 0
    kept = kept_freshness(instance, asset_graph)
    walked = Freshness(instance, asset_graph)
    states = _walk(walked)
    differences = []
    for asset in _materializable(asset_graph):
        partitions = all_partitions(walked.view, asset) if asset_graph.get(asset).partitions_def else [None]
        for partition in partitions:
            a, b = kept.state(asset, partition), walked.state(asset, partition)
            if (a.state, a.direct, a.causes) != (b.state, b.direct, b.causes):
                differences.append(f"{b.asset}{f' [{partition}]' if partition else ''}: kept {_said(a)}, "
                                   f"a full walk finds {_said(b)}")
    if differences:
        _write(instance, _Stored(_settled(instance, mark, 0), asset_signatures(asset_graph),
                                 _dynamic_keys(instance, asset_graph), wipe_times(instance, _materializable(asset_graph)),
                                 states, []))
    return differences


def _said(state: AssetState) -> str:
    return state.state + ("" if state.direct else " (waiting upstream)") + (f" ({'; '.join(state.causes)})"
                                                                            if state.causes else "")
