"""Hugging Face datasets as people keep them on disk: where a dataset's subsets and splits are.

An MTEB task's data is a Hugging Face dataset: one *subset* (HF config: ``default``, or a language
/ language pair) of *splits*. Three on-disk layouts are read, found in this order:

* ``save_to_disk`` folders (``datasets``' own format): a ``DatasetDict`` is ``dataset_dict.json``
  plus ``<split>/`` folders, each a ``state.json`` listing its Arrow files (the Arrow IPC
  *stream* format, read with ``pyarrow.ipc.open_stream``); one saved ``Dataset`` is such a
  folder by itself (its split is ``state.json``'s ``_split``, or its folder name when the folder
  sits in a layout of ``<split>/`` folders); ``<subset>/`` folders holding either are subsets.
* A hub snapshot whose ``README.md`` lists ``configs:`` (``config_name`` and ``data_files``: a
  split → path / glob list) — the layout ``huggingface_hub.snapshot_download`` and a git clone
  keep. A Hugging Face cache folder (``datasets--<org>--<name>``) is read through the snapshot
  ``refs/main`` names, or its only snapshot.
* Data files named after their split, as ``Dataset.to_parquet`` / ``to_json`` write them and
  the hub's conventions lay them out: ``[data/][<subset>/]<split>[-00000-of-00001].<ext>`` or
  ``[data/]<subset>/<split>/<any>.<ext>`` (the parquet converter), ``<ext>`` one of
  ``parquet``, ``jsonl``, ``jsonl.gz`` (JSON Lines through ``pyarrow.json``).

:func:`find_layout` finds the layout; :func:`read_split` reads one split's files (a hub card may
also name ``.tsv`` files with a header row, as the qrels of MTEB's older retrieval datasets). What
the rows mean to a task family is :mod:`embedpyramid.data.mteb_files`' (retrieval and reranking:
:mod:`embedpyramid.data.mteb_retrieval`').
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import yaml

from embedpyramid.data.frozen import DataError

DEFAULT_SUBSET = "default"
DATA_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
_SHARD = re.compile(r"^(?P<split>[^/]+?)(?:-\d{5}-of-\d{5})?$")
_HINT = ("point path at an MTEB task's data: a save_to_disk folder, a hub snapshot, or files named "
         "<split>.parquet / <split>.jsonl(.gz) (optionally under data/ or <subset>/)")


@dataclass(frozen=True)
class MtebLayout:
    """The subsets and splits found under ``root``: subset → split → the files of that split, in
    order; ``kind`` names the layout (``save_to_disk``, ``hub configs``, ``split files``)."""

    root: Path
    kind: str
    subsets: dict[str, dict[str, list[Path]]]

    def files(self) -> list[Path]:
        return sorted({path for splits in self.subsets.values() for paths in splits.values() for path in paths})


def find_layout(path: Path) -> MtebLayout:
    """The layout of an MTEB task's data under ``path`` (see the module docstring); a folder in
    none of them is an error naming it and the layouts that are read."""
    if path.is_file():
        split = _split_of_file(path)
        if split is None:
            raise DataError(f"{path}: not a .parquet, .jsonl or .jsonl.gz data file; {_HINT}")
        return MtebLayout(path.parent, "split files", {DEFAULT_SUBSET: {split: [path]}})
    if not path.is_dir():
        raise DataError(f"{path}: no such file or folder; {_HINT}")
    root = _snapshot(path)
    for kind, finder in (("save_to_disk", _saved_subsets), ("hub configs", _readme_subsets),
                         ("split files", _file_subsets)):
        subsets = finder(root)
        if subsets:
            return MtebLayout(root, kind, subsets)
    raise DataError(f"{root}: no MTEB task data found (no dataset_dict.json or state.json, no README.md with "
                    f"configs:, no <split>.parquet / .jsonl / .jsonl.gz files); {_HINT}")


def _snapshot(path: Path) -> Path:
    """A Hugging Face cache folder's snapshot (``refs/main``, else the only one); any other folder as it is."""
    snapshots = path / "snapshots"
    if not snapshots.is_dir():
        return path
    reference = path / "refs" / "main"
    if reference.is_file() and (snapshots / reference.read_text().strip()).is_dir():
        return snapshots / reference.read_text().strip()
    found = sorted(p for p in snapshots.iterdir() if p.is_dir())
    if len(found) != 1:
        raise DataError(f"{snapshots}: {len(found)} snapshots and no refs/main naming one; point path at one "
                        f"of them ({', '.join(p.name for p in found) or 'none'})")
    return found[0]


def _saved_dataset(folder: Path) -> list[Path]:
    """The Arrow files of one ``save_to_disk`` Dataset folder, in ``state.json`` order."""
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        files = [folder / entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{state_path}: not a datasets save_to_disk state file ({error}); save the dataset again "
                        "with Dataset.save_to_disk") from None
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise DataError(f"{state_path}: lists Arrow files that are missing: {', '.join(missing)}; copy the whole "
                        "save_to_disk folder")
    return files


