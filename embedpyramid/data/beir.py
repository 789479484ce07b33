"""BEIR-format folders: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from embedpyramid.config import BeirDataset
from embedpyramid.config.base import decode_utf8
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    QRELS_SCHEMA,
    DataError,
    RawDataset,
    select_query_columns,
    trec_id_problem,
)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 file with their numbers (a byte-order mark is dropped); invalid UTF-8
    is an error naming the file and the line."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, decode_utf8(raw, path, DataError, line=number)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DataError(f"{path}: file not found; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{number}: malformed JSON ({error.msg}); fix or remove the line") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        yield number, record


def _record_id(path: Path, number: int, record: dict[str, Any], seen: dict[str, int]) -> str:
    raw = record.get("_id")
    if raw is None or str(raw).strip() == "":
        raise DataError(f"{path}:{number}: missing '_id'")
    identifier = str(raw)
    problem = trec_id_problem(identifier)
    if problem is not None:
        raise DataError(f"{path}:{number}: id {identifier!r} cannot be used: {problem} (runs are exported as "
                        "TREC files); rename it here and in the qrels")
    if identifier in seen:
        raise DataError(f"{path}:{number}: duplicate id {identifier!r} (first on line {seen[identifier]}); ids must be unique")
    seen[identifier] = number
    return identifier


def qrels_path(folder: Path, spec: BeirDataset) -> Path:
    """The judgements of the configured split: ``qrels/<split>.tsv``."""
    return folder / "qrels" / f"{spec.split}.tsv"


def load_beir(folder: Path, spec: BeirDataset) -> RawDataset:
    """Read a BEIR folder; only the queries judged in ``qrels/<split>.tsv`` are kept."""
    corpus_path, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
    judgements = qrels_path(folder, spec)
    if not judgements.is_file():
        splits = sorted(path.stem for path in (folder / "qrels").glob("*.tsv"))
        raise DataError(
            f"{judgements}: file not found; split {spec.split!r} does not exist in {folder}; "
            f"splits that exist: {', '.join(splits) or 'none (qrels/ holds no <split>.tsv)'} (set split: in datasets.yaml)"
        )
    seen: dict[str, int] = {}
    docs: list[tuple[str, str, str]] = []
    dropped_docs: list[str] = []
    for number, record in _jsonl(corpus_path):
        doc_id = _record_id(corpus_path, number, record, seen)
        title, text = str(record.get("title") or "").strip(), str(record.get("text") or "").strip()
        if not title and not text and _empty(spec, f"{corpus_path}:{number}: document {doc_id!r} has an empty title and text"):
            dropped_docs.append(doc_id)
            continue
        docs.append((doc_id, title, text))
    seen_queries: dict[str, int] = {}
    query_records: dict[str, dict[str, Any]] = {}
    dropped_queries: list[str] = []
    for number, record in _jsonl(queries_path):
        query_id = _record_id(queries_path, number, record, seen_queries)
        text = str(record.get("text") or "").strip()
        if not text and _empty(spec, f"{queries_path}:{number}: query {query_id!r} has an empty text"):
            dropped_queries.append(query_id)
            continue
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        query_records[query_id] = {**metadata, **record, "query_id": query_id, "text": text}
    dropped_qrels: list[list[Any]] = []
    qrels = _read_qrels(judgements, query_records.keys(), {d[0] for d in docs},
                        dropped=(set(dropped_queries), set(dropped_docs), dropped_qrels))
    judged = sorted({query_id for query_id, _, _ in qrels})
    docs.sort()
    corpus = pa.table(
        {"doc_id": [d[0] for d in docs], "title": [d[1] for d in docs], "text": [d[2] for d in docs]},
        schema=CORPUS_SCHEMA,
    )
    extra = list(dict.fromkeys([*spec.slices, *([spec.group_column] if spec.group_column else [])]))
    columns: dict[str, list[Any]] = {"query_id": judged, "text": [query_records[q]["text"] for q in judged]}
    missing_values: dict[str, int] = {}
    for column in extra:
        values = [query_records[q].get(column) for q in judged]
        if all(value is None for value in values):
            fields = sorted({key for q in judged for key in query_records[q]} - {"_id", "query_id", "text", "metadata"})
            raise DataError(
                f"{queries_path}: slice/group field {column!r} is set on none of the {len(judged)} judged queries; "
                f"fields that exist (top level or under metadata): {', '.join(fields) or 'none'}"
            )
        missing_values[column] = sum(value is None for value in values)
        columns[column] = [None if value is None else str(value) for value in values]
    query_table = pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})
    qrels.sort()
    qrels_table = pa.table(
        {"query_id": [r[0] for r in qrels], "doc_id": [r[1] for r in qrels], "relevance": [r[2] for r in qrels]},
        schema=QRELS_SCHEMA,
    )
    source = {
        "loader": "beir", "path": str(folder), "split": spec.split,
        "unjudged_queries_dropped": len(query_records) - len(judged),
        "queries_without_slice_value": missing_values,
        "empty_texts": {"policy": spec.empty_texts, "dropped_documents": dropped_docs,
                        "dropped_queries": dropped_queries, "dropped_qrels": dropped_qrels},
    }
    return RawDataset(corpus, select_query_columns(query_table, spec.slices, spec.group_column, str(queries_path)), qrels_table, source)


def _empty(spec: BeirDataset, where: str) -> bool:
    """Whether an empty text is dropped (``empty_texts: drop``); kept ones return False, and
    ``error`` raises naming the line."""
    if spec.empty_texts == "error":
        raise DataError(f"{where}; set empty_texts: keep (encode it as the empty string) or drop in datasets.yaml")
    return spec.empty_texts == "drop"


def _read_qrels(
    path: Path, query_ids: Any, doc_ids: Any, *, dropped: tuple[set[str], set[str], list[list[Any]]],
) -> list[tuple[str, str, int]]:
    """The judgements of a split; those naming a query or document dropped for an empty text
    go to ``dropped[2]`` as [query_id, doc_id, relevance] instead."""
    dropped_queries, dropped_docs, dropped_qrels = dropped
    known_queries, known_docs = set(query_ids), set(doc_ids)
    rows: dict[tuple[str, str], int] = {}
    for number, line in _lines(path):
        fields = line.rstrip("\r\n").split("\t")
        if number == 1 and fields[:2] == ["query-id", "corpus-id"]:
            continue
        if not line.strip():
            continue
        if len(fields) != 3:
            raise DataError(f"{path}:{number}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}")
        query_id, doc_id, score = fields
        try:
            relevance = int(score)
        except ValueError:
            raise DataError(f"{path}:{number}: score {score!r} is not an integer grade") from None
        if query_id in dropped_queries or doc_id in dropped_docs:
            dropped_qrels.append([query_id, doc_id, relevance])
            continue
        if query_id not in known_queries:
            raise DataError(f"{path}:{number}: query id {query_id!r} is not in queries.jsonl; fix the id or add the query")
        if doc_id not in known_docs:
            raise DataError(f"{path}:{number}: document id {doc_id!r} is not in corpus.jsonl; fix the id or add the document")
        if (query_id, doc_id) in rows:
            raise DataError(f"{path}:{number}: duplicate judgement for ({query_id!r}, {doc_id!r})")
        rows[(query_id, doc_id)] = relevance
    if not rows:
        raise DataError(f"{path}: no judgements; the split has nothing to evaluate")
    return [(q, d, r) for (q, d), r in rows.items()]
