"""Where artefacts live under the data folder, atomic writes, and literal-path reads.

The data folder is a local path or a URL (``s3://bucket/evals``, ``gs://...``, ``memory://...``,
``file:///...``): a URL is handled by `universal_pathlib <https://github.com/fsspec/universal_pathlib>`_
over fsspec, so object storage is a configuration change, not a rewrite. The functions here are
the only place where artefacts are read and written; everything else builds paths with ``/``.

Every write goes to a temporary file and is moved into place: beside the target with
``os.replace`` on a local disk, uploaded under a temporary name and renamed on a remote
filesystem. A crash or a bad input mid-way leaves what was already written intact. Writers get
a *local* temporary path, so libraries that only write local files (FAISS, DuckDB, pyarrow)
work unchanged. Every Parquet read goes through :func:`read_frame` or :func:`read_table`, which
take the path literally (a data folder named ``runs[1]`` is not a glob pattern), or through
:func:`parquet_file` and :func:`read_table_metadata`; a file that fails to read because it is
damaged raises :class:`CorruptFileError` naming it and what to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

StorePath: TypeAlias = Path | UPath
"""A local path, or a :class:`upath.UPath` on an fsspec filesystem."""
PER_QUERY_SCHEMA = {
    "dataset": pl.String, "model": pl.String, "system": pl.String,
    "query_id": pl.String, "metric": pl.String, "value": pl.Float64,
}
"""The long per-query table (``metrics_path``) of every level: one value per query (or task item)
and metric, which every aggregate, interval and comparison is derived from."""

CORRUPT_ADVICE = ("it was damaged after it was written (every write here is atomic), by a full disk or a copy cut "
                  "short: delete it and materialize the asset that writes it again (in the Dagster UI, that "
                  "partition's Materialize)")
"""What to do about a damaged artefact, said by every :class:`CorruptFileError` of the data folder."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_URL_SIGNIFICANT = set("?#%")


def store_path(location: str | os.PathLike[str] | UPath) -> StorePath:
    """A data folder as given: a URL with a scheme becomes a UPath, anything else an absolute
    local path (``~`` expanded). Characters such as ``?``, ``[`` or ``%`` are taken literally."""
    if isinstance(location, UPath) and not isinstance(location, Path):
        return location
    text = os.fspath(location)
    if _URL.match(text):
        return UPath(text)
    return Path(text).expanduser().resolve()


def is_local(path: StorePath) -> bool:
    return isinstance(path, Path)


