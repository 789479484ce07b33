"""MTEB task data, read offline into the frozen task tables: MTEB's columns for each task family.

Where a task's subsets and splits are on disk is :mod:`embedpyramid.data.hub_layout`'s
(``save_to_disk`` folders, hub snapshots, split files); this module maps their rows to a family's
texts and pairs.

The columns are the ones MTEB's ``AbsTask*`` classes read (mteb 2.26): STS ``sentence1,
sentence2, score``; pair classification ``sentence1, sentence2, labels`` (MTEB v1's one row of
lists is flattened, as ``AbsTaskPairClassification`` does); classification ``text, label``;
multi-label classification ``text, label`` (a list of labels per text, kept as a JSON list);
clustering ``sentences, labels`` (v2: a row per item; v1: rows of sets, whose items are the MTEB task
version's — :func:`clustering_items`); bitext ``sentence1, sentence2``, each subset a language pair.
``columns:`` renames them for tasks whose files name them otherwise (MTEB renames those in
``dataset_transform``). Retrieval and reranking data has MTEB's retrieval layout
(:mod:`embedpyramid.data.mteb_retrieval`).

The data is on disk, or on the Hugging Face hub (``hub:`` and ``revision:``): :func:`mteb_source`
resolves the revision to its commit and downloads the snapshot into the Hugging Face cache
(offline: reads the cache), and the frozen dataset's manifest records the commit.

Ids keep MTEB's row order (its protocols depend on it): pairs and label-task texts are
``<split or subset>/<row>``, zero-padded; the texts of pair tasks are content hashes, so a
sentence used by several pairs is encoded once (MTEB encodes it once per row; the vectors agree).
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from embedpyramid.config.base import resolve_path
from embedpyramid.config.datasets import MTEB_COLUMNS, MtebDataset
from embedpyramid.config.tasks import ClassificationSettings, ClusteringSettings, MultilabelClassificationSettings
from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables
from embedpyramid.data.hub_layout import MtebLayout, find_layout, read_split
from embedpyramid.hub import DEFAULT_REVISION, HubError, download, resolve_commit

_PRODUCED = frozenset({"pair_id", "text_id", "text_id_1", "text_id_2", "text", "gold", "split", "label",
                       "language_pair"})
"""Columns the loader writes itself: a slice of that name is the loader's column, not the file's."""


def hub_commit(spec: MtebDataset, where: str) -> str:
    """The commit the hub dataset of an MTEB entry names now (online: asked of the hub; offline:
    the cache's ref); a :class:`DataError` naming ``where`` when it cannot be resolved."""
    assert spec.hub is not None
    try:
        return resolve_commit(spec.hub, spec.revision, repo_type="dataset", where=where)
    except HubError as error:
        raise DataError(str(error)) from None


def mteb_source(directory: Path, spec: MtebDataset, where: str) -> tuple[Path, dict[str, Any]]:
    """Where an MTEB entry's data is and how it was found: its ``path`` (resolved against the
    config folder), or its hub dataset's snapshot in the Hugging Face cache, downloaded first when
    online, with ``{"hub", "revision", "commit"}`` for the manifest."""
    if spec.path is not None:
        return resolve_path(directory, spec.path), {}
    assert spec.hub is not None
    commit = hub_commit(spec, where)
    try:
        folder = download(spec.hub, commit, repo_type="dataset", where=where)
    except HubError as error:
        raise DataError(str(error)) from None
    return folder, {"hub": spec.hub, "revision": spec.revision or DEFAULT_REVISION, "commit": commit}


def load_mteb_task(path: Path, spec: MtebDataset, origin: dict[str, Any] | None = None) -> TaskTables:
    """The frozen task tables of an MTEB task's data under ``path``, for ``spec.task``; ``origin``
    (the hub dataset and commit it came from, :func:`mteb_source`) goes into the source."""
    layout = find_layout(path)
    task = spec.task
    if task == "reranking":
        from embedpyramid.data.mteb_retrieval import load_mteb_reranking

        return load_mteb_reranking(layout, spec, origin or {})
    if task == "bitext":
        subsets = [spec.subset] if spec.subset is not None else sorted(layout.subsets)
    else:
        subsets = [one_subset(layout, spec.subset)]
    for subset in subsets:
        if subset not in layout.subsets:
            raise DataError(f"{layout.root}: no subset {subset!r}; subsets found ({layout.kind}): "
                            f"{', '.join(sorted(layout.subsets))} — set subset: to one of them")
    reader = _TaskReader(layout, spec, origin or {})
    if task == "bitext":
        return reader.bitext(subsets)
    if task in ("classification", "clustering", "multilabel_classification"):
        return reader.labelled(subsets[0])
    return reader.pairs(subsets[0])


def one_subset(layout: MtebLayout, wanted: str | None) -> str:
    if wanted is not None:
        return wanted
    if len(layout.subsets) == 1:
        return next(iter(layout.subsets))
    raise DataError(f"{layout.root}: {len(layout.subsets)} subsets ({', '.join(sorted(layout.subsets))}); "
                    "this task reads one: set subset: to one of them in datasets.yaml")


class _TaskReader:
    """Maps the splits of one layout to a family's texts and pairs."""

    def __init__(self, layout: MtebLayout, spec: MtebDataset, origin: dict[str, Any]) -> None:
        self.layout, self.spec, self.origin = layout, spec, origin
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
        return {"loader": "mteb", **self.origin, "path": str(self.layout.root), "layout": self.layout.kind,
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
        """Classification and multi-label classification (the MTEB train and eval splits) and
        clustering (the eval split, its items as the task version keeps them): a text per item."""
        task = self.spec.task
        settings = self.spec.task_settings
        if task in ("classification", "multilabel_classification"):
            assert isinstance(settings, ClassificationSettings | MultilabelClassificationSettings)
            available = self.layout.subsets[subset]
            wanted = [settings.mteb.eval_split]
            if settings.mteb.train_split in available:
                wanted.insert(0, settings.mteb.train_split)
            role = f"{task}.mteb.eval_split"
        else:
            wanted, role = [self.spec.split or "test"], "split"
        text_column, label_column = (self.column(c) for c in MTEB_COLUMNS[task])
        columns: dict[str, list[Any]] = {name: [] for name in ("text_id", "text", "label", *self.slice_columns())}
        if task != "clustering":
            columns["split"] = []
        extra: dict[str, Any] = {"splits": wanted}
        for split in wanted:
            table, where = self.table(subset, split, role)
            if task == "clustering":
                assert isinstance(settings, ClusteringSettings)
                table, extra["items"] = clustering_items(table, text_column, label_column, self.slice_columns(),
                                                         settings, where)
            sentences = _strings(table, text_column, where)
            labels = (_label_lists(table, label_column, where) if task == "multilabel_classification" else
                      _labels(table, label_column, where, clustering=task == "clustering"))
            width = _width(table.num_rows)
            columns["text_id"] += [f"{split}/{row:0{width}d}" for row in range(table.num_rows)]
            columns["text"] += sentences
            columns["label"] += labels
            if task != "clustering":
                columns["split"] += [split] * table.num_rows
            for name in self.slice_columns():
                columns[name] += _labels(table, name, where)
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


def _label_lists(table: pa.Table, column: str, where: str) -> list[str]:
    """Multi-label classification labels: each row's list of labels as a JSON list (order and
    repeats kept, as MTEB reads them)."""
    found = []
    for row, value in enumerate(table.column(column).to_pylist()):
        if not isinstance(value, list) or any(label is None or isinstance(label, list | dict) for label in value):
            raise DataError(f"{where}: row {row}: column {column!r} holds {value!r:.60}, not a list of labels; "
                            "multi-label classification data has a list of labels per text")
        found.append(json.dumps(value))
    return found


def clustering_items(table: pa.Table, text_column: str, label_column: str, extra: list[str],
                     settings: ClusteringSettings, where: str) -> tuple[pa.Table, dict[str, Any]]:
    """The items an MTEB clustering task version evaluates, from its eval split's rows, and what
    was done (for the manifest), in the order of ``clustering.mteb`` (mteb 2.26's
    ``dataset_transform`` of each task):

    1. rows of sets (MTEB v1 data: a list of sentences and their labels per row) become items by
       ``sets``: ``flatten`` concatenates them keeping every sentence (``itertools.chain``);
       ``deduplicate`` keeps each sentence's first occurrence and then, above
       ``deduplicated_max`` items, ``random.Random(subsample_seed).sample`` of that many, in its
       order (``_convert_to_fast``);
    2. ``drop_single_item_labels`` removes the item of every label that has one;
    3. ``stratified_subsample`` keeps that many items by :func:`stratified_subsample`.
    """
    mteb = settings.mteb
    done: dict[str, Any] = {}
    if pa.types.is_list(table.schema.field(text_column).type):
        if extra:
            raise DataError(f"{where}: slice/group columns {extra} cannot be read from MTEB v1 clustering sets")
        table = _clustering_sets(table, text_column, label_column, mteb.sets, mteb.deduplicated_max,
                                 mteb.subsample_seed, where, done)
    labels = _labels(table, label_column, where, clustering=True)
    if mteb.drop_single_item_labels:
        counts: dict[str, int] = {}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        kept = [row for row, label in enumerate(labels) if counts[label] > 1]
        done["single_item_labels_dropped"] = sorted(label for label, count in counts.items() if count == 1)
        table, labels = table.take(kept), [labels[row] for row in kept]
    if mteb.stratified_subsample is not None and mteb.stratified_subsample < table.num_rows:
        try:
            rows = stratified_subsample(labels, mteb.stratified_subsample, mteb.subsample_seed)
        except ValueError as error:
            raise DataError(f"{where}: clustering.mteb.stratified_subsample {mteb.stratified_subsample}: {error}") from None
        table = table.take(rows)
        done["stratified_subsample"] = {"size": mteb.stratified_subsample, "seed": mteb.subsample_seed,
                                        "from": len(labels)}
    return table, done


def _clustering_sets(table: pa.Table, text_column: str, label_column: str, sets: str, deduplicated_max: int,
                     seed: int, where: str, done: dict[str, Any]) -> pa.Table:
    """MTEB v1 clustering rows (each a set of sentences with their labels) as items: flattened,
    or deduplicated and capped as ``_convert_to_fast`` does (:func:`clustering_items`)."""
    seen: set[str] = set()
    kept: dict[str, list[Any]] = {text_column: [], label_column: []}
    records = table.select([text_column, label_column]).to_pylist()
    for row, record in enumerate(records):
        sentences, labels = record[text_column], record[label_column]
        if not isinstance(labels, list) or len(labels) != len(sentences):
            raise DataError(f"{where}: set {row}: {len(sentences)} sentences but labels {labels!r:.60}; each "
                            "sentence needs its label")
        for sentence, label in zip(sentences, labels, strict=True):
            if sets == "flatten" or sentence not in seen:
                seen.add(sentence)
                kept[text_column].append(sentence)
                kept[label_column].append(label)
    items = len(kept[text_column])
    done.update({"v1_sets": len(records), "sets": sets, "items": items})
    flattened = pa.table(kept)
    if sets == "deduplicate":
        done["duplicates_dropped"] = sum(len(record[text_column]) for record in records) - items
        if items > deduplicated_max:
            sample = random.Random(seed).sample(range(items), deduplicated_max)
            done["deduplicated_sample"] = {"size": deduplicated_max, "seed": seed}
            return flattened.take(sample)
    return flattened


def stratified_subsample(labels: list[str], n_samples: int, seed: int) -> list[int]:
    """The rows ``datasets``' ``Dataset.train_test_split(test_size=n_samples, seed=seed,
    stratify_by_column=label)["test"]`` keeps, in its order, on labels cast to a ``ClassLabel``
    of their sorted names — MTEB's ``AbsTask.stratified_subsampling`` (mteb 2.26, datasets'
    ``stratified_shuffle_split_generate_indices``, a port of scikit-learn's
    ``StratifiedShuffleSplit``): one ``numpy.random.default_rng(seed)`` draws how many items of
    each class go to the train and the test part (the approximate mode of the multivariate
    hypergeometric, ties broken at random), then a permutation of each class, then the order of
    the test part. The classes are ordered by their names as strings (``"10"`` before ``"2"``), as
    MTEB's cast orders labels that are not a ``ClassLabel`` yet; a ``ClassLabel`` column's own
    order is not read from the files. Raises ValueError when a label has one item (datasets
    refuses it) or there are fewer samples than labels."""
    names = sorted(set(labels))
    code_of = {name: code for code, name in enumerate(names)}
    codes = np.array([code_of[label] for label in labels], dtype=np.int64)
    rng = np.random.default_rng(seed)
    n_test, n_train = n_samples, len(labels) - n_samples
    class_counts = np.bincount(codes, minlength=len(names))
    if class_counts.min() < 2:
        single = [names[i] for i in np.flatnonzero(class_counts < 2)]
        raise ValueError(f"labels {single[:5]} have a single item, and a stratified sample needs two of every label "
                         "(MTEB's task drops them first: set clustering.mteb.drop_single_item_labels: true)")
    if n_train < len(names) or n_test < len(names):
        raise ValueError(f"{len(names)} labels but a sample of {n_test} (and {n_train} items left): both need at "
                         "least one item per label")
    class_indices = np.split(np.argsort(codes, kind="mergesort"), np.cumsum(class_counts)[:-1])
    train_counts = _approximate_mode(class_counts, n_train, rng)
    test_counts = _approximate_mode(class_counts - train_counts, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for i in range(len(names)):
        permuted = class_indices[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(permuted[: train_counts[i]])
        test.extend(permuted[train_counts[i]: train_counts[i] + test_counts[i]])
    rng.permutation(train)  # datasets shuffles the train part first; the draw moves the generator
    return [int(row) for row in rng.permutation(test)]


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """The approximate mode of the multivariate hypergeometric of ``class_counts`` for
    ``n_draws`` draws (scikit-learn's ``_approximate_mode``, as ``datasets.utils.stratify`` has it):
    the floors of the proportional shares, then one more for the largest remainders, ties drawn at
    random."""
    continuous = n_draws * class_counts / class_counts.sum()
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (indices,) = np.where(remainder == value)
            add_now = min(len(indices), need_to_add)
            indices = rng.choice(indices, size=add_now, replace=False)
            floored[indices] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(np.int64)

