"""Partitions: one dynamic partition per model card (``name@hash7``) times one per dataset."""

from __future__ import annotations

import dagster as dg

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.data import open_frozen
from embedpyramid.hashing import sha256_json
from embedpyramid.store import ArtifactStore

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

    Run settings (batch size, device, threads) and the comparison settings are left out: they
    change no per-partition number.
    """
    return sha256_json({
        "card": model.card_hash,
        "dataset": dataset_version,
        "protocol": config.protocol.model_dump(exclude={"comparison"}),
        "conventions": config.protocol.conventions(config.dataset(dataset)).as_dict(),
        "code": EVALUATION_CODE_VERSION,
    })


def summary_fingerprint(config: ProjectConfig, store: ArtifactStore) -> str:
    """What the cross-model summary depends on: the comparison settings and the fingerprint of
    every current (model, dataset) evaluation on disk."""
    evaluations = []
    for dataset in config.datasets:
        manifest = store.dataset_dir(dataset) / "manifest.json"
        if not manifest.is_file():
            continue
        version = open_frozen(store.dataset_dir(dataset)).version
        evaluations += [
            evaluation_fingerprint(config, model, dataset, version)
            for model in config.models.values()
            if store.metrics_path(dataset, model.key, "exact").is_file()
        ]
    return sha256_json({"comparison": config.protocol.comparison.model_dump(), "baseline": config.baseline.key,
                        "evaluations": sorted(evaluations), "code": EVALUATION_CODE_VERSION})


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
