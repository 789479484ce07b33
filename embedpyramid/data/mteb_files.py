"""MTEB task data, read offline into the frozen task tables: MTEB's columns for each task family.

Where a task's subsets and splits are on disk is :mod:`embedpyramid.data.hub_layout`'s
(``save_to_disk`` folders, hub snapshots, split files); this module maps their rows to a family's
texts and pairs.

The columns are the ones MTEB's ``AbsTask*`` classes read (mteb 2.26): STS ``sentence1,
sentence2, score``; pair classification ``sentence1, sentence2, labels`` (MTEB v1's one row of
lists is flattened, as ``AbsTaskPairClassification`` does); classification ``text, label``;
clustering ``sentences, labels`` (v2: a row per item; v1: rows of lists are concatenated with
each sentence's first occurrence kept, as mteb's ``_convert_to_fast``, without its 100,000-item
downsampling); bitext ``sentence1, sentence2``, each subset a language pair. ``columns:`` renames
them for tasks whose files name them otherwise (MTEB renames those in ``dataset_transform``).

Ids keep MTEB's row order (its protocols depend on it): pairs and label-task texts are
``<split or subset>/<row>``, zero-padded; the texts of pair tasks are content hashes, so a
sentence used by several pairs is encoded once (MTEB encodes it once per row; the vectors agree).
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from embedpyramid.config.datasets import MTEB_COLUMNS, MtebDataset
from embedpyramid.config.tasks import ClassificationSettings
from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables
from embedpyramid.data.hub_layout import MtebLayout, find_layout, read_split

_PRODUCED = frozenset({"pair_id", "text_id", "text_id_1", "text_id_2", "text", "gold", "split", "label",
                       "language_pair"})
"""Columns the loader writes itself: a slice of that name is the loader's column, not the file's."""


def load_mteb_task(path: Path, spec: MtebDataset) -> TaskTables:
    """The frozen task tables of an MTEB task's data under ``path``, for ``spec.task``."""
    layout = find_layout(path)
    task = spec.task
    if task == "bitext":
        subsets = [spec.subset] if spec.subset is not None else sorted(layout.subsets)
    else:
        subsets = [_one_subset(layout, spec.subset)]
    for subset in subsets:
        if subset not in layout.subsets:
            raise DataError(f"{layout.root}: no subset {subset!r}; subsets found ({layout.kind}): "
                            f"{', '.join(sorted(layout.subsets))} — set subset: to one of them")
    reader = _TaskReader(layout, spec)
    if task == "bitext":
        return reader.bitext(subsets)
    if task in ("classification", "clustering"):
        return reader.labelled(subsets[0])
    return reader.pairs(subsets[0])


def _one_subset(layout: MtebLayout, wanted: str | None) -> str:
    if wanted is not None:
        return wanted
    if len(layout.subsets) == 1:
        return next(iter(layout.subsets))
    raise DataError(f"{layout.root}: {len(layout.subsets)} subsets ({', '.join(sorted(layout.subsets))}); "
                    "this task reads one: set subset: to one of them in datasets.yaml")


