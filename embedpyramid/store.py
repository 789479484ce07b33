"""Where artefacts live under the data folder, atomic writes, and literal-path reads.

Every write goes to a temporary file beside its target and is moved into place with
``os.replace``: a crash or a bad input mid-way leaves what was already written intact. Every
Parquet read goes through :func:`read_frame` or :func:`read_table`, which take the path
literally (a data folder named ``runs[1]`` is not a glob pattern).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; move it onto ``target`` only on success."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def write_parquet(table: pa.Table, target: Path) -> Path:
    with atomic_path(target) as temporary:
        pq.write_table(table, temporary, compression="zstd")
    return target


def write_text(text: str, target: Path) -> Path:
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return target


def write_json(value: Any, target: Path) -> Path:
    return write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", target)


def write_with(writer: Callable[[Path], None], target: Path) -> Path:
    """Atomically create ``target`` with a writer that takes a path (e.g. a DuckDB database)."""
    with atomic_path(target) as temporary:
        temporary.unlink()
        writer(temporary)
    return target


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_frame(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """A Parquet file as a polars frame; the path is taken literally, never as a glob."""
    return pl.read_parquet(path, columns=columns, glob=False)


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file as an Arrow table."""
    return pq.read_table(path, columns=columns)


def read_table_metadata(path: Path) -> dict[str, Any]:
    """The ``embedpyramid`` JSON a table carries in its Parquet schema metadata (conventions,
    card, settings), read without the rows."""
    return json.loads((pq.read_schema(path).metadata or {})[b"embedpyramid"])


@dataclass(frozen=True)
class ArtifactStore:
    """The layout of one data folder; all artefacts of a project live under ``root``."""

    root: Path

    def dataset_dir(self, dataset: str) -> Path:
        return self.root / "datasets" / dataset

    def embedding_path(self, card_hash: str, kind: str, table_sha: str) -> Path:
        """Content-addressed: (eval card hash, query|document, input table hash)."""
        return self.root / "embeddings" / card_hash[:16] / f"{kind}-{table_sha[:16]}.parquet"

    def run_dir(self, dataset: str, model_key: str) -> Path:
        return self.root / "runs" / dataset / model_key

    def metrics_path(self, dataset: str, model_key: str, system: str) -> Path:
        return self.root / "metrics" / dataset / model_key / f"{system}.parquet"

    @property
    def results_db(self) -> Path:
        return self.root / "results.duckdb"

    @property
    def comparisons_dir(self) -> Path:
        return self.root / "comparisons"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"
