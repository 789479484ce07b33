"""Dataset loaders and freezing: corpus, queries and qrels as normalized Parquet tables.

A frozen dataset is three tables sorted by id plus a manifest holding the source, the counts
and the sha256 of each normalized table. The dataset's data version is the hash of those
hashes, so re-freezing identical data disturbs nothing downstream.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from embedpyramid.config import BeirDataset, ChatterbotDataset, ProjectConfig
from embedpyramid.hashing import sha256_json, sha256_table
from embedpyramid.store import read_json, write_json, write_parquet


class DataError(ValueError):
    """Bad input data; the message names the file, the line or the id, and what to do."""


CORPUS_SCHEMA = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
QRELS_SCHEMA = pa.schema([("query_id", pa.string()), ("doc_id", pa.string()), ("relevance", pa.int32())])
TABLES = ("corpus", "queries", "qrels")
# libyaml's safe loader parses the corpus ~10x faster than the pure-Python one, when present.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
        return pq.read_table(self.path(table))


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


def _stable_id(prefix: str, text: str) -> str:
    return prefix + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def chatterbot_directory(language: str) -> Path:
    """The installed chatterbot-corpus data folder for ``language`` (located, not imported)."""
    spec = find_spec("chatterbot_corpus")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("package chatterbot-corpus is not installed; install it with pip install chatterbot-corpus")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / language
    if not folder.is_dir():
        available = sorted(p.name for p in folder.parent.iterdir() if p.is_dir())
        raise DataError(f"chatterbot-corpus has no language {language!r}; available: {', '.join(available)}")
    return folder


def load_chatterbot(spec: ChatterbotDataset) -> RawDataset:
    """Questions are queries, distinct answers are documents, every answer given is relevant.

    A query is a distinct opening question (the same question appears in several
    conversations with different answers); its document is the reply that immediately
    follows it. Answers shared by several questions become one document. The slice column
    ``category`` is the first category the YAML file declares (first file wins, files in
    name order). Ids are content hashes, so they are stable across freezes.
    """
    folder = chatterbot_directory(spec.language)
    files = sorted(folder.glob("*.yml"))
    by_stem = {path.stem: path for path in files}
    if spec.categories is not None:
        unknown = sorted(set(spec.categories) - set(by_stem))
        if unknown:
            raise DataError(
                f"datasets.yaml: categories {unknown} are not chatterbot-corpus {spec.language} files; "
                f"allowed: {', '.join(sorted(by_stem))}"
            )
        files = [by_stem[name] for name in sorted(set(spec.categories))]
    queries: dict[str, dict[str, str]] = {}
    documents: dict[str, str] = {}
    pairs: set[tuple[str, str]] = set()
    skipped: list[str] = []
    for path in files:
        content = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER) or {}
        declared = content.get("categories") or [path.stem]
        category = str(declared[0])
        for index, conversation in enumerate(content.get("conversations") or []):
            # The installed corpus has a few malformed entries (one is a bare string in
            # trivia.yml); they cannot be fixed here, so they are skipped and listed in the manifest.
            if not isinstance(conversation, list) or len(conversation) < 2:
                skipped.append(f"{path.name} conversation {index}: not a question followed by an answer")
                continue
            question, answer = (str(turn).strip() for turn in conversation[:2])
            if not question or not answer:
                skipped.append(f"{path.name} conversation {index}: empty question or answer")
                continue
            query_id, doc_id = _stable_id("q", question), _stable_id("d", answer)
            queries.setdefault(query_id, {"query_id": query_id, "text": question, "category": category})
            documents.setdefault(doc_id, answer)
            pairs.add((query_id, doc_id))
    corpus = pa.table(
        {"doc_id": sorted(documents), "title": [""] * len(documents), "text": [documents[d] for d in sorted(documents)]},
        schema=CORPUS_SCHEMA,
    )
    query_rows = [queries[q] for q in sorted(queries)]
    query_table = pa.table({column: [row[column] for row in query_rows] for column in ("query_id", "text", "category")})
    ordered = sorted(pairs)
    qrels = pa.table(
        {"query_id": [q for q, _ in ordered], "doc_id": [d for _, d in ordered], "relevance": [1] * len(ordered)},
        schema=QRELS_SCHEMA,
    )
    if not pairs:
        raise DataError(f"{folder}: no usable conversations in {', '.join(p.name for p in files)}")
    source = {"loader": "chatterbot", "language": spec.language, "files": [p.name for p in files],
              "skipped_conversations": skipped}
    return RawDataset(corpus, _with_columns(query_table, spec.slices, spec.group_column, "chatterbot"), qrels, source)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DataError(f"{path}: file not found; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
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
    if identifier in seen:
        raise DataError(f"{path}:{number}: duplicate id {identifier!r} (first on line {seen[identifier]}); ids must be unique")
    seen[identifier] = number
    return identifier


def load_beir(folder: Path, spec: BeirDataset) -> RawDataset:
    """Read a BEIR folder; only the queries judged in ``qrels/<split>.tsv`` are kept."""
    corpus_path, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
    qrels_path = folder / "qrels" / f"{spec.split}.tsv"
    seen: dict[str, int] = {}
    docs: list[tuple[str, str, str]] = []
    for number, record in _jsonl(corpus_path):
        doc_id = _record_id(corpus_path, number, record, seen)
        title, text = str(record.get("title") or "").strip(), str(record.get("text") or "").strip()
        if not title and not text:
            raise DataError(f"{corpus_path}:{number}: document {doc_id!r} has an empty title and text")
        docs.append((doc_id, title, text))
    seen_queries: dict[str, int] = {}
    query_records: dict[str, dict[str, Any]] = {}
    for number, record in _jsonl(queries_path):
        query_id = _record_id(queries_path, number, record, seen_queries)
        text = str(record.get("text") or "").strip()
        if not text:
            raise DataError(f"{queries_path}:{number}: query {query_id!r} has an empty text")
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        query_records[query_id] = {**metadata, **record, "query_id": query_id, "text": text}
    qrels = _read_qrels(qrels_path, query_records.keys(), seen.keys())
    judged = sorted({query_id for query_id, _, _ in qrels})
    docs.sort()
    corpus = pa.table(
        {"doc_id": [d[0] for d in docs], "title": [d[1] for d in docs], "text": [d[2] for d in docs]},
        schema=CORPUS_SCHEMA,
    )
    extra = list(dict.fromkeys([*spec.slices, *([spec.group_column] if spec.group_column else [])]))
    columns: dict[str, list[Any]] = {"query_id": judged, "text": [query_records[q]["text"] for q in judged]}
    for column in extra:
        values = [query_records[q].get(column) for q in judged]
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
    }
    return RawDataset(corpus, _with_columns(query_table, spec.slices, spec.group_column, str(queries_path)), qrels_table, source)


def _read_qrels(path: Path, query_ids: Any, doc_ids: Any) -> list[tuple[str, str, int]]:
    if not path.is_file():
        raise DataError(f"{path}: file not found; BEIR qrels live in qrels/<split>.tsv (query-id, corpus-id, score)")
    known_queries, known_docs = set(query_ids), set(doc_ids)
    rows: dict[tuple[str, str], int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
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


def _with_columns(queries: pa.Table, slices: list[str], group_column: str | None, where: str) -> pa.Table:
    wanted = [*slices, *([group_column] if group_column else [])]
    missing = [column for column in wanted if column not in queries.column_names]
    if missing:
        raise DataError(
            f"{where}: slice/group columns {missing} are not query fields; available: "
            f"{', '.join(c for c in queries.column_names if c not in ('query_id', 'text'))}"
        )
    return queries.select(["query_id", "text", *dict.fromkeys(wanted)])


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return load_chatterbot(spec)
    return load_beir(config.beir_path(spec), spec)


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
            "queries_with_positive": len({q for q, r in zip(raw.qrels["query_id"].to_pylist(), raw.qrels["relevance"].to_pylist()) if r > 0}),
        },
        "slice_columns": [c for c in raw.queries.column_names if c not in ("query_id", "text")],
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


def verify_frozen(frozen: FrozenDataset) -> list[str]:
    """Integrity problems of a frozen dataset on disk (empty when sound)."""
    problems = []
    tables = {}
    for table in TABLES:
        path = frozen.path(table)
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        tables[table] = pq.read_table(path)
        if sha256_table(tables[table]) != frozen.table_sha(table):
            problems.append(f"{path} does not match the sha256 in its manifest; re-freeze the dataset")
    if len(tables) == len(TABLES):
        doc_ids = set(tables["corpus"]["doc_id"].to_pylist())
        query_ids = set(tables["queries"]["query_id"].to_pylist())
        for query_id, doc_id in zip(tables["qrels"]["query_id"].to_pylist(), tables["qrels"]["doc_id"].to_pylist()):
            if query_id not in query_ids:
                problems.append(f"qrels name unknown query id {query_id!r}")
            if doc_id not in doc_ids:
                problems.append(f"qrels name unknown document id {doc_id!r}")
            if len(problems) >= 20:
                break
    return problems