class _TaskReader:
    """Maps the splits of one layout to a family's texts and pairs."""

    def __init__(self, layout: MtebLayout, spec: MtebDataset) -> None:
        self.layout, self.spec = layout, spec
        self.where = str(layout.root)

    def table(self, subset: str, split: str, role: str) -> tuple[pa.Table, str]:
        """The rows of one split and the files they came from (for messages)."""
        splits = self.layout.subsets[subset]
        if split not in splits:
            raise DataError(f"{self.layout.root}: subset {subset!r} has no split {split!r} (its splits: "
                            f"{', '.join(sorted(splits))}); set {role} to one of them in datasets.yaml")
        files = splits[split]
        where = str(files[0]) if len(files) == 1 else f"{files[0]} (+{len(files) - 1} more)"
        table = read_split(files)
        wanted = [self.column(name) for name in MTEB_COLUMNS[self.spec.task]]
        extra = [c for c in self.slice_columns() if c not in wanted]
        missing = [c for c in [*wanted, *extra] if c not in table.column_names]
        if missing:
            expected = ", ".join(MTEB_COLUMNS[self.spec.task])
            raise DataError(f"{where}: no column(s) {', '.join(missing)} (columns: {', '.join(table.column_names)}); "
                            f"MTEB {self.spec.task} data has {expected} — name the file's columns with columns: "
                            f"{{<expected>: <column>}} in datasets.yaml, or fix slices/group_column")
        return table, where

    def column(self, name: str) -> str:
        return self.spec.columns.get(name, name)

    def slice_columns(self) -> list[str]:
        wanted = [*self.spec.slices, *([self.spec.group_column] if self.spec.group_column else [])]
        return [c for c in dict.fromkeys(wanted) if c not in _PRODUCED]

    def source(self, **extra: Any) -> dict[str, Any]:
        return {"loader": "mteb", "path": str(self.layout.root), "layout": self.layout.kind,
                "columns": {name: self.column(name) for name in MTEB_COLUMNS[self.spec.task]}, **extra}

    def pairs(self, subset: str) -> TaskTables:
        """STS and pair classification: one pair per row of each split read."""
        task = self.spec.task
        if task == "pair_classification":
            splits = {"test": self.spec.split or "test"}
            if self.spec.dev_split is not None:
                splits = {"dev": self.spec.dev_split, **splits}
        else:
            splits = {self.spec.split or "test": self.spec.split or "test"}
        texts: dict[str, str] = {}
        columns: dict[str, list[Any]] = {name: [] for name in (*PAIRS_SCHEMA.names, *self.slice_columns())}
        for label, split in splits.items():
            role = "dev_split" if label == "dev" else "split"
            table, where = self.table(subset, split, role)
            if task == "pair_classification":
                table = _flatten_v1(table, [self.column(c) for c in MTEB_COLUMNS[task]] + self.slice_columns(), where)
            first, second = (_strings(table, self.column(c), where) for c in ("sentence1", "sentence2"))
            gold_column = self.column("score" if task == "sts" else "labels")
            gold = _scores(table, gold_column, where) if task == "sts" else _binary(table, gold_column, where)
            width = _width(table.num_rows)
            for row, (a, b) in enumerate(zip(first, second, strict=True)):
                ids = []
                for sentence in (a, b):
                    text_id = "t" + hashlib.sha1(sentence.encode("utf-8")).hexdigest()[:12]
                    texts.setdefault(text_id, sentence)
                    ids.append(text_id)
                columns["pair_id"].append(f"{split}/{row:0{width}d}")
                columns["text_id_1"].append(ids[0])
                columns["text_id_2"].append(ids[1])
            columns["gold"] += gold
            columns["split"] += [label] * table.num_rows
            for name in self.slice_columns():
                columns[name] += _labels(table, name, where)
        ordered = sorted(texts)
        pairs = pa.table(columns).cast(pa.schema([*PAIRS_SCHEMA, *(pa.field(c, pa.string())
                                                                    for c in self.slice_columns())]))
        source = self.source(subset=subset, splits=splits)
        return task_tables(task, pa.table({"text_id": ordered, "text": [texts[t] for t in ordered]}), pairs, source,
                           self.where)

    def labelled(self, subset: str) -> TaskTables:
        """Classification (the MTEB train and eval splits) and clustering (the eval split): a text per item."""
        task = self.spec.task
        settings = self.spec.task_settings
        if task == "classification":
            assert isinstance(settings, ClassificationSettings)
            available = self.layout.subsets[subset]
            wanted = [settings.mteb.eval_split]
            if settings.mteb.train_split in available:
                wanted.insert(0, settings.mteb.train_split)
            role = "classification.mteb.eval_split"
        else:
            wanted, role = [self.spec.split or "test"], "split"
        text_column, label_column = (self.column(c) for c in MTEB_COLUMNS[task])
        columns: dict[str, list[Any]] = {name: [] for name in ("text_id", "text", "label", *self.slice_columns())}
        if task == "classification":
            columns["split"] = []
        sets = 0
        for split in wanted:
            table, where = self.table(subset, split, role)
            if task == "clustering" and pa.types.is_list(table.schema.field(text_column).type):
                sets += table.num_rows
                table = _clustering_v1(table, text_column, label_column, self.slice_columns(), where)
            sentences = _strings(table, text_column, where)
            labels = _labels(table, label_column, where, clustering=task == "clustering")
            width = _width(table.num_rows)
            columns["text_id"] += [f"{split}/{row:0{width}d}" for row in range(table.num_rows)]
            columns["text"] += sentences
            columns["label"] += labels
            if task == "classification":
                columns["split"] += [split] * table.num_rows
            for name in self.slice_columns():
                columns[name] += _labels(table, name, where)
        extra = {"splits": wanted, **({"v1_sets_concatenated": sets} if sets else {})}
        return task_tables(task, pa.table(columns), None, self.source(subset=subset, **extra), self.where)

    def bitext(self, subsets: list[str]) -> TaskTables:
        """Bitext: each subset a language pair, each row a source and its translation."""
        split = self.spec.split or "test"
        texts: dict[str, str] = {}
        columns: dict[str, list[Any]] = {name: [] for name in (*PAIRS_SCHEMA.names, "language_pair",
                                                               *self.slice_columns())}
        counts = {}
        for subset in subsets:
            table, where = self.table(subset, split, "split")
            first, second = (_strings(table, self.column(c), where) for c in ("sentence1", "sentence2"))
            width = _width(table.num_rows)
            for row, (a, b) in enumerate(zip(first, second, strict=True)):
                ids = []
                for side, sentence in (("1", a), ("2", b)):
                    text_id = f"{subset}:{side}:" + hashlib.sha1(sentence.encode("utf-8")).hexdigest()[:12]
                    texts.setdefault(text_id, sentence)
                    ids.append(text_id)
                columns["pair_id"].append(f"{subset}/{row:0{width}d}")
                columns["text_id_1"].append(ids[0])
                columns["text_id_2"].append(ids[1])
            columns["gold"] += [1.0] * table.num_rows
            columns["split"] += [split] * table.num_rows
            columns["language_pair"] += [subset] * table.num_rows
            for name in self.slice_columns():
                columns[name] += _labels(table, name, where)
            counts[subset] = table.num_rows
        ordered = sorted(texts)
        pairs = pa.table(columns).cast(pa.schema([*PAIRS_SCHEMA, pa.field("language_pair", pa.string()),
                                                  *(pa.field(c, pa.string()) for c in self.slice_columns())]))
        source = self.source(split=split, pairs=counts)
        return task_tables("bitext", pa.table({"text_id": ordered, "text": [texts[t] for t in ordered]}), pairs,
                           source, self.where)


