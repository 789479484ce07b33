"""Unattended operation: the config sensor, declarative automation, the nightly schedules.

- ``config_sensor`` (every 30 s, or every ``$EMBEDPYRAMID_SENSOR_INTERVAL`` seconds) keeps
  Dagster in step with the config folder the instance is bound to: it registers new cards and
  datasets as partitions (and deletes those removed from that folder), reports changed config
  facets as observations, and records the ``config/folder`` check ``loads`` — failed, with the
  file and key, when the folder does not validate (the tick then fails with the same message).
- ``evaluation_automation`` (as often) evaluates every asset's condition
  (:mod:`graphbase.freshness`): a partition is requested when it is missing or stale — exactly
  the partitions ``embedpyramid run`` would materialize — so a new card is backfilled, an edited
  one re-evaluated, and identical data re-frozen moves nothing.
- ``nightly_refresh`` and ``nightly_refresh_<family>`` (02:00) re-freeze every dataset with data,
  retrieval and task datasets alike (identical data requests nothing downstream);
  ``nightly_summary`` (04:00) rebuilds the summaries whose inputs changed, and nothing otherwise.
- ``freshness_reconcile`` (03:00) compares the states the instance keeps with a full walk of
  Dagster's stale status and fails, naming each partition that differs, when they disagree (the
  walk's answer is kept from then on).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TypeVar

import dagster as dg

from embedpyramid.config import ConfigError, ProjectConfig, load_config
from graphbase.config_observation import config_observations
from graphbase.dagster_internals import checks_named
from graphbase.facets import CONFIG
from graphbase.freshness_store import kept_freshness, reconcile
from graphbase.instance import bound_to, read_binding
from graphbase.partitions import DATASETS, TASK_FAMILIES, partition_sync, task_datasets_name, task_family_assets
from graphbase.tags import DATASET_LEVEL_TAG, STAGE_TAG, SUMMARY_STAGE
from graphbase.up_to_date import UP_TO_DATE, report_up_to_date
from resources import ProjectResource

CONFIG_FOLDER = dg.AssetKey([CONFIG, "folder"])
CONFIG_CHECK = "loads"
SUMMARY_ASSETS = ["comparisons", "results_db", "comparison_report", "benchmark_transfer", "task_comparisons"]
summary_selection = dg.AssetSelection.assets(*SUMMARY_ASSETS) | dg.AssetSelection.tag(STAGE_TAG, SUMMARY_STAGE)
# Carried by every run the automation launches, for queue limits (docs/instance/*.yaml).
AUTOMATION_TAG = "embedpyramid/automation"
# Seconds between two ticks of config_sensor and evaluation_automation, unless $EMBEDPYRAMID_SENSOR_INTERVAL
# sets another (pipelines/settings.py).
DEFAULT_SENSOR_INTERVAL = 30

config_folder = dg.AssetSpec(
    CONFIG_FOLDER, group_name=CONFIG, kinds={"yaml"},
    description="The config folder (models.yaml, datasets.yaml, protocol.yaml, ann.yaml) the instance is bound to; "
                "its facets are the config/* assets.",
)


@dg.asset_check(asset=CONFIG_FOLDER, name=CONFIG_CHECK, description="The config folder loads and validates")
def config_loads(project: ProjectResource) -> dg.AssetCheckResult:
    config, metadata = check_config(project.configs_dir)
    return dg.AssetCheckResult(passed=config is not None, metadata=metadata)


def check_config(configs_dir: str | Path) -> tuple[ProjectConfig | None, dict[str, dg.MetadataValue]]:
    """The loaded folder and what it holds, or None and the error (file, key, rule)."""
    try:
        config = load_config(configs_dir)
    except ConfigError as error:
        return None, {"error": dg.MetadataValue.text(str(error))}
    return config, {
        "config_folder": dg.MetadataValue.path(str(config.directory)),
        "cards": dg.MetadataValue.json({name: model.key for name, model in config.models.items()}),
        "datasets": dg.MetadataValue.json(list(config.datasets)),
    }


def sync_config_folder(context: dg.SensorEvaluationContext, project: ProjectResource) -> dg.SensorResult:
    """Register cards and datasets as partitions, report changed config facets, check the folder."""
    instance, configs = context.instance, Path(project.configs_dir).expanduser().resolve()
    if not bound_to(instance, configs):
        binding = read_binding(instance.root_directory)
        return dg.SensorResult(skip_reason=(
            f"this code location reads {configs}, but the instance follows {binding.configs if binding else '?'} "
            "(the folder of the last `embedpyramid run`): start dagster dev without EMBEDPYRAMID_CONFIGS, or "
            f"run `embedpyramid run --configs {configs}` to switch; nothing is registered or deleted meanwhile"))
    config, metadata = check_config(configs)
    latest = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(CONFIG_FOLDER, CONFIG_CHECK))
    previous = latest.event.asset_check_evaluation if latest and latest.event else None
    if previous is None or previous.passed != (config is not None) or previous.metadata != metadata:
        instance.report_runless_asset_event(dg.AssetCheckEvaluation(
            asset_key=CONFIG_FOLDER, check_name=CONFIG_CHECK, passed=config is not None, metadata=metadata))
    if config is None:
        raise ConfigError(str(metadata["error"].value))
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    for name, (add, delete) in partition_sync(instance, config).items():
        if add:
            requests.append(dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=add))
        if delete:
            requests.append(dg.DeleteDynamicPartitionsRequest(partitions_def_name=name, partition_keys=delete))
    observations = config_observations(instance, config)
    if not requests and not observations:
        checked = report_up_to_date(instance, context.repository_def.asset_graph)
        return dg.SensorResult(skip_reason="partitions and config versions match the config folder"
                               + (f"; {checked} up_to_date checks changed" if checked else ""))
    return dg.SensorResult(dynamic_partitions_requests=requests, asset_events=observations)


# The asset-level up_to_date checks are recorded by the CLI and the config sensor, never run in a job.
WITHOUT_UP_TO_DATE = checks_named(UP_TO_DATE)
refresh_datasets_job = dg.define_asset_job(
    "refresh_datasets", selection=dg.AssetSelection.assets("frozen_dataset") - WITHOUT_UP_TO_DATE,
    description="Re-freeze one dataset; identical data keeps its data version, so nothing downstream moves.",
)
summary_job = dg.define_asset_job(
    "summary", selection=summary_selection - WITHOUT_UP_TO_DATE,
    description="Recompute one dataset's comparisons (the run's partition), results.duckdb, the report and the "
                "other cross-model summaries",
)
dataset_evaluation_job = dg.define_asset_job(
    "evaluate_dataset", selection=dg.AssetSelection.tag(*DATASET_LEVEL_TAG) - WITHOUT_UP_TO_DATE,
    description="Evaluate what one frozen dataset needs once, for no model: the model-independent L5 systems (BM25).",
)
evaluation_job = dg.define_asset_job(
    "evaluate", selection=dg.AssetSelection.all() - dg.AssetSelection.assets("frozen_dataset") - summary_selection
    - dg.AssetSelection.tag(*DATASET_LEVEL_TAG)
    # The L2 task families are partitioned by their own datasets: jobs of their own evaluate them.
    - dg.AssetSelection.assets(*(name for family in TASK_FAMILIES for name in task_family_assets(family)))
    - WITHOUT_UP_TO_DATE,
    description="Evaluate one (model, dataset) partition: embeddings, L2 retrieval, L1, L4, L5 and (with judge.yaml) "
                "L6.",
)


def nightly_freeze(job: dg.UnresolvedAssetJobDefinition, partitions: str, name: str) -> dg.ScheduleDefinition:
    """At 02:00, re-freeze every dataset of one partition set (a job runs one partitions
    definition: the retrieval datasets, and each task family's datasets, have a schedule each).
    Identical data keeps its data version, so nothing downstream is requested."""

    @dg.schedule(name=name, cron_schedule="0 2 * * *", job=job, default_status=dg.DefaultScheduleStatus.RUNNING)
    def refresh(context: dg.ScheduleEvaluationContext):
        """Re-freeze every dataset with data; changed data re-runs only what depends on it."""
        datasets = context.instance.get_dynamic_partitions(partitions)
        if not datasets:
            yield dg.SkipReason(f"no {partitions} registered")
        for dataset in datasets:
            yield dg.RunRequest(run_key=f"{context.scheduled_execution_time:%Y-%m-%d}-{dataset}", partition_key=dataset)

    return refresh


nightly_refresh = nightly_freeze(refresh_datasets_job, DATASETS, "nightly_refresh")


@dg.schedule(cron_schedule="0 4 * * *", job=summary_job, default_status=dg.DefaultScheduleStatus.RUNNING)
def nightly_summary(context: dg.ScheduleEvaluationContext):
    """At 04:00, rebuild the summaries whose inputs changed (a config facet, the code, or an input
    partition's data version since the summary was built); none when nothing changed. A run
    materializes one partition: each dataset whose comparisons changed gets a run of its own;
    the summaries over every dataset ride in that run when it is the only one, else they are
    left to the automation, which holds them until those runs are done (two runs on the queue
    are not ordered)."""
    graph = context.repository_def.asset_graph
    freshness = kept_freshness(context.instance, graph)
    datasets = context.instance.get_dynamic_partitions(DATASETS)
    stale = [(key, partition) for key in sorted(summary_selection.resolve(graph))
             for partition in (datasets if graph.get(key).partitions_def is not None else [None])
             if freshness.state(key, partition).needs_work_now and freshness.summarizes_something(key, partition)]
    if not stale:
        return dg.SkipReason("no summary input changed since the summaries were built")
    day = f"{context.scheduled_execution_time:%Y-%m-%d}"
    return [dg.RunRequest(run_key=f"{day}-{partition}" if partition else day, partition_key=partition,
                          asset_selection=keys) for keys, partition in summary_runs(stale, whole_after_several=False)]


@dg.schedule(cron_schedule="0 3 * * *", job=summary_job, default_status=dg.DefaultScheduleStatus.RUNNING)
def freshness_reconcile(context: dg.ScheduleEvaluationContext):
    """At 03:00, check the states the instance keeps (what every tick, ``status`` and ``run``
    read) against a full walk of Dagster's stale status; any difference fails the tick with the
    partitions named (and the walk's states are kept). Requests no run."""
    differences = reconcile(context.instance, context.repository_def.asset_graph)
    if differences:
        raise RuntimeError(f"{len(differences)} kept states differ from a full walk (kept now as the walk found them): "
                           + "; ".join(differences[:20]))
    return dg.SkipReason("the kept states equal a full walk")


K = TypeVar("K")


def summary_runs(todo: list[tuple[K, str | None]], *, whole_after_several: bool) -> list[tuple[list[K], str | None]]:
    """The runs, ``(assets, dataset partition)``, that rebuild the summaries ``todo`` (asset,
    partition; None for a summary over every dataset), in order: one run per dataset partition
    (a run materializes one partition, and the assets with none). The summaries over every
    dataset ride in the last of them — when ``whole_after_several`` is false, only when it is
    the only one (they are left out otherwise: runs on the queue are not ordered) — and run
    alone when no dataset partition is in ``todo``."""
    by_partition: dict[str | None, list[K]] = {}
    for asset, partition in todo:
        by_partition.setdefault(partition, []).append(asset)
    whole = by_partition.pop(None, [])
    runs = [(assets, partition) for partition, assets in by_partition.items()]
    if not runs:
        return [(whole, None)] if whole else []
    if whole_after_several or len(runs) == 1:
        runs[-1][0].extend(whole)
    return runs


def automation_sensors(interval: int = DEFAULT_SENSOR_INTERVAL) -> list[dg.SensorDefinition]:
    """``config_sensor`` and ``evaluation_automation``, each ticking every ``interval`` seconds (the
    code location reads it from the environment: :func:`pipelines.settings.sensor_interval`)."""
    config_sensor = dg.sensor(name="config_sensor", minimum_interval_seconds=interval,
                              default_status=dg.DefaultSensorStatus.RUNNING)(sync_config_folder)
    with warnings.catch_warnings():
        # Custom conditions (StaleCondition) are evaluated in the code server, a beta option we rely on.
        warnings.simplefilter("ignore", dg.BetaWarning)
        evaluation_automation = dg.AutomationConditionSensorDefinition(
            "evaluation_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
            use_user_code_server=True, minimum_interval_seconds=interval, run_tags={AUTOMATION_TAG: "evaluation"},
        )
    return [config_sensor, evaluation_automation]


def summary_assets(defs: dg.Definitions) -> list[str]:
    """The summary assets of a graph, upstream first: SUMMARY_ASSETS and the tagged ones."""
    graph = defs.resolve_asset_graph()
    selected = summary_selection.resolve(graph)
    return [key.to_user_string() for key in graph.toposorted_asset_keys if key in selected]


task_freeze_jobs = {family: dg.define_asset_job(
    f"freeze_{family}", selection=dg.AssetSelection.assets(task_family_assets(family)[0]) - WITHOUT_UP_TO_DATE,
    description=f"Freeze one {family} task dataset; identical data keeps its data version.",
) for family in TASK_FAMILIES}
task_evaluation_jobs = {family: dg.define_asset_job(
    f"evaluate_{family}", selection=dg.AssetSelection.assets(*task_family_assets(family)[1:]) - WITHOUT_UP_TO_DATE,
    description=f"Evaluate one (model, {family} dataset) partition: the task and, for pair datasets, L1 pair sanity.",
) for family in TASK_FAMILIES}
"""Per task family: its datasets are their own partitions, so freezing and evaluating them are
jobs of their own (a job runs one partitions definition)."""
JOBS = [refresh_datasets_job, summary_job, dataset_evaluation_job, evaluation_job, *task_freeze_jobs.values(),
        *task_evaluation_jobs.values()]
nightly_task_refresh = [nightly_freeze(job, task_datasets_name(family), f"nightly_refresh_{family}")
                        for family, job in task_freeze_jobs.items()]
SCHEDULES = [nightly_refresh, *nightly_task_refresh, nightly_summary, freshness_reconcile]
