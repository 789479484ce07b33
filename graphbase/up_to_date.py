"""The ``up_to_date`` asset checks: per asset, WARN while any partition is stale, missing or failed
(the UI shows staleness per partition only), recorded by the CLI and the config sensor and runnable
from the UI; and the registry of how an in-process step finds its whole asset graph."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import dagster as dg

from graphbase.dagster_internals import (
    all_partitions,
    asset_graph_of,
)
from graphbase.freshness import Freshness
from graphbase.freshness_store import kept_freshness

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
    freshness = freshness or kept_freshness(instance, asset_graph)
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
        freshness = kept_freshness(context.instance, graph)
        selected = sorted({key.asset_key for key in context.selected_asset_check_keys})
        for evaluation in up_to_date_evaluations(freshness, selected):
            yield dg.AssetCheckResult(asset_key=evaluation.asset_key, check_name=UP_TO_DATE, passed=evaluation.passed,
                                      severity=evaluation.severity, description=evaluation.description,
                                      metadata=evaluation.metadata)

    return checks


