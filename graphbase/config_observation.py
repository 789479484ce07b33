"""The config folder as Dagster sees it: each facet an observable source asset whose data version
is the sha256 of its fragment (:mod:`graphbase.facets`), the observations that bring Dagster's
versions up to date with a folder, and the provenance record an asset partition writes of the
facet versions it read."""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg

from embedpyramid.config import ProjectConfig
from embedpyramid.store import ArtifactStore, read_json
from graphbase.dagster_internals import (
    DATA_VERSION_TAG,
    partition_dimensions,
)
from graphbase.facets import CONFIG, Facet, facet_partition, project_facets
from graphbase.freshness import partition_label
from graphbase.partitions import (
    dataset_partitions,
    model_partitions,
    task_dataset_partitions,
)


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
            versions[partition_label(dep, partition)] = facets[dep].version(config, partition)[0]
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


