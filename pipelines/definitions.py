"""The Dagster code location: assets, resources, partition sensor, automation and schedules.

``dagster dev`` (through ``workspace.yaml``) loads ``defs``, built from the config folder in
``EMBEDPYRAMID_CONFIGS`` (default ``configs/``) and the data folder in ``EMBEDPYRAMID_DATA``
(default ``data/``), both relative to the repo root.
"""


import os
from pathlib import Path

import dagster as dg

from assets.data import frozen_dataset
from assets.efficiency import efficiency
from assets.embeddings import document_embeddings, query_embeddings, raw_document_embeddings, raw_query_embeddings
from assets.geometry import norm_geometry, normalization_price
from assets.retrieval import exact_topk, retrieval_metrics
from assets.serving import serving_assets
from assets.summary import comparisons, report_asset, results_db
from embedpyramid.config import ConfigError, load_config
from embedpyramid.serving import load_ann_config
from pipelines.partitions import DATASETS, partition_sync
from resources import EncoderRegistry, ProjectResource

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSETS = [
    frozen_dataset, query_embeddings, document_embeddings, exact_topk, retrieval_metrics,
    raw_query_embeddings, raw_document_embeddings, norm_geometry, normalization_price, efficiency,
    comparisons, results_db,
]

refresh_datasets_job = dg.define_asset_job(
    "refresh_datasets", selection=[frozen_dataset],
    description="Re-freeze one dataset; identical data keeps its data version, so nothing downstream moves.",
)
SUMMARY_ASSETS = ["comparisons", "results_db", "comparison_report"]
summary_job = dg.define_asset_job(
    "summary", selection=SUMMARY_ASSETS, description="Recompute the comparisons, results.duckdb and the report"
)


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def model_cards_sensor(context: dg.SensorEvaluationContext, project: ProjectResource) -> dg.SensorResult:
    """Register each card of models.yaml (and each dataset) as a partition; drop the ones removed.

    New partitions are then filled by declarative automation — and only those.
    """
    try:
        config = load_config(project.configs_dir)
    except ConfigError as error:
        return dg.SensorResult(skip_reason=str(error))
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    for name, (add, delete) in partition_sync(context.instance, config).items():
        if add:
            requests.append(dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=add))
        if delete:
            requests.append(dg.DeleteDynamicPartitionsRequest(partitions_def_name=name, partition_keys=delete))
    if not requests:
        return dg.SensorResult(skip_reason="partitions match the config")
    return dg.SensorResult(dynamic_partitions_requests=requests)


@dg.schedule(cron_schedule="0 2 * * *", job=refresh_datasets_job, default_status=dg.DefaultScheduleStatus.RUNNING)
def nightly_refresh(context: dg.ScheduleEvaluationContext):
    """Nightly re-evaluation: re-freeze every dataset; changed data re-runs only what depends on it."""
    for dataset in context.instance.get_dynamic_partitions(DATASETS):
        yield dg.RunRequest(run_key=f"{context.scheduled_execution_time:%Y-%m-%d}-{dataset}", partition_key=dataset)


nightly_summary = dg.ScheduleDefinition(
    name="nightly_summary", cron_schedule="0 4 * * *", job=summary_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
)

automation = dg.AutomationConditionSensorDefinition(
    "evaluation_automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
)


def build_definitions(configs_dir: str | Path, data_dir: str | Path) -> dg.Definitions:
    """The graph of one config folder: L4 has one asset per index spec of its ann.yaml."""
    ann_path = Path(configs_dir) / "ann.yaml"
    specs = load_ann_config(ann_path).specs if ann_path.is_file() else ()
    serving = serving_assets(specs) if specs else []
    return dg.Definitions(
        assets=[*ASSETS, *serving, report_asset(with_serving=bool(serving))],
        jobs=[refresh_datasets_job, summary_job],
        sensors=[model_cards_sensor, automation],
        schedules=[nightly_refresh, nightly_summary],
        resources={
            "project": ProjectResource(configs_dir=str(configs_dir), data_dir=str(data_dir)),
            "encoders": EncoderRegistry(),
        },
    )


defs = build_definitions(
    os.environ.get("EMBEDPYRAMID_CONFIGS", str(REPO_ROOT / "configs")),
    os.environ.get("EMBEDPYRAMID_DATA", str(REPO_ROOT / "data")),
)
