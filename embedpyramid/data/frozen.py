"""Frozen datasets: corpus, queries and qrels as normalized Parquet tables plus a manifest.

A frozen dataset is three tables sorted by id plus a manifest holding the source, the counts
and the sha256 of each normalized table. The dataset's data version is the hash of those
hashes, so re-freezing identical data disturbs nothing downstream. A task dataset (the L2
families other than retrieval) is frozen the same way from its ``texts`` and ``pairs`` tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from embedpyramid.hashing import sha256_json, sha256_table
from embedpyramid.store import read_json, read_table, write_json, write_parquet


class DataError(ValueError):
    """Bad input data; the message names the file, the line or the id, and what to do."""


class TaskError(ValueError):
    """Task inputs that cannot be evaluated; the message names the dataset, the ids and the fix."""


def trec_id_problem(identifier: str) -> str | None:
    """Why ``identifier`` cannot be a field of a TREC file (None when it can)."""
    if not identifier:
        return "it is empty"
    if any(character.isspace() for character in identifier):
        return "it contains whitespace, which separates the columns of TREC files"
    if not identifier.isprintable():
        return "it contains a control character"
    return None


CORPUS_SCHEMA = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
QRELS_SCHEMA = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("relevance", pa.int32())])
GOLD_ANSWERS_SCHEMA = pa.schema([("query_id", pa.string()), ("answer", pa.string())])
"""Reference answers of L6, one row per (query, accepted answer); not a frozen table of its own
(see :mod:`embedpyramid.data.gold_answers`)."""
TABLES = ("corpus", "queries", "qrels")


@dataclass(frozen=True)
class RawDataset:
    """Loaded, validated tables before freezing; ``source`` describes where they came from."""

    corpus: pa.Table
    queries: pa.Table
    qrels: pa.Table
    source: dict[str, Any]


@dataclass(frozen=True)
class FrozenDataset:
    """A frozen dataset on disk: its folder and manifest."""

    directory: Path
    manifest: dict[str, Any]

    @property
    def version(self) -> str:
        return self.manifest["version"]

    def table_sha(self, table: str) -> str:
        return self.manifest["tables"][table]["sha256"]

    def path(self, table: str) -> Path:
        return self.directory / f"{table}.parquet"

    def read(self, table: str) -> pa.Table:
        return read_table(self.path(table))


@dataclass(frozen=True)
class EncodingInputs:
    """The ids and texts of one table to encode, and the hash that addresses its vectors."""

    ids: list[str]
    texts: list[str]
    table_sha: str


ENCODED_TABLE = {"query": "queries", "document": "corpus"}


def encoding_inputs(frozen: FrozenDataset, kind: str) -> EncodingInputs:
    """Queries are encoded by their text, documents by :func:`document_texts`."""
    table_name = ENCODED_TABLE[kind]
    table = frozen.read(table_name)
    ids = table.column(0).to_pylist()
    texts = document_texts(table) if kind == "document" else table.column("text").to_pylist()
    return EncodingInputs(ids, texts, frozen.table_sha(table_name))


def document_texts(corpus: pa.Table) -> list[str]:
    """The text encoded for each document: ``title + " " + text`` (BEIR convention) or the text."""
    titles = corpus.column("title").to_pylist()
    texts = corpus.column("text").to_pylist()
    return [f"{title} {text}" if title else text for title, text in zip(titles, texts, strict=True)]


def document_lengths(corpus: pa.Table) -> np.ndarray:
    """The length in characters of each document's :func:`document_texts`, ``len`` of the
    Python string, computed in Arrow: no string of the corpus becomes a Python object (at a
    million documents those would outweigh the corpus's vectors)."""
    titles = pc.fill_null(corpus.column("title"), "")
    texts = pc.utf8_length(pc.fill_null(corpus.column("text"), "")).to_numpy(zero_copy_only=False).astype(np.int64)
    title_lengths = pc.utf8_length(titles).to_numpy(zero_copy_only=False).astype(np.int64)
    return texts + np.where(title_lengths > 0, title_lengths + 1, 0)



def select_query_columns(queries: pa.Table, slices: list[str], group_column: str | None, where: str) -> pa.Table:
    """``query_id``, ``text`` and the configured slice and group columns; a missing one is an error
    naming ``where`` (the file) and the fields that exist."""
    wanted = [*slices, *([group_column] if group_column else [])]
    missing = [column for column in wanted if column not in queries.column_names]
    if missing:
        raise DataError(
            f"{where}: slice/group columns {missing} are not query fields; available: "
            f"{', '.join(c for c in queries.column_names if c not in ('query_id', 'text'))}"
        )
    return queries.select(["query_id", "text", *dict.fromkeys(wanted)])


def empty_text_ids(raw: RawDataset) -> dict[str, list[str]]:
    """Ids of the documents and queries whose encoded text is empty (kept by ``empty_texts: keep``)."""
    documents = [doc_id for doc_id, text in zip(raw.corpus["doc_id"].to_pylist(), document_texts(raw.corpus), strict=True)
                 if not text.strip()]
    queries = [query_id for query_id, text in zip(raw.queries["query_id"].to_pylist(), raw.queries["text"].to_pylist(),
                                                  strict=True) if not (text or "").strip()]
    return {"documents": documents, "queries": queries}


def table_hashes(raw: RawDataset) -> dict[str, str]:
    return {table: sha256_table(getattr(raw, table)) for table in TABLES}


def dataset_version(hashes: dict[str, str]) -> str:
    """The data version of a dataset: the hash of its normalized tables' hashes."""
    return sha256_json(hashes)


def freeze_dataset(name: str, raw: RawDataset, directory: Path) -> FrozenDataset:
    """Write the three tables, then the manifest, each atomically; return the frozen dataset."""
    tables = {"corpus": raw.corpus, "queries": raw.queries, "qrels": raw.qrels}
    hashes = table_hashes(raw)
    for table, content in tables.items():
        write_parquet(content, directory / f"{table}.parquet")
    manifest = {
        "dataset": name,
        "source": raw.source,
        "counts": {
            "documents": raw.corpus.num_rows,
            "queries": raw.queries.num_rows,
            "qrels": raw.qrels.num_rows,
            "queries_with_positive": len({q for q, r in zip(raw.qrels["query_id"].to_pylist(),
                                                            raw.qrels["relevance"].to_pylist(), strict=True) if r > 0}),
        },
        "slice_columns": [c for c in raw.queries.column_names if c not in ("query_id", "text")],
        "empty_texts": empty_text_ids(raw),
        "tables": {table: {"sha256": hashes[table], "rows": tables[table].num_rows, "file": f"{table}.parquet"} for table in TABLES},
        "version": dataset_version(hashes),
    }
    write_json(manifest, directory / "manifest.json")
    return FrozenDataset(directory, manifest)


def open_frozen(directory: Path) -> FrozenDataset:
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise DataError(f"{manifest_path}: no frozen dataset here; materialize the frozen_dataset asset first")
    return FrozenDataset(directory, read_json(manifest_path))


def _read_checked_tables(frozen: FrozenDataset, names: Iterable[str]) -> tuple[list[str], dict[str, pa.Table]]:
    """The tables that are present, and a problem for each one missing or not matching the
    sha256 its manifest records."""
    problems, tables = [], {}
    for table in names:
        path = frozen.path(table)
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        tables[table] = read_table(path)
        if sha256_table(tables[table]) != frozen.table_sha(table):
            problems.append(f"{path} does not match the sha256 in its manifest; re-freeze the dataset")
    return problems, tables


def verify_frozen(frozen: FrozenDataset) -> list[str]:
    """Integrity problems of a frozen dataset on disk (empty when sound)."""
    problems, tables = _read_checked_tables(frozen, TABLES)
    if len(tables) == len(TABLES):
        doc_ids = set(tables["corpus"]["doc_id"].to_pylist())
        query_ids = set(tables["queries"]["query_id"].to_pylist())
        for query_id, doc_id in zip(tables["qrels"]["query_id"].to_pylist(), tables["qrels"]["doc_id"].to_pylist(), strict=True):
            if query_id not in query_ids:
                problems.append(f"qrels name unknown query id {query_id!r}")
            if doc_id not in doc_ids:
                problems.append(f"qrels name unknown document id {doc_id!r}")
            if len(problems) >= 20:
                break
    return problems


# Task datasets (L2 families other than retrieval): the texts to encode, each once, and the pairs
# that reference them. Extra string columns (label, language, category, ...) ride along as
# slices; ids sort each table, as for retrieval.
TEXTS_SCHEMA = pa.schema([("text_id", pa.string()), ("text", pa.string())])
PAIRS_SCHEMA = pa.schema([
    ("pair_id", pa.string()), ("text_id_1", pa.string()), ("text_id_2", pa.string()),
    ("gold", pa.float64()), ("split", pa.string()),
])
TASK_TABLES = ("texts", "pairs")
PAIR_TASKS = ("sts", "pair_classification", "bitext", "reranking")
LABEL_TASKS = ("classification", "clustering", "multilabel_classification")


@dataclass(frozen=True)
class TaskTables:
    """A task dataset before freezing: ``texts`` (text_id, text, extra string columns such as
    ``label`` or ``language``) and, for pair tasks, ``pairs`` (pair_id, text_id_1, text_id_2,
    gold, split, extra string columns). ``gold`` is the human score (STS), 1/0 (pair
    classification) or 1 (a translation, bitext)."""

    task: str
    texts: pa.Table
    pairs: pa.Table | None
    source: dict[str, Any]

    def tables(self) -> dict[str, pa.Table]:
        return {"texts": self.texts} if self.pairs is None else {"texts": self.texts, "pairs": self.pairs}


def task_tables(task: str, texts: pa.Table, pairs: pa.Table | None, source: dict[str, Any], where: str) -> TaskTables:
    """Sort by id, check ids, texts and pair references (errors name ``where``), and return the tables."""
    for column, kind in (("text_id", pa.string()), ("text", pa.string())):
        if texts.schema.field(column).type != kind:
            raise DataError(f"{where}: texts.{column} must be strings")
    texts = texts.sort_by("text_id")
    ids = texts.column("text_id").to_pylist()
    duplicates = sorted({i for i, j in pairwise(ids) if i == j})
    if duplicates:
        raise DataError(f"{where}: duplicate text ids {duplicates[:5]}; ids must be unique")
    empty = [i for i, text in zip(ids, texts.column("text").to_pylist(), strict=True) if not (text or "").strip()]
    if empty:
        raise DataError(f"{where}: texts {empty[:5]} are empty; remove them or give them text")
    if task in LABEL_TASKS and ("label" not in texts.column_names or texts.column("label").null_count):
        raise DataError(f"{where}: task {task} needs a label for every text")
    if task in PAIR_TASKS:
        if pairs is None or pairs.num_rows == 0:
            raise DataError(f"{where}: task {task} needs pairs; none were loaded")
        pairs = pairs.sort_by("pair_id")
        pair_ids = pairs.column("pair_id").to_pylist()
        repeated = sorted({i for i, j in pairwise(pair_ids) if i == j})
        if repeated:
            raise DataError(f"{where}: duplicate pair ids {repeated[:5]}; ids must be unique")
        known = set(ids)
        for side in ("text_id_1", "text_id_2"):
            unknown = sorted(set(pairs.column(side).to_pylist()) - known)
            if unknown:
                raise DataError(f"{where}: pairs name unknown text ids {unknown[:5]} in {side}")
    return TaskTables(task, texts, pairs, source)


def freeze_task_dataset(name: str, tables: TaskTables, directory: Path) -> FrozenDataset:
    """Write ``texts`` (and ``pairs``), then the manifest, each atomically, as :func:`freeze_dataset`."""
    contents = tables.tables()
    hashes = {table: sha256_table(content) for table, content in contents.items()}
    for table, content in contents.items():
        write_parquet(content, directory / f"{table}.parquet")
    counts = {"texts": tables.texts.num_rows}
    if tables.pairs is not None:
        counts["pairs"] = tables.pairs.num_rows
        counts.update({f"pairs_{split}": n for split, n in _value_counts(tables.pairs.column("split")).items()})
    manifest = {
        "dataset": name,
        "task": tables.task,
        "source": tables.source,
        "counts": counts,
        "tables": {table: {"sha256": hashes[table], "rows": content.num_rows, "file": f"{table}.parquet"}
                   for table, content in contents.items()},
        "version": dataset_version(hashes),
    }
    write_json(manifest, directory / "manifest.json")
    return FrozenDataset(directory, manifest)


def task_encoding_inputs(frozen: FrozenDataset) -> EncodingInputs:
    """The texts of a frozen task dataset to encode, each once, addressed by the texts table hash."""
    texts = frozen.read("texts")
    return EncodingInputs(texts.column("text_id").to_pylist(), texts.column("text").to_pylist(), frozen.table_sha("texts"))


def verify_task_frozen(frozen: FrozenDataset) -> list[str]:
    """Integrity problems of a frozen task dataset on disk (empty when sound)."""
    problems, tables = _read_checked_tables(frozen, frozen.manifest["tables"])
    if "texts" in tables and "pairs" in tables:
        known = set(tables["texts"].column("text_id").to_pylist())
        for side in ("text_id_1", "text_id_2"):
            unknown = sorted(set(tables["pairs"].column(side).to_pylist()) - known)
            if unknown:
                problems.append(f"pairs.{side} names unknown text ids {unknown[:5]}")
    return problems


def _value_counts(column: pa.ChunkedArray) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in column.to_pylist():
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))
