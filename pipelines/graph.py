"""The evaluation graph of one config folder: config facets, assets per pyramid level, checks,
jobs, sensors and schedules, with the resources that point them at a config and a data folder."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.data import frozen_dataset
from assets.downstream import DOWNSTREAM_ASSETS, with_downstream_deps
from assets.efficiency import efficiency
from assets.embeddings import document_embeddings, query_embeddings, raw_document_embeddings, raw_query_embeddings
from assets.geometry import norm_geometry, normalization_price
from assets.retrieval import exact_topk, retrieval_metrics
from assets.serving import serving_assets
from assets.summary import comparisons, report_asset, results_db
from assets.tasks import TASK_ASSETS
from assets.transfer import benchmark_transfer
from embedpyramid.serving.specs import IndexSpec, load_ann_config
from embedpyramid.store import StorePath
from pipelines.automation import JOBS, SCHEDULES, SENSORS, config_folder, config_loads
from pipelines.freshness import config_facets
from pipelines.partitions import check_ann_asset_names
from resources import EncoderRegistry, ProjectResource

ASSETS = [
    frozen_dataset, query_embeddings, document_embeddings, exact_topk, retrieval_metrics,
    raw_query_embeddings, raw_document_embeddings, norm_geometry, normalization_price, efficiency,
    comparisons, results_db,
    benchmark_transfer,
    *TASK_ASSETS,
]


def index_specs(configs_dir: str | Path) -> tuple[IndexSpec, ...]:
    """The index specs of a folder's ann.yaml (none without one); their names must map to
    distinct asset names."""
    path = Path(configs_dir) / "ann.yaml"
    if not path.is_file():
        return ()
    specs = load_ann_config(path).specs
    check_ann_asset_names((spec.name for spec in specs), str(path))
    return specs


def build_definitions(configs_dir: str | Path, data_root: str | StorePath,
                      specs: tuple[IndexSpec, ...] | None = None) -> dg.Definitions:
    """The graph of one config folder: L4 has one asset (and one spec facet) per index spec; L6
    exists only with a judge.yaml, and then the summaries depend on it."""
    specs = index_specs(configs_dir) if specs is None else specs
    serving = serving_assets(specs) if specs else []
    downstream = (Path(configs_dir) / "judge.yaml").is_file()
    facets = [facet.source_asset() for facet in config_facets([spec.name for spec in specs], downstream=downstream)]
    assets = [*ASSETS, *serving, report_asset(with_serving=bool(serving))]
    if downstream:
        assets = [*with_downstream_deps(assets), *DOWNSTREAM_ASSETS]
    return dg.Definitions(
        assets=[config_folder, *facets, *assets],
        asset_checks=[config_loads],
        jobs=JOBS,
        sensors=SENSORS,
        schedules=SCHEDULES,
        resources={
            "project": ProjectResource(configs_dir=str(configs_dir), data_dir=str(data_root)),
            "encoders": EncoderRegistry(),
        },
    )
