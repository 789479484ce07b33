"""Partitions: one dynamic partition per model card *name* times one per dataset.

Why the card name and not the card key (``name@hash7``): an edited card is the same model
evaluated under new settings, and Dagster should say so — the partition ``minilm-l6`` turns
stale with the cause "config/model_card [minilm-l6] has a new data version" (the data version is
the card hash), its history (and the Plots tab) runs across the edits, and nothing is deleted
when a card changes. The card key still names every artefact (``runs/<dataset>/<card key>/``)
and every row of ``results.duckdb``, so results of an older card stay on disk as history and
are never mixed with the new card's.

A partition is deleted only when its card (or dataset) leaves the config folder the instance
is bound to (:mod:`graphbase.instance`); a process reading another folder adds, never deletes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable

import dagster as dg

from embedpyramid.config import ConfigError, ProjectConfig
from embedpyramid.config.tasks import TASK_FAMILIES
from embedpyramid.current_inputs import (
    ann_asset_name,
    pair_sanity_asset_name,
    system_asset_name,
    task_asset_name,
    task_datasets_name,
)

MODELS = "models"
DATASETS = "datasets"

model_partitions = dg.DynamicPartitionsDefinition(name=MODELS)
dataset_partitions = dg.DynamicPartitionsDefinition(name=DATASETS)
model_dataset_partitions = dg.MultiPartitionsDefinition({"model": model_partitions, "dataset": dataset_partitions})


def model_dataset_key(model: str, dataset: str) -> dg.MultiPartitionKey:
    """The partition of a card name on a dataset."""
    return dg.MultiPartitionKey({"model": model, "dataset": dataset})


def card_partition_mapping(card: str) -> dg.MultiPartitionMapping:
    """Map each (card, dataset) partition to ``card``'s partition on the same dataset: how an asset
    that reads another card's vectors (a bi-encoder rerank's ``by`` card) declares that read, so
    the lineage, the stale status and the automation follow it across partitions.

    A ``StaticPartitionMapping`` would need static partitions; the model dimension is dynamic."""
    with warnings.catch_warnings():
        # MultiPartitionMapping is beta in Dagster 1.13; it is the mapping between two
        # multi-partitioned assets that changes one dimension and keeps the other.
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.MultiPartitionMapping({
            "model": dg.DimensionPartitionMapping("model", dg.SpecificPartitionsPartitionMapping([card])),
            "dataset": dg.DimensionPartitionMapping("dataset", dg.IdentityPartitionMapping()),
        })


def split_key(context: dg.AssetExecutionContext) -> tuple[str, str]:
    """(card name, dataset) of the current multi-partition."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys["model"], keys["dataset"]


def check_ann_asset_names(spec_names: Iterable[str], where: str) -> None:
    """Refuse two spec names that would share one asset (``flat-a`` and ``flat_a``)."""
    _check_distinct_assets(spec_names, ann_asset_name, where, "indexes")


def check_system_asset_names(system_names: Iterable[str], where: str) -> None:
    """Refuse two system names that would share one asset (``rrf-a`` and ``rrf_a``)."""
    _check_distinct_assets(system_names, system_asset_name, where, "systems")


def _check_distinct_assets(names: Iterable[str], asset_name: Callable[[str], str], where: str, section: str) -> None:
    seen: dict[str, str] = {}
    for name in names:
        asset = asset_name(name)
        if asset in seen:
            raise ConfigError(
                f"{where}: {section}.{seen[asset]} and {section}.{name} both become the asset {asset} "
                "('-' and '.' map to '_'); rename one of them"
            )
        seen[asset] = name


def partition_sync(instance: dg.DagsterInstance, config: ProjectConfig) -> dict[str, tuple[list[str], list[str]]]:
    """Per dynamic dimension, the (keys to add, keys to delete) that make it match ``config``.

    A ``published`` dataset (published scores only, no data on disk) is not a partition. A card
    or dataset that left the config is deleted as a partition; its materialization history and
    artefacts stay. Callers delete only for the config the instance is bound to.
    """
    wanted = {MODELS: list(config.models), DATASETS: config.datasets_with_data(),
              **{task_datasets_name(family): config.family_datasets(family) for family in TASK_FAMILIES}}
    changes = {}
    for name, keys in wanted.items():
        existing = set(instance.get_dynamic_partitions(name))
        changes[name] = ([k for k in keys if k not in existing], sorted(existing - set(keys)))
    return changes


PAIR_FAMILIES = ("sts", "pair_classification", "bitext")
"""The task families whose datasets have pairs (each has an L1 pair sanity asset)."""


def task_family_assets(family: str) -> list[str]:
    """The assets on one family's partitions, upstream first: its frozen datasets, its embeddings,
    its task, its pair sanity."""
    return [f"frozen_{family}_dataset", f"{family}_embeddings", task_asset_name(family),
            *([pair_sanity_asset_name(family)] if family in PAIR_FAMILIES else [])]


task_dataset_partitions = {family: dg.DynamicPartitionsDefinition(name=task_datasets_name(family))
                           for family in TASK_FAMILIES}
task_partitions = {family: dg.MultiPartitionsDefinition({"model": model_partitions, "dataset": partitions})
                   for family, partitions in task_dataset_partitions.items()}
"""Per task family: model × that family's datasets (keys are card names and dataset names)."""


def apply_partition_sync(instance: dg.DagsterInstance, config: ProjectConfig, *, delete: bool) -> list[str]:
    """Add the config's cards and datasets as partitions (and delete those it lacks, if
    ``delete``); return what was deleted ("models: old-card")."""
    deleted = []
    for name, (add, removed) in partition_sync(instance, config).items():
        if add:
            instance.add_dynamic_partitions(name, add)
        for key in removed if delete else []:
            instance.delete_dynamic_partition(name, key)
            deleted.append(f"{name}: {key}")
    return deleted