@contextmanager
def atomic_path(target: StorePath) -> Iterator[Path]:
    """Yield a local temporary path; move it onto ``target`` only on success."""
    if is_local(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        directory = target.parent
    else:
        directory = None
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        if is_local(target):
            os.replace(temporary, target)
        else:
            _upload(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _upload(local: Path, target: UPath) -> None:
    """Put a finished local file on a remote filesystem under a temporary name, then rename it, so
    readers see either the old object or the whole new one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    target.fs.put_file(str(local), staging.path)
    target.fs.mv(staging.path, target.path)


@contextmanager
def local_file(path: StorePath) -> Iterator[Path]:
    """A plain local path to ``path``'s content for readers that open local files by name and
    read URL syntax into it (DuckDB takes ``?`` as a query): the path itself when it is plain, a
    link from a temporary folder when it holds ``?``, ``#`` or ``%``, a temporary download for a
    remote file."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    if is_local(path) and not _URL_SIGNIFICANT & set(str(path)):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="embedpyramid-") as scratch:
        local = Path(scratch) / f"file{path.suffix}"
        if is_local(path):
            local.symlink_to(path)
        else:
            path.fs.get_file(path.path, str(local))
        yield local


def write_parquet(table: pa.Table, target: StorePath, **options: Any) -> StorePath:
    """Write ``table`` to ``target`` atomically, zstd-compressed; ``options`` go to
    ``pq.write_table`` (the embedding tables' encodings: :data:`embedpyramid.encode.tables.VECTOR_PARQUET`)."""
    with atomic_path(target) as temporary:
        pq.write_table(table, temporary, **{"compression": "zstd", **options})
    return target


def write_text(text: str, target: StorePath) -> StorePath:
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return target


def write_json(value: Any, target: StorePath) -> StorePath:
    return write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", target)


def write_with(writer: Callable[[Path], None], target: StorePath, *, from_target: bool = False) -> StorePath:
    """Atomically create ``target`` with a writer that creates a file at a plain local path (e.g.
    a DuckDB database, which reads ``?`` in a path as URL syntax): written in a scratch folder,
    then moved into place. With ``from_target``, the writer finds a copy of the current
    ``target`` at its path (when there is one) and updates it; ``target`` itself is replaced
    only once the update succeeded."""
    with tempfile.TemporaryDirectory(prefix="embedpyramid-") as scratch:
        built = Path(scratch) / f"file{target.suffix}"
        if from_target and target.is_file():
            with local_file(target) as current:
                shutil.copyfile(current, built)
        writer(built)
        with atomic_path(target) as temporary:
            shutil.copyfile(built, temporary)
    return target


def file_fingerprint(path: StorePath) -> str:
    """What changes whenever a file is written again (every write here replaces the file): its
    size, modification time in nanoseconds and inode on a local disk (an atomic replace is a new
    inode), its size and the object store's ETag or modification time on a remote one."""
    if is_local(path):
        info = path.stat()
        return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"
    info = path.fs.info(path.path)
    stamp = next((info[key] for key in ("ETag", "etag", "LastModified", "mtime", "created") if key in info), "")
    return f"{info.get('size')}:{stamp}"


def write_bytes(data: bytes, target: StorePath) -> StorePath:
    with atomic_path(target) as temporary:
        temporary.write_bytes(data)
    return target


def remove_tree(path: StorePath) -> None:
    """Delete a folder and everything under it, on a local disk or a remote filesystem; a
    missing folder is not an error."""
    if is_local(path):
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.fs.rm(path.path, recursive=True)


class DataFolderBusy(RuntimeError):
    """Another process holds the data folder's lock; the message names its PID and command."""


class RunHistoryError(RuntimeError):
    """The orchestrator's run history for a data folder cannot be written (a full disk, a
    read-only folder); the message names where it lives and what to do."""


class CorruptFileError(ValueError):
    """A file that exists but cannot be read as what it should be (a truncated or overwritten
    Parquet table, FAISS index, catalogue); the message names the file and what to do."""


@contextmanager
def _parquet_read(path: StorePath) -> Iterator[None]:
    """Turn a failed read of a damaged Parquet file into :class:`CorruptFileError`. Other
    failures (a missing file or column, a full disk) pass through unchanged: the file is read
    once more, whole, and only when that fails too is it called damaged."""
    try:
        yield
    except (pa.ArrowException, pl.exceptions.PolarsError, OSError) as error:
        if isinstance(error, OSError) and (error.errno is not None or isinstance(error, FileNotFoundError)):
            raise  # the operating system's error (missing, permission, disk full), not the file's content
        damage = _parquet_damage(path)
        if damage is None:
            raise
        raise CorruptFileError(f"{path}: not a readable Parquet file ({damage}); {CORRUPT_ADVICE}") from error


def _parquet_damage(path: StorePath) -> str | None:
    """Why the whole file cannot be read, or None when it can (or is not there)."""
    try:
        with path.open("rb") as handle, pq.ParquetFile(handle) as parquet:  # its message does not repeat the path
            parquet.read()
    except (pa.ArrowException, OSError) as error:
        if isinstance(error, OSError) and (error.errno is not None or isinstance(error, FileNotFoundError)):
            return None
        return " ".join(str(error).split())
    return None


@contextmanager
def parquet_file(path: StorePath) -> Iterator[pq.ParquetFile]:
    """A Parquet file opened for reading its footer or single row groups, local or remote."""
    with _parquet_read(path):
        if is_local(path):
            with pq.ParquetFile(path) as parquet:
                yield parquet
            return
        with path.open("rb") as handle, pq.ParquetFile(handle) as parquet:
            yield parquet


def read_json(path: StorePath) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_frame(path: StorePath, columns: list[str] | None = None) -> pl.DataFrame:
    """A Parquet file as a polars frame; the path is taken literally, never as a glob."""
    with _parquet_read(path):
        if is_local(path):
            return pl.read_parquet(path, columns=columns, glob=False)
        with path.open("rb") as handle:
            return pl.read_parquet(handle, columns=columns)


def read_table(path: StorePath, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file as an Arrow table."""
    with _parquet_read(path):
        if is_local(path):
            return pq.read_table(path, columns=columns)
        with path.open("rb") as handle:
            return pq.read_table(handle, columns=columns)


def read_table_metadata(path: StorePath) -> dict[str, Any]:
    """The ``embedpyramid`` JSON a table carries in its Parquet schema metadata (conventions,
    card, settings), read without the rows."""
    with _parquet_read(path):
        if is_local(path):
            schema = pq.read_schema(path)
        else:
            with path.open("rb") as handle:
                schema = pq.read_schema(handle)
    return json.loads((schema.metadata or {})[b"embedpyramid"])


@dataclass(frozen=True)
class ArtifactStore:
    """The layout of one data folder; all artefacts of a project live under ``root``."""

    root: StorePath

    @staticmethod
    def at(location: str | os.PathLike[str] | UPath) -> ArtifactStore:
        """The store of a data folder given as a local path or a URL (see :func:`store_path`)."""
        return ArtifactStore(store_path(location))

    def dataset_dir(self, dataset: str) -> StorePath:
        return self.root / "datasets" / dataset

    def embedding_path(self, card_hash: str, kind: str, table_sha: str) -> StorePath:
        """Content-addressed: (eval card hash, query|document, input table hash)."""
        return self.root / "embeddings" / card_hash[:16] / f"{kind}-{table_sha[:16]}.parquet"

    def run_dir(self, dataset: str, model_key: str) -> StorePath:
        return self.root / "runs" / dataset / model_key

    def metrics_path(self, dataset: str, model_key: str, system: str) -> StorePath:
        return self.root / "metrics" / dataset / model_key / f"{system}.parquet"

    def provenance_path(self, asset: str, dataset: str, owner: str) -> StorePath:
        """What one asset partition was computed from (``owner``: the card key, or the dataset
        for an asset evaluated for no model)."""
        return self.root / "provenance" / asset / dataset / f"{owner}.json"

    @property
    def results_db(self) -> StorePath:
        return self.root / "results.duckdb"

    @property
    def comparisons_dir(self) -> StorePath:
        return self.root / "comparisons"

    def dataset_comparisons_dir(self, dataset: str) -> StorePath:
        """One dataset's comparison tables and verdicts (the ``comparisons`` asset's partition)."""
        return self.comparisons_dir / "datasets" / dataset

    @property
    def report_dir(self) -> StorePath:
        return self.root / "report"