def _saved_splits(folder: Path) -> dict[str, list[Path]]:
    """The splits of a ``save_to_disk`` DatasetDict, Dataset, or folder of ``<split>/`` Datasets."""
    listing = folder / "dataset_dict.json"
    if listing.is_file():
        try:
            names = json.loads(listing.read_text(encoding="utf-8"))["splits"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DataError(f"{listing}: not a datasets DatasetDict listing ({error}); save the dataset again "
                            "with DatasetDict.save_to_disk") from None
        return {str(name): _saved_dataset(folder / str(name)) for name in names}
    if (folder / "state.json").is_file():
        split = json.loads((folder / "state.json").read_text(encoding="utf-8")).get("_split")
        if not split:
            raise DataError(f"{folder / 'state.json'}: a saved Dataset with no split name; save a DatasetDict "
                            "instead (DatasetDict({'test': dataset}).save_to_disk(...)) or move the folder into "
                            "one named after its split (<path>/test/)")
        return {str(split): _saved_dataset(folder)}
    return {child.name: _saved_dataset(child) for child in _children(folder) if (child / "state.json").is_file()}


def _saved_subsets(root: Path) -> dict[str, dict[str, list[Path]]]:
    splits = _saved_splits(root)
    if splits:
        return {DEFAULT_SUBSET: splits}
    return {child.name: found for child in _children(root) if (found := _saved_splits(child))}


def _readme_subsets(root: Path) -> dict[str, dict[str, list[Path]]]:
    """The ``configs:`` of a hub dataset card (``README.md`` front matter), globs resolved under ``root``."""
    readme = root / "README.md"
    if not readme.is_file():
        return {}
    text = readme.read_text(encoding="utf-8", errors="replace")
    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    if match is None:
        return {}
    try:
        card = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as error:
        raise DataError(f"{readme}: the dataset card's YAML header does not parse ({' '.join(str(error).split())}); "
                        "fix it or remove README.md to read the files by their names") from None
    configs = card.get("configs") if isinstance(card, dict) else None
    if not isinstance(configs, list):
        return {}
    subsets: dict[str, dict[str, list[Path]]] = {}
    for config in configs:
        if not isinstance(config, dict):
            continue
        name = str(config.get("config_name", DEFAULT_SUBSET))
        splits: dict[str, list[Path]] = {}
        for split, patterns in _data_files(config.get("data_files")).items():
            files = sorted({Path(found) for pattern in patterns
                            for found in glob.glob(str(root / pattern), recursive=True) if Path(found).is_file()})
            if files:
                splits[split] = files
        if splits:
            subsets[name] = splits
    return subsets


def _data_files(value: Any) -> dict[str, list[str]]:
    """A card's ``data_files`` as split → patterns (a bare pattern or list of them is ``train``, as on the hub)."""
    if isinstance(value, str):
        return {"train": [value]}
    if isinstance(value, dict):
        return {str(split): [p] if isinstance(p, str) else list(p) for split, p in value.items()}
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            return {"train": list(value)}
        found: dict[str, list[str]] = {}
        for item in value:
            if isinstance(item, dict) and "path" in item:
                paths = item["path"]
                found.setdefault(str(item.get("split", "train")), []).extend([paths] if isinstance(paths, str) else paths)
        return found
    return {}


def _file_subsets(root: Path) -> dict[str, dict[str, list[Path]]]:
    """Data files named after their split, under ``root`` or ``root/data``."""
    subsets: dict[str, dict[str, list[Path]]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and _suffix(p)):
        parts = path.relative_to(root).parts
        if any(part.startswith(".") for part in parts):
            continue
        if parts[0] == "data" and len(parts) > 1:
            parts = parts[1:]
        if len(parts) == 1:
            subset, split = DEFAULT_SUBSET, _split_of_file(path)
        elif len(parts) == 2:
            subset, split = parts[0], _split_of_file(path)
        elif len(parts) == 3:
            subset, split = parts[0], parts[1]
        else:
            continue
        if split is not None:
            subsets.setdefault(subset, {}).setdefault(split, []).append(path)
    return subsets


def _suffix(path: Path) -> str | None:
    return next((suffix for suffix in DATA_SUFFIXES if path.name.endswith(suffix)), None)


def _split_of_file(path: Path) -> str | None:
    suffix = _suffix(path)
    if suffix is None:
        return None
    match = _SHARD.match(path.name[: -len(suffix)])
    return match.group("split") if match else None


def _children(folder: Path) -> list[Path]:
    return sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.startswith("."))


def read_split(files: Iterable[Path]) -> pa.Table:
    """The rows of one split's files, concatenated in order."""
    tables = []
    for path in files:
        try:
            if path.suffix == ".arrow":
                with pa.memory_map(str(path)) as source:
                    tables.append(pa.ipc.open_stream(source).read_all())
            elif path.name.endswith(".parquet"):
                tables.append(pq.read_table(path))
            elif path.name.endswith(".tsv"):
                tables.append(pa_csv.read_csv(path, parse_options=pa_csv.ParseOptions(delimiter="\t")))
            else:
                tables.append(pa_json.read_json(path))
        except (pa.ArrowInvalid, OSError) as error:
            raise DataError(f"{path}: not readable as {path.name.split('.', 1)[-1]} "
                            f"({' '.join(str(error).split())[:200]}); download or save the file again") from None
    table = pa.concat_tables(tables, promote_options="default")
    return table.replace_schema_metadata(None)


