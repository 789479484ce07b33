"""Materialize the evaluation graph in-process: the same assets the Dagster UI shows.

One Dagster run per partition, in dependency order: each selected dataset is frozen, each
(model, dataset) partition goes through its asset groups (L2: embeddings → exact top-k →
retrieval metrics; L1: raw embeddings → geometry, normalization price; L4: one asset per
index spec, then the frontier), then the comparisons,
the results database and the report are rebuilt in one run. Like "materialize stale and
missing": a group whose fingerprint (card hash, dataset version, protocol, code version)
matches its latest materialization is skipped, a dataset whose content hash matches its
latest materialization is not re-frozen, and the summary is rebuilt only when an evaluation
or the comparison settings changed. A failing partition is reported and does not stop the
others; what was already written stays.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from assets.embeddings import ensure_encoder_pool
from embedpyramid.config import ConfigError, ProjectConfig, load_config
from embedpyramid.data import dataset_version, load_configured_dataset, open_frozen, table_hashes
from embedpyramid.store import ArtifactStore
from pipelines.definitions import SUMMARY_ASSETS, build_definitions
from pipelines.partitions import (
    apply_partition_sync,
    group_fingerprint,
    group_output,
    model_dataset_key,
    partition_groups,
    summary_fingerprint,
)

# Dagster's per-event log lines drown the progress bars; every event stays in the instance (the UI).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class RunReport:
    """What one invocation did: partitions materialized or skipped, the asset groups recomputed,
    the embedding tables encoded (``query``, ``document``, ``raw_query``, ``raw_document``), failures."""

    frozen: list[str] = field(default_factory=list)
    materialized: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    encoded: list[tuple[str, str, str]] = field(default_factory=list)
    groups: list[tuple[str, str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    summary_built: bool = False


def open_instance(data_dir: Path) -> dg.DagsterInstance:
    """``$DAGSTER_HOME`` when set, else a persistent instance in ``<data>/dagster_home``.

    Point ``DAGSTER_HOME`` at the same folder for ``dagster dev`` to see the CLI's history.
    """
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    home = data_dir / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").touch()
    return dg.DagsterInstance.from_config(str(home))


def _select(requested: Sequence[str] | None, available: Sequence[str], what: str, file: Path) -> list[str]:
    if not requested:
        return list(available)
    unknown = [name for name in requested if name not in available]
    if unknown:
        raise ConfigError(f"unknown {what} {unknown}; {file} defines: {', '.join(available)}")
    return list(requested)


def _latest_materialization(
    instance: dg.DagsterInstance, asset: str, partition: str | None
) -> dg.AssetMaterialization | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].asset_materialization if records else None


def run_pipeline(
    configs_dir: str | Path,
    data_dir: str | Path,
    *,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    instance: dg.DagsterInstance | None = None,
    log: Callable[[str], None] = print,
) -> RunReport:
    """Bring the selected partitions up to date and rebuild the results database."""
    config: ProjectConfig = load_config(configs_dir)
    store = ArtifactStore(Path(data_dir).expanduser().resolve())
    model_names = _select(models, list(config.models), "models", config.directory / "models.yaml")
    dataset_names = _select(datasets, list(config.datasets), "datasets", config.directory / "datasets.yaml")
    instance = instance or open_instance(store.root)
    ensure_encoder_pool(instance)
    apply_partition_sync(instance, config)
    defs = build_definitions(config.directory, store.root)
    assets, resources = list(defs.assets or []), dict(defs.resources or {})
    report = RunReport()
    groups = partition_groups(config)

    def materialize(selection: list[str], partition_key: str | dg.MultiPartitionKey | None) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            assets, selection=selection, partition_key=partition_key, resources=resources,
            instance=instance, raise_on_error=False, run_config=QUIET_LOGS,
        )

    for dataset in dataset_names:
        latest_frozen = _latest_materialization(instance, "frozen_dataset", dataset)
        recorded = latest_frozen.tags.get("dagster/data_version") if latest_frozen is not None else None
        frozen_ok = recorded is not None and (store.dataset_dir(dataset) / "manifest.json").is_file()
        if frozen_ok and dataset_version(table_hashes(load_configured_dataset(config, dataset))) == recorded:
            log(f"dataset {dataset}: unchanged (version {recorded[:12]})")
        else:
            log(f"dataset {dataset}: freezing")
            result = materialize(["frozen_dataset"], dataset)
            if not result.success:
                report.failures.append(f"frozen_dataset[{dataset}]: {_failure(result)}")
                continue
            report.frozen.append(dataset)
        version = open_frozen(store.dataset_dir(dataset)).version
        for name in model_names:
            model = config.models[name]
            key = model_dataset_key(model.key, dataset)
            stale = []
            for group, group_assets in groups.items():
                latest = _latest_materialization(instance, group_assets[-1], key)
                recorded = latest.metadata.get("fingerprint") if latest is not None else None
                current = group_fingerprint(config, model, dataset, version, group)
                if recorded is None or recorded.value != current or not group_output(store, group, dataset, model.key).is_file():
                    stale.append(group)
            if not stale:
                log(f"{model.key} × {dataset}: up to date")
                report.skipped.append((model.key, dataset))
                continue
            selection = [asset for group in stale for asset in groups[group]]
            log(f"{model.key} × {dataset}: materializing {', '.join(selection)}")
            result = materialize(selection, key)
            for event in result.get_asset_materialization_events():
                materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
                cache_hit = materialization.metadata.get("cache_hit")
                if cache_hit is not None and not cache_hit.value:
                    report.encoded.append((model.key, dataset, materialization.asset_key.path[-1].removesuffix("_embeddings")))
            report.groups.extend((model.key, dataset, group) for group in stale)
            if result.success:
                report.materialized.append((model.key, dataset))
            else:
                report.failures.append(f"{model.key} × {dataset}: {_failure(result)}")
    # The report is the last summary asset: its recorded fingerprint vouches for all three.
    latest_summary = _latest_materialization(instance, SUMMARY_ASSETS[-1], None)
    recorded_summary = latest_summary.metadata.get("fingerprint") if latest_summary is not None else None
    summary_current = (
        recorded_summary is not None and recorded_summary.value == summary_fingerprint(config, store)
        and store.results_db.is_file()
    )
    if not summary_current:
        result = materialize(SUMMARY_ASSETS, None)
        report.summary_built = result.success
        if not result.success:
            report.failures.append(f"summary: {_failure(result)}")
    return report


def _failure(result: dg.ExecuteInProcessResult) -> str:
    """Why a run failed: its failed blocking checks with their findings, else the error raised
    in the asset (the user-code exception, not Dagster's wrapper)."""
    checks = []
    for event in result.all_events:
        evaluation = getattr(event.event_specific_data, "asset_check_evaluation", None) or event.event_specific_data
        if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            checks.append(f"blocking check {evaluation.check_name} on {evaluation.asset_key.to_user_string()} failed: "
                          + "; ".join(problems.value if problems else []))
    if checks:
        return " | ".join(checks)
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            error = error.cause if error is not None and error.cause is not None else error
            return error.message.strip() if error is not None else "step failed"
    return "run failed"