def _width(rows: int) -> int:
    return max(6, len(str(max(rows - 1, 0))))


def _strings(table: pa.Table, column: str, where: str) -> list[str]:
    values = table.column(column)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise DataError(f"{where}: column {column!r} holds {values.type}, not text; name the text column with "
                        "columns: in datasets.yaml")
    if values.null_count:
        row = pc.index(pc.is_null(values), True).as_py()
        raise DataError(f"{where}: column {column!r} is empty (null) in row {row}; remove the row or give it text")
    return values.to_pylist()


def _scores(table: pa.Table, column: str, where: str) -> list[float]:
    values = table.column(column).to_pylist()
    for row, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise DataError(f"{where}: row {row}: score {value!r} in column {column!r} is not a finite number")
    return [float(value) for value in values]


def _binary(table: pa.Table, column: str, where: str) -> list[float]:
    values = table.column(column).to_pylist()
    for row, value in enumerate(values):
        if value not in (0, 1):
            raise DataError(f"{where}: row {row}: label {value!r} in column {column!r} is not 0 or 1 (pair "
                            "classification labels are 1 for a duplicate, 0 otherwise)")
    return [float(value) for value in values]


def _labels(table: pa.Table, column: str, where: str, *, clustering: bool = False) -> list[str]:
    """Labels (or slice values) as strings; a one-element list (MTEB v2 clustering) is its element."""
    found = []
    for row, value in enumerate(table.column(column).to_pylist()):
        if isinstance(value, list):
            if not (clustering and len(value) == 1):
                kind = "hierarchical labels" if clustering else "a list"
                raise DataError(f"{where}: row {row}: column {column!r} holds {kind} ({value!r}); one label per "
                                "item is read (multi-label and hierarchical tasks are not supported)")
            value = value[0]
        if value is None:
            raise DataError(f"{where}: row {row}: column {column!r} is null; every item needs a value")
        found.append(str(value))
    return found


def _flatten_v1(table: pa.Table, columns: list[str], where: str) -> pa.Table:
    """MTEB v1's pair classification split: one row whose columns are lists, flattened to a row per pair."""
    if not pa.types.is_list(table.schema.field(columns[0]).type):
        return table
    if table.num_rows != 1:
        raise DataError(f"{where}: {table.num_rows} rows of lists; MTEB v1 pair classification data has one row "
                        "per split (its columns lists of equal length)")
    row = table.slice(0, 1).to_pylist()[0]
    return pa.table({column: row[column] for column in columns})


def _clustering_v1(table: pa.Table, text_column: str, label_column: str, extra: list[str], where: str) -> pa.Table:
    """MTEB v1 clustering rows (each a set of sentences with their labels) concatenated, each
    sentence's first occurrence kept (mteb's ``_convert_to_fast``)."""
    seen: set[str] = set()
    kept: dict[str, list[Any]] = {text_column: [], label_column: []}
    if extra:
        raise DataError(f"{where}: slice/group columns {extra} cannot be read from MTEB v1 clustering sets")
    for row, record in enumerate(table.select([text_column, label_column]).to_pylist()):
        sentences, labels = record[text_column], record[label_column]
        if not isinstance(labels, list) or len(labels) != len(sentences):
            raise DataError(f"{where}: set {row}: {len(sentences)} sentences but labels {labels!r:.60}; each "
                            "sentence needs its label")
        for sentence, label in zip(sentences, labels, strict=True):
            if sentence not in seen:
                seen.add(sentence)
                kept[text_column].append(sentence)
                kept[label_column].append(label)
    return pa.table(kept)

