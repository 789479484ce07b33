"""The Dagster instance of a data folder: where the run history lives, which config folder it
follows, one writer at a time, and no ghost runs.

- **Where.** ``$DAGSTER_HOME`` when set, else ``<data>/dagster_home`` (a local data folder only).
  Dagster builds SQLite URLs from that path without quoting it, so a folder whose path holds
  ``?``, ``#`` or ``%`` is opened through a link under ``~/.cache/embedpyramid/homes/`` whose path
  holds none: every byte is still written inside the data folder. The ``dagster.yaml`` written
  there names no storage and no path (a copied or moved folder keeps its own history); the CLI
  opens Dagster's SQLite storage on those files with an event log that keeps its database engines
  (:func:`graphbase.dagster_internals.open_sqlite_home`), ``dagster dev`` with Dagster's own.
- **Binding.** The instance records the config folder and data folder of the last CLI command
  (``embedpyramid.json`` in the instance folder). ``dagster dev`` started with only
  ``DAGSTER_HOME`` set reads them, so the UI, the sensors and the CLI follow one config; a code
  location that reads another folder neither deletes partitions nor reports config versions.
- **One writer.** :class:`graphbase.home.DataFolderLock` (no Dagster inside, like the folder's
  layout in :mod:`graphbase.home`) holds an exclusive lock on ``<data>/.embedpyramid.lock``
  (in the instance folder for a remote data folder) while a command writes; a second command
  waits for it, saying which PID holds it, or exits at once with ``wait=False``. Every run step
  that writes the data folder takes the same lock through the ``project`` resource, so a run the
  automation, a schedule or the UI launches waits for a CLI command on the same folder (and the
  other way round).
- **No ghosts.** Runs the CLI starts carry the PID and host of their process; a run still marked
  started whose process is gone (killed) is marked failed by the next command
  (:func:`fail_abandoned_runs`). Runs launched by the daemon are watched by Dagster's own run
  monitoring, enabled in the ``dagster.yaml`` written here.
- **Pools.** The pools that limit concurrent encodes, and the freeing of slots held by dead
  runs, are :mod:`graphbase.pools`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil

from embedpyramid.store import RunHistoryError, StorePath
from graphbase.dagster_internals import open_sqlite_home
from graphbase.home import BINDING_FILE, INSTANCE_YAML, OPEN_LOCK_FILE, instance_home

# SQLAlchemy reads these as URL syntax in a SQLite path (query, fragment, percent escapes).
_URL_SIGNIFICANT = set("?#%")
PID_TAG, HOST_TAG = "embedpyramid/pid", "embedpyramid/host"


@dataclass(frozen=True)
class Binding:
    """The config folder and data folder an instance follows."""

    configs: str
    data: str


@contextmanager
def run_history_errors(data_root: StorePath) -> Iterator[None]:
    """Raise the run history's database errors (a full disk, a read-only folder) as
    :class:`~embedpyramid.store.RunHistoryError`, naming the instance folder."""
    from sqlalchemy.exc import OperationalError

    try:
        yield
    except OperationalError as error:
        detail = str(getattr(error, "orig", error)).splitlines()[0]
        home = os.environ.get("DAGSTER_HOME") or data_root / "dagster_home"
        raise RunHistoryError(f"the run history in {home} cannot be written ({detail}); free space or fix "
                              "permissions there and rerun: finished artefacts are kept") from error


def open_instance(data_root: StorePath) -> dg.DagsterInstance:
    """The persistent instance of a data folder (see the module docstring).

    Opening is serialized between processes: the first open creates the SQLite schema, and two
    processes creating it at once leave it unusable ("more than one head present")."""
    home = instance_home(data_root)
    home.mkdir(parents=True, exist_ok=True)
    handle = os.open(home / OPEN_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        config = home / "dagster.yaml"
        if not config.is_file():
            config.write_text(INSTANCE_YAML.format(home=home), encoding="utf-8")
        return open_sqlite_home(str(_sqlite_safe(home)))
    finally:
        os.close(handle)


def _sqlite_safe(home: Path) -> Path:
    if not _URL_SIGNIFICANT & set(str(home)):
        return home
    links = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "embedpyramid" / "homes"
    links.mkdir(parents=True, exist_ok=True)
    link = links / hashlib.sha256(str(home).encode("utf-8")).hexdigest()[:16]
    if not link.is_symlink() or link.resolve() != home:
        link.unlink(missing_ok=True)
        link.symlink_to(home, target_is_directory=True)
    return link


def read_binding(home: str | Path | None) -> Binding | None:
    """The binding recorded in an instance folder, if any."""
    if home is None:
        return None
    path = Path(home) / BINDING_FILE
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    return Binding(recorded["configs"], recorded["data"])


def bind(instance: dg.DagsterInstance, configs: Path, data_root: StorePath) -> None:
    """Record the folders this instance follows (the last CLI command's)."""
    path = Path(instance.root_directory) / BINDING_FILE
    binding = {"configs": str(configs), "data": str(data_root)}
    if not path.is_file() or json.loads(path.read_text(encoding="utf-8")) != binding:
        path.write_text(json.dumps(binding, indent=2) + "\n", encoding="utf-8")


def bound_to(instance: dg.DagsterInstance, configs: Path) -> bool:
    """Whether ``configs`` is the config folder the instance follows (or it follows none yet)."""
    binding = read_binding(instance.root_directory)
    return binding is None or Path(binding.configs) == configs


def run_tags(configs: Path, command: Sequence[str]) -> dict[str, str]:
    """Tags of every run the CLI launches: the subcommand, the command line, the config folder,
    and the process (for :func:`fail_abandoned_runs`)."""
    return {
        "embedpyramid/cli": command[0] if command else "run",
        "embedpyramid/command": shlex.join(["embedpyramid", *command])[:1000],
        "embedpyramid/configs": str(configs),
        PID_TAG: str(os.getpid()),
        HOST_TAG: socket.gethostname(),
    }


def abandoned_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """The CLI runs of this host still shown as in progress whose process is gone (read only)."""
    records = instance.get_run_records(dg.RunsFilter(
        statuses=[dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED],
        tags={HOST_TAG: socket.gethostname()},
    ))
    return [record.dagster_run for record in records
            if (pid := int(record.dagster_run.tags.get(PID_TAG, "0"))) != os.getpid()
            and not _alive_since(pid, record.create_timestamp.timestamp())]


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the :func:`abandoned_runs`; return their run ids."""
    failed = []
    for run in abandoned_runs(instance):
        pid = int(run.tags.get(PID_TAG, "0"))
        instance.report_run_failed(run, f"the process that ran this (PID {pid}) is gone (killed or crashed); "
                                        "marked failed by the next embedpyramid command")
        failed.append(run.run_id)
    return failed


def _alive_since(pid: int, started: float) -> bool:
    """Whether process ``pid`` exists and already existed at ``started`` (not a recycled PID)."""
    try:
        return psutil.Process(pid).create_time() <= started + 1
    except (psutil.NoSuchProcess, ValueError):
        return False
