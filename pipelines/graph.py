"""The evaluation graph of one config folder: config facets, assets per pyramid level, checks,
jobs, sensors and schedules, with the resources that point them at a config and a data folder."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg

from assets.data import frozen_dataset
from assets.downstream import DOWNSTREAM_ASSETS, SUMMARY_DEPS
from assets.efficiency import efficiency_asset
from assets.embeddings import embedding_assets
from assets.geometry import l1_geometry, pair_sanity_assets
from assets.retrieval import l2_retrieval
from assets.serving import serving_assets
from assets.summary import comparisons, report_asset, results_db
from assets.systems import systems_assets
from assets.tasks import TASK_ASSETS
from assets.transfer import benchmark_transfer
from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.config.ann import IndexSpec, load_ann_config
from embedpyramid.config.base import yaml_sources
from embedpyramid.config.systems import SystemsConfig
from embedpyramid.store import StorePath
from graphbase.config_observation import facet_source_asset
from graphbase.facets import config_facets
from graphbase.partitions import check_ann_asset_names, check_system_asset_names
from graphbase.pools import model_step_tags
from graphbase.up_to_date import provide_location_graph, up_to_date_checks
from pipelines.automation import (
    DEFAULT_SENSOR_INTERVAL,
    JOBS,
    SCHEDULES,
    automation_sensors,
    config_folder,
    config_loads,
)
from resources import EncoderRegistry, ProjectResource, ShardWorkspace

ASSETS = [
    frozen_dataset, l2_retrieval, l1_geometry, *pair_sanity_assets,
    comparisons, results_db,
    benchmark_transfer,
    *TASK_ASSETS,
]
"""The assets every folder has that run no model; those that do (:func:`model_assets`) carry op tags
that follow the folder's cards."""


def model_assets(models: list[ResolvedModel]) -> list[dg.AssetsDefinition]:
    """The assets partitioned by card that run its model — the embeddings and efficiency — with
    the op tags of ``models`` (:func:`graphbase.pools.model_step_tags`)."""
    op_tags = model_step_tags(models)
    return [*embedding_assets(op_tags), efficiency_asset(op_tags)]


def index_specs(configs_dir: str | Path) -> tuple[IndexSpec, ...]:
    """The index specs of a folder's ann.yaml (none without one); their names must map to
    distinct asset names."""
    path = Path(configs_dir) / "ann.yaml"
    if not path.is_file():
        return ()
    specs = load_ann_config(path).specs
    check_ann_asset_names((spec.name for spec in specs), str(path))
    return specs


def systems_config(config: ProjectConfig) -> SystemsConfig | None:
    """The L5 systems of a folder's systems.yaml (None without one), validated against the whole
    folder (cards, datasets, ann.yaml); system names must map to distinct asset names."""
    if config.systems is not None:
        check_system_asset_names(config.systems.systems, str(config.directory / "systems.yaml"))
    return config.systems


def with_extra_deps(assets: list[dg.AssetsDefinition],
                    extra: dict[str, list[dg.AssetKey]]) -> list[dg.AssetsDefinition]:
    """The assets with the dependencies that other levels add to them (by asset name), each asset
    mapped once: Dagster cannot map the specs of an already mapped asset."""
    return [asset.map_asset_specs(lambda spec: spec.merge_attributes(deps=extra[spec.key.to_user_string()]))
            if any(extra.get(key.to_user_string()) for key in asset.keys) else asset for asset in assets]


def build_definitions(configs_dir: str | Path, data_root: str | StorePath,
                      specs: tuple[IndexSpec, ...] | None = None, *, sensor_interval: int = DEFAULT_SENSOR_INTERVAL,
                      executor: dg.ExecutorDefinition | None = None) -> dg.Definitions:
    """The graph of one config folder: L4 has one asset (and one spec facet) per index spec, L5
    one asset (and one system facet) per system; L6 exists only with a judge.yaml, and then the
    summaries depend on it; the steps that run a model ask Kubernetes for a GPU when a card
    runs on cuda. Given ``specs`` (e.g. none, for a folder that does not validate), the folder
    is not loaded: no L5, and no GPU requested. The config sensor and the automation tick every
    ``sensor_interval`` seconds; launched runs use ``executor`` (Dagster's default when None)."""
    config = load_config(configs_dir) if specs is None else None
    systems = systems_config(config) if config is not None else None
    specs = index_specs(configs_dir) if specs is None else specs
    serving = serving_assets(specs) if specs else []
    models = dict(config.models) if config is not None else {}
    level5 = systems_assets(systems, models)
    system_keys = [key for asset in level5 for key in asset.keys]
    downstream = (Path(configs_dir) / "judge.yaml").is_file()
    facets = [facet_source_asset(facet) for facet in config_facets(
        [spec.name for spec in specs], list(systems.systems) if systems else [], downstream=downstream)]
    # The comparisons read every system's per-query metrics (they turn stale with any system) and
    # L6's judge and answer metrics; the results database and the report show the grade analysis.
    extra: dict[str, list[dg.AssetKey]] = {"comparisons": list(system_keys)}
    for name, dep in (SUMMARY_DEPS.items() if downstream else ()):
        extra.setdefault(name, []).append(dg.AssetKey(dep))
    assets = [*with_extra_deps([*ASSETS, *model_assets(list(models.values())), report_asset(with_serving=bool(serving))],
                               extra), *serving, *level5,
              *(DOWNSTREAM_ASSETS if downstream else [])]
    materializable = [key for asset in assets for key in asset.keys]
    return dg.Definitions(
        assets=[config_folder, *facets, *assets],
        asset_checks=[config_loads, up_to_date_checks(materializable)],
        jobs=JOBS,
        sensors=automation_sensors(sensor_interval),
        schedules=SCHEDULES,
        executor=executor,
        resources={
            "project": ProjectResource(configs_dir=str(configs_dir), data_dir=str(data_root)),
            "shard_project": ShardWorkspace(configs_dir=str(configs_dir), data_dir=str(data_root)),
            "encoders": EncoderRegistry(),
        },
    )


def location_asset_graph(configs_dir: str, data_dir: str) -> Any:
    """The asset graph of a config folder (rebuilt when one of its files changes): what a summary
    asset run in-process follows upstream."""
    sources = {source for path in Path(configs_dir).glob("*.yaml") for source in yaml_sources(path)}
    stamps = tuple(sorted((str(source), source.stat().st_mtime_ns) for source in sources))
    return _asset_graph(configs_dir, data_dir, stamps)


@lru_cache(maxsize=4)
def _asset_graph(configs_dir: str, data_dir: str, stamps: tuple[tuple[str, int], ...]) -> Any:
    return build_definitions(configs_dir, data_dir).resolve_asset_graph()


provide_location_graph(location_asset_graph)
