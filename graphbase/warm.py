"""The warm start: ``run`` and ``status`` answer without starting Dagster when nothing has changed
since Dagster last found the whole selection fresh.

Dagster's answer is kept in the instance (:mod:`graphbase.freshness_store`: the state of every
partition at the event log's last record id), which a command must open Dagster to read
(importing Dagster and opening the instance cost more than the rest of a command with nothing to
do: ``benchmarks/bench_pipeline.py``). For the instance embedpyramid writes for a data folder
— its run history in SQLite files under the instance folder — the same answer is also kept in
``embedpyramid-warm.json`` beside them, with

- a key of everything the answer depends on outside the run history: the version of every config
  facet (exactly what :func:`graphbase.config_observation.observe_config` compares with the recorded ones),
  the bytes of every config file and of the files they extend, the selected card keys and
  datasets, the sha256 of every file of the project's packages (the assets' code versions derive
  from them), Dagster's version, and the config, data and instance folders;
- the size and modification time of every file of the run history (runs, event logs, the
  schedule and cursor storage): any run, materialization, observation or check result Dagster
  records changes one of them;
- the status rows of the selection, all fresh.

It is written only when Dagster still finds nothing recorded after those files were read (a run
another process starts needs no data-folder lock to record its start).

When the key and every file match, Dagster would answer the same — no config observation to
record, the same graph signature, no event since — so ``run`` prints the leaderboard and
``status`` its rows without opening the instance. Anything else (a changed file or setting, an
instance with another storage, a data folder another command holds) goes through Dagster as before.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.config.base import yaml_sources
from embedpyramid.config.selection import select_datasets, select_models
from embedpyramid.hashing import sha256_json
from embedpyramid.rendering.tables import first_few
from embedpyramid.store import DataFolderBusy, StorePath, is_local, read_json, store_path, write_json
from graphbase.facets import facet_versions
from graphbase.home import BINDING_FILE, INSTANCE_YAML, DataFolderLock, instance_home

WARM_MEMO = "embedpyramid-warm.json"
UP_TO_DATE_LINE = "everything up to date (nothing recorded since Dagster last found it all fresh)"
PACKAGES = ("embedpyramid", "graphbase", "resources", "assets", "pipelines")
"""The project's packages: every asset's code version is derived from their source."""
HISTORY_FOLDERS = ("history", "schedules")
"""Where the SQLite instance keeps its records: runs and event logs, schedules and cursors."""


@dataclass(frozen=True)
class LevelStatus:
    """One row of ``embedpyramid status``: a pyramid level (Dagster asset group) of one dataset ×
    card (the dataset alone for ``data``, neither for ``summary``), its state and why: ``why``
    in full, ``reasons`` each root cause with the assets it reaches, :attr:`brief` for a line."""

    dataset: str | None
    model: str | None
    level: str
    state: str
    why: str
    reasons: dict[str, list[str]] = field(default_factory=dict)

    @property
    def brief(self) -> str:
        """``why`` short enough for a table cell: the first causes, each with its first assets,
        and how many more."""
        causes = [f"{reason} ({first_few(assets)})" for reason, assets in self.reasons.items()]
        return first_few(causes, "causes", separator="; ")


def code_digest() -> str:
    """The sha256 of every file of the project's packages (sources and templates, not bytecode)."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:  # no memo matches; the runner says what to install
            digest.update(f"{package}: not installed\0".encode())
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{package}/{path.relative_to(root)}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def warm_key(config: ProjectConfig, data_root: StorePath, models: Sequence[ResolvedModel],
             datasets: Sequence[str]) -> str:
    """Everything Dagster's "all fresh" for this selection depends on outside the run history."""
    sources = sorted({source for path in config.directory.glob("*.yaml") for source in yaml_sources(path)})
    return sha256_json({
        "folders": [str(config.directory), str(data_root), str(instance_home(data_root))],
        "models": [model.key for model in models],
        "datasets": list(datasets),
        "facets": facet_versions(config),
        "config_files": {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in sources},
        "code": code_digest(),
        "dagster": importlib.metadata.version("dagster"),
    })


def history_fingerprint(home: Path) -> list[list[Any]] | None:
    """The size and modification time of every file of an instance's run history and of its
    config binding; None when the instance is not the SQLite one embedpyramid writes (its
    ``dagster.yaml`` was edited: the records may live elsewhere, e.g. in Postgres)."""
    try:
        if (home / "dagster.yaml").read_text(encoding="utf-8") != INSTANCE_YAML.format(home=home):
            return None
    except OSError:
        return None
    files = sorted(path for folder in HISTORY_FOLDERS for path in (home / folder).rglob("*") if path.is_file())
    stats = []
    for path in [*files, home / BINDING_FILE]:
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed while listed: no answer from the memo this time
            return None
        stats.append([str(path.relative_to(home)), stat.st_size, stat.st_mtime_ns])
    return stats


def remember_warm(config: ProjectConfig, data_root: StorePath, models: Sequence[ResolvedModel],
                  datasets: Sequence[str], rows: Sequence[LevelStatus], still_fresh: Callable[[], bool]) -> None:
    """Keep Dagster's "all fresh" for this selection where a warm command reads it without Dagster.

    Called once the command has recorded everything it records. ``still_fresh`` asks Dagster again
    (its own memo: nothing recorded since it found the selection fresh) *after* the run history's
    files are read, so a run that records something meanwhile — another process's, which needs no
    data-folder lock to record its start — leaves no memo rather than one that hides it."""
    if not is_local(data_root):
        return
    home = instance_home(data_root)
    history = history_fingerprint(home)
    if history is not None and still_fresh():
        write_json({"key": warm_key(config, data_root, models, datasets), "history": history,
                    "rows": [row.__dict__ for row in rows]}, home / WARM_MEMO)


def warm_status(configs_dir: str | Path, data_dir: str | StorePath, models: Sequence[str] | None,
                datasets: Sequence[str] | None, *, lock: bool) -> list[LevelStatus] | None:
    """The status rows of the selection when Dagster found it all fresh and nothing changed since
    (see the module docstring), else None: ask Dagster. With ``lock``, only while no other command
    holds the data folder (``run`` waits for it otherwise, as before)."""
    data_root = store_path(data_dir)
    if not is_local(data_root):
        return None
    held = DataFolderLock(data_root, None, wait=False)
    if lock:
        try:
            held.acquire()
        except DataFolderBusy:
            return None
    try:
        home = instance_home(data_root)
        try:
            memo = read_json(home / WARM_MEMO)
        except (OSError, ValueError):
            return None
        if memo.get("history") != history_fingerprint(home):
            return None
        config = load_config(configs_dir)
        key = warm_key(config, data_root, select_models(config, models), select_datasets(config, datasets))
        return [LevelStatus(**row) for row in memo["rows"]] if memo.get("key") == key else None
    finally:
        if lock:
            held.release()
