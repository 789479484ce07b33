"""Partitions: one dynamic partition per model card (``name@hash7``) times one per dataset."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.data import open_frozen
from embedpyramid.efficiency import efficiency_path
from embedpyramid.geometry.level import l1_dir
from embedpyramid.hashing import sha256_json
from embedpyramid.serving.level import serving_dir
from embedpyramid.store import ArtifactStore

MODELS = "models"
DATASETS = "datasets"

model_partitions = dg.DynamicPartitionsDefinition(name=MODELS)
dataset_partitions = dg.DynamicPartitionsDefinition(name=DATASETS)
model_dataset_partitions = dg.MultiPartitionsDefinition({"model": model_partitions, "dataset": dataset_partitions})

# Bumped whenever the computation behind an evaluation changes, so fingerprints move with it.
EVALUATION_CODE_VERSION = "1"

# The per-(model, dataset) asset groups, in dependency order. A group is recomputed as a whole
# when the fingerprint recorded on its witness (last) asset differs from the current one. L4
# has one group per index spec of ann.yaml, so changing one spec recomputes only its asset
# (and the frontier over all of them).
L2, L1, L4_FRONTIER = "l2_retrieval", "l1_geometry", "l4_frontier"
EFFICIENCY = "efficiency"
STATIC_GROUPS: dict[str, list[str]] = {
    L2: ["query_embeddings", "document_embeddings", "exact_topk", "retrieval_metrics"],
    L1: ["raw_query_embeddings", "raw_document_embeddings", "norm_geometry", "normalization_price"],
    EFFICIENCY: ["efficiency"],
}


def ann_asset_name(spec_name: str) -> str:
    """The asset of one index spec (asset names allow letters, digits and underscores)."""
    return "ann_" + re.sub(r"[^A-Za-z0-9_]", "_", spec_name)


def l4_group(spec_name: str) -> str:
    return f"l4:{spec_name}"


def partition_groups(config: ProjectConfig) -> dict[str, list[str]]:
    groups = dict(STATIC_GROUPS)
    if config.ann is not None:
        groups.update({l4_group(spec.name): [ann_asset_name(spec.name)] for spec in config.ann.specs})
        groups[L4_FRONTIER] = ["serving_frontier"]
    return groups


def model_dataset_key(model_key: str, dataset: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model_key, "dataset": dataset})


def split_key(context: dg.AssetExecutionContext) -> tuple[str, str]:
    """(model key, dataset) of the current multi-partition."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys["model"], keys["dataset"]


def group_fingerprint(config: ProjectConfig, model: ResolvedModel, dataset: str, dataset_version: str, group: str) -> str:
    """Everything a group's numbers depend on; equal fingerprints mean nothing to recompute.

    Run settings (batch size, device, threads) are left out: they do not change a vector. L2
    leaves out the comparison settings; L1 and L4 keep them (their intervals use them). An L4
    spec depends on its own spec and the L4 settings, not on the other specs; the frontier on
    all of them.
    """
    base = {
        "group": group,
        "card": model.card_hash,
        "dataset": dataset_version,
        "conventions": config.protocol.conventions(config.dataset(dataset)).as_dict(),
        "code": EVALUATION_CODE_VERSION,
    }
    if group in STATIC_GROUPS:
        return sha256_json({**base, "protocol": config.protocol.model_dump(exclude={"comparison"} if group == L2 else None)})
    assert config.ann is not None, f"group {group} needs ann.yaml"
    ann = {"settings": config.ann.settings.model_dump(mode="json"), "comparison": config.protocol.comparison.model_dump(),
           "depth": config.protocol.depth}
    if group == L4_FRONTIER:
        specs = [group_fingerprint(config, model, dataset, dataset_version, l4_group(spec.name)) for spec in config.ann.specs]
        return sha256_json({**base, **ann, "specs": specs})
    spec = config.ann.spec(group.removeprefix("l4:"))
    return sha256_json({**base, **ann, "spec": spec.model_dump(mode="json")})


def group_output(store: ArtifactStore, group: str, dataset: str, model_key: str) -> Path:
    """The file a group's witness asset writes last: present iff the group's outputs are."""
    if group == L2:
        return store.metrics_path(dataset, model_key, "exact")
    if group == L1:
        return l1_dir(store, dataset, model_key) / "price.parquet"
    if group == EFFICIENCY:
        return efficiency_path(store, dataset, model_key)
    if group == L4_FRONTIER:
        return serving_dir(store, dataset, model_key) / "frontier.parquet"
    return serving_dir(store, dataset, model_key) / group.removeprefix("l4:") / "summary.parquet"


def summary_fingerprint(config: ProjectConfig, store: ArtifactStore) -> str:
    """What the cross-model summary depends on: the comparison settings and the fingerprint of
    every current (model, dataset, group) evaluation on disk."""
    evaluations = []
    for dataset in config.datasets:
        if not (store.dataset_dir(dataset) / "manifest.json").is_file():
            continue
        version = open_frozen(store.dataset_dir(dataset)).version
        evaluations += [
            group_fingerprint(config, model, dataset, version, group)
            for model in config.models.values()
            for group in partition_groups(config)
            if group_output(store, group, dataset, model.key).is_file()
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
