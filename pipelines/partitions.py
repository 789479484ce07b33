"""Partitions: one dynamic partition per model card (``name@hash7``) times one per dataset."""

from __future__ import annotations

import dagster as dg

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.hashing import sha256_json

MODELS = "models"
DATASETS = "datasets"

model_partitions = dg.DynamicPartitionsDefinition(name=MODELS)
dataset_partitions = dg.DynamicPartitionsDefinition(name=DATASETS)
model_dataset_partitions = dg.MultiPartitionsDefinition({"model": model_partitions, "dataset": dataset_partitions})

# Bumped whenever the computation behind an evaluation changes, so fingerprints move with it.
EVALUATION_CODE_VERSION = "1"


def model_dataset_key(model_key: str, dataset: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model_key, "dataset": dataset})


def split_key(context: dg.AssetExecutionContext) -> tuple[str, str]:
    """(model key, dataset) of the current multi-partition."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys["model"], keys["dataset"]


def evaluation_fingerprint(config: ProjectConfig, model: ResolvedModel, dataset: str, dataset_version: str) -> str:
    """Everything an evaluation's numbers depend on; equal fingerprints mean nothing to recompute.

    Run settings (batch size, device, threads) are left out: they do not change a vector.
    """
    return sha256_json({
        "card": model.card_hash,
        "dataset": dataset_version,
        "protocol": config.protocol.model_dump(),
        "conventions": config.protocol.conventions(config.dataset(dataset)).as_dict(),
        "code": EVALUATION_CODE_VERSION,
    })


def partition_sync(instance: dg.DagsterInstance, config: ProjectConfig) -> dict[str, tuple[list[str], list[str]]]:
    """Per dynamic dimension, the (keys to add, keys to delete) that make it match the config.

    Cards that left ``models.yaml`` (or changed, and so changed key) are deleted as partitions;
    their artefacts and materialization history stay.
    """
    wanted = {MODELS: [m.key for m in config.models.values()], DATASETS: list(config.datasets)}
    changes = {}
    for name, keys in wanted.items():
        existing = set(instance.get_dynamic_partitions(name))
        changes[name] = ([k for k in keys if k not in existing], sorted(existing - set(keys)))
    return changes


def apply_partition_sync(instance: dg.DagsterInstance, config: ProjectConfig) -> None:
    for name, (add, delete) in partition_sync(instance, config).items():
        if add:
            instance.add_dynamic_partitions(name, add)
        for key in delete:
            instance.delete_dynamic_partition(name, key)
