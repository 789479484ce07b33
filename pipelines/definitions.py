"""The Dagster code location: the graph of the config folder the instance follows.

``dagster dev -w workspace.yaml`` loads ``defs`` for the config folder and data folder in
``EMBEDPYRAMID_CONFIGS`` / ``EMBEDPYRAMID_DATA`` when set, else those the instance at
``$DAGSTER_HOME`` is bound to (the last ``embedpyramid`` command's), else ``configs/`` and
``data/`` of the repo; ``EMBEDPYRAMID_SENSOR_INTERVAL`` and ``EMBEDPYRAMID_EXECUTOR`` set how
often its sensors tick and how its runs execute (:mod:`pipelines.settings`). A config folder
that does not validate stops the location from loading, with the error naming the file, the line
and the key — ``dagster definitions validate`` exits non-zero, so a check before a deploy catches
it — unless ``EMBEDPYRAMID_CONFIG_ERRORS=degrade``: then it loads without the L4 assets of an
unreadable ann.yaml and the L5 assets, and shows its error where a Dagster user looks (the failed
check ``config/folder: loads``, the failing ``config_sensor`` ticks, an error logged at load).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from embedpyramid.config import ConfigError, load_config
from embedpyramid.store import store_path
from graphbase.instance import read_binding
from pipelines.graph import build_definitions
from pipelines.settings import config_errors, location_executor, sensor_interval

REPO_ROOT = Path(__file__).resolve().parent.parent


def _location_folders() -> tuple[str, str]:
    binding = read_binding(os.environ.get("DAGSTER_HOME"))
    configs = os.environ.get("EMBEDPYRAMID_CONFIGS") or (binding.configs if binding else str(REPO_ROOT / "configs"))
    data = os.environ.get("EMBEDPYRAMID_DATA") or (binding.data if binding else str(REPO_ROOT / "data"))
    return configs, str(store_path(data))


def _load_location() -> dg.Definitions:
    configs, data = _location_folders()
    settings = {"sensor_interval": sensor_interval(os.environ), "executor": location_executor(os.environ)}
    degrade = config_errors(os.environ) == "degrade"
    try:
        load_config(configs)
        return build_definitions(configs, data, **settings)
    except ConfigError as error:
        if not degrade:
            raise
        # Dagster's logger reaches `dagster definitions validate` and the `dagster dev` console;
        # in the UI the check config/folder: loads and the config_sensor ticks fail with it.
        dg.get_dagster_logger("embedpyramid").error(
            f"config error: {error}\nThe code location loads without the config's index specs until the folder is "
            "fixed; the check config/folder: loads and the config_sensor show the same error.")
        return build_definitions(configs, data, specs=(), **settings)


defs = _load_location()
