"""The environment record: what a reader needs to reproduce or to trust the numbers.

The eval cards (every field that changes a vector, and the run settings that do not), the
datasets (source, sizes, content hash), the metric conventions of every (dataset, model), the
versions of the packages that compute them, and the machine: Python, platform, CPU model,
logical CPUs and the BLAS thread pools — the record the seed studies print beside their
results.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl
from threadpoolctl import threadpool_info

from embedpyramid.rendering.document import ReportSection

PACKAGES = (
    "embedpyramid", "numpy", "scipy", "polars", "pyarrow", "duckdb", "torch", "sentence-transformers",
    "transformers", "faiss-cpu", "model2vec", "dagster",
)
"""The packages whose versions the record lists (absent ones are marked so)."""


def environment_section(
    cards: Sequence[Mapping[str, Any]],
    datasets: Sequence[Mapping[str, Any]],
    conventions: Sequence[Mapping[str, Any]],
) -> ReportSection:
    """The environment record as a report section.

    ``cards``: one mapping per model with ``model`` (the partition key), ``card`` (the hashed
    fields) and ``run`` (batch size, device, threads). ``datasets``: ``dataset`` and its frozen
    ``manifest``. ``conventions``: ``dataset``, ``model``, ``conventions`` and ``tied_queries``.
    """
    return ReportSection(
        title="Run environment",
        intro=(
            "How these numbers were made: the eval cards (everything that changes a vector is in the card's "
            "hash), the datasets, the metric conventions, the package versions and the machine."
        ),
        tables=(
            ("Eval cards", _cards_table(cards)),
            ("Datasets", _datasets_table(datasets)),
            ("Metric conventions", _conventions_table(conventions)),
            ("Packages", package_versions()),
            ("Machine", machine_table()),
        ),
    )


def package_versions(packages: Sequence[str] = PACKAGES) -> pl.DataFrame:
    """``package, version`` of each package, with Python first."""
    rows = [("python", platform.python_version())]
    for name in packages:
        try:
            rows.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            rows.append((name, "not installed"))
    return pl.DataFrame(rows, schema={"package": pl.String, "version": pl.String}, orient="row")


def machine_table() -> pl.DataFrame:
    """Platform, CPU model, logical CPUs and the BLAS/OpenMP thread pools of this process."""
    pools = ", ".join(
        f"{pool.get('internal_api', '?')} {pool.get('version') or ''} ({pool.get('num_threads')} threads)".replace("  ", " ")
        for pool in threadpool_info()
    )
    rows = [
        ("platform", platform.platform()),
        ("CPU", _cpu_model()),
        ("logical CPUs", str(os.cpu_count())),
        ("thread pools", pools or "none loaded"),
        ("executable", sys.executable),
    ]
    return pl.DataFrame(rows, schema={"item": pl.String, "value": pl.String}, orient="row")


def _cards_table(cards: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    rows = []
    for entry in cards:
        card, run = entry["card"], entry.get("run") or {}
        rows.append({
            "model": entry["model"],
            "backend": str(card.get("backend", "")),
            "source": _compact(card.get("source") or card.get("entry_point")),
            "dimension": _compact(card.get("dimension") or "native"),
            "normalize": _compact(card.get("normalize")),
            "pooling": _compact(card.get("pooling")),
            "max tokens": _compact(card.get("max_tokens")),
            "prompts (query / document)": f"{card.get('query_prompt') or '—'} / {card.get('document_prompt') or '—'}",
            "run": _compact(run),
        })
    return pl.DataFrame(rows, schema=dict.fromkeys(
        ["model", "backend", "source", "dimension", "normalize", "pooling", "max tokens",
         "prompts (query / document)", "run"], pl.String()))


def _datasets_table(datasets: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    rows = []
    for entry in datasets:
        manifest = entry["manifest"]
        counts = manifest.get("counts") or {}
        source = {key: value for key, value in (manifest.get("source") or {}).items() if not isinstance(value, list)}
        rows.append({
            "dataset": entry["dataset"],
            "source": _compact(source),
            "queries": _compact(counts.get("queries")),
            "documents": _compact(counts.get("documents")),
            "qrels": _compact(counts.get("qrels")),
            "version": str(manifest.get("version", ""))[:12],
        })
    return pl.DataFrame(rows, schema=dict.fromkeys(
        ["dataset", "source", "queries", "documents", "qrels", "version"], pl.String()))


def _conventions_table(conventions: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    rows = [
        {
            "dataset": entry["dataset"],
            "model": entry["model"],
            **{key: _compact(value) for key, value in entry["conventions"].items()},
            "queries with ties at a cutoff": _compact(entry.get("tied_queries", "")),
        }
        for entry in conventions
    ]
    return pl.DataFrame(rows).cast(pl.String) if rows else pl.DataFrame()


def _compact(value: object) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key}={_compact(item)}" for key, item in value.items() if item not in (None, "", {}))
    if isinstance(value, Path):
        return value.name
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return "" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"
