"""The instance folder of a data folder and the one-writer lock: plain files, no Dagster.

``$DAGSTER_HOME`` when set, else ``<data>/dagster_home`` (a local data folder only), holds the
run history (:mod:`graphbase.instance` opens it as a Dagster instance), the config binding and,
for a remote data folder, the lock file. What only reads these files — the warm start of
:mod:`graphbase.warm` — imports no Dagster.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from embedpyramid.config import ConfigError
from embedpyramid.store import DataFolderBusy, StorePath, is_local

if TYPE_CHECKING:
    import dagster as dg

BINDING_FILE = "embedpyramid.json"
LOCK_FILE = ".embedpyramid.lock"
OPEN_LOCK_FILE = ".embedpyramid-open.lock"
INSTANCE_YAML = """\
# Written by embedpyramid: the run history of `embedpyramid run` for this data folder.
# Show it in the UI with:  DAGSTER_HOME={home} dagster dev -w workspace.yaml
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
telemetry:
  enabled: false
"""


def instance_home(data_root: StorePath) -> Path:
    """The instance folder for a data folder: ``$DAGSTER_HOME`` or ``<data>/dagster_home``."""
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"]).expanduser().resolve()
    if not is_local(data_root):
        raise ConfigError(
            f"the data folder {data_root} is not on a local disk: set DAGSTER_HOME to a local folder "
            "(or point dagster.yaml at Postgres) for the run history"
        )
    return data_root / "dagster_home"


_HELD: dict[str, int] = {}
"""Lock files this process holds, with how many holders inside it."""


class DataFolderLock:
    """An exclusive lock on a data folder for the duration of one command (see the module docstring).

    The lock file lives in a local data folder; for a remote one, in the instance folder (it then
    guards against commands sharing that instance only): ``instance``'s, or without one (a
    command that takes the lock before it opens the instance) :func:`instance_home`'s.
    """

    def __init__(self, data_root: StorePath, instance: dg.DagsterInstance | None, *, wait: bool = True,
                 notify: Callable[[str], None] = print, poll_seconds: float = 1.0, holder: str | None = None):
        if is_local(data_root):
            self.path = data_root / LOCK_FILE
        else:
            # Resolved: the instance may be opened through a link (_sqlite_safe), and one lock file
            # must have one name in this process (_HELD).
            home = Path(instance.root_directory if instance is not None else instance_home(data_root)).resolve()
            self.path = home / f"{LOCK_FILE}.{hashlib.sha256(str(data_root).encode()).hexdigest()[:16]}"
        self.data_root, self.wait, self.notify, self.poll_seconds = data_root, wait, notify, poll_seconds
        self.holder = holder or " ".join(sys.argv)
        self._handle: int | None = None
        self._nested = False

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self) -> None:
        """Take the lock, waiting for (or, without ``wait``, refusing) another holder. A process
        that already holds it (the CLI, whose in-process runs' steps take it again) holds it
        once more: an flock taken twice by one process would wait for itself."""
        key = str(self.path)
        if _HELD.get(key):
            _HELD[key] += 1
            self._nested = True
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._holder()
                if not self.wait:
                    os.close(handle)
                    raise DataFolderBusy(f"{self.data_root} is in use by {holder}; wait for it to finish "
                                         "(or run without --no-wait to queue behind it)") from None
                if not told:
                    self.notify(f"waiting for {holder} to release {self.data_root}")
                    told = True
                time.sleep(self.poll_seconds)
        os.ftruncate(handle, 0)
        os.write(handle, json.dumps({"pid": os.getpid(), "command": self.holder}).encode("utf-8"))
        self._handle = handle
        _HELD[key] = 1

    def release(self) -> None:
        key = str(self.path)
        if self._nested:
            _HELD[key] -= 1
            self._nested = False
        elif self._handle is not None:
            _HELD.pop(key, None)
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            os.close(self._handle)
            self._handle = None

    def _holder(self) -> str:
        try:
            recorded = json.loads(self.path.read_text(encoding="utf-8"))
            return f"PID {recorded['pid']} ({recorded['command']})"
        except (OSError, ValueError, KeyError):
            return "another process"
