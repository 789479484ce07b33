"""The embedded default dataset: chatterbot-corpus question/answer conversations, read once and
viewed as retrieval (questions → answers) or as labelled questions (classification, clustering)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from embedpyramid.config import ChatterbotDataset
from embedpyramid.config.base import decode_utf8
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    QRELS_SCHEMA,
    DataError,
    RawDataset,
    TaskTables,
    select_query_columns,
    task_tables,
)

# libyaml's safe loader (C) parses the corpus much faster than the pure-Python one, when present.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _read_corpus_file(path: Path) -> dict[str, Any]:
    try:
        content = yaml.load(decode_utf8(path.read_bytes(), path, DataError), Loader=_YAML_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise DataError(
            f"{path}{line}: not valid YAML ({getattr(error, 'problem', None) or error}); "
            "reinstall chatterbot-corpus (pip install --force-reinstall chatterbot-corpus)"
        ) from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise DataError(f"{path}: expected a mapping with 'categories' and 'conversations', got {type(content).__name__}")
    return content


@dataclass(frozen=True)
class Exchange:
    """A question and the reply that immediately follows it, with the category of its file."""

    question: str
    answer: str
    category: str

    @property
    def question_id(self) -> str:
        return _stable_id("q", self.question)

    @property
    def answer_id(self) -> str:
        return _stable_id("d", self.answer)


@dataclass(frozen=True)
class Conversations:
    """The usable exchanges of the selected files (in file, then conversation order), the files
    read, and the conversations skipped with why."""

    folder: Path
    files: list[Path]
    exchanges: list[Exchange]
    skipped: list[str]

    def source(self, spec: ChatterbotDataset) -> dict[str, Any]:
        return {"loader": "chatterbot", "language": spec.language, "files": [p.name for p in self.files],
                "skipped_conversations": self.skipped, "empty_texts": {"policy": spec.empty_texts}}

    def question_categories(self) -> dict[str, tuple[str, str]]:
        """Each distinct question's id → (text, category), the first file's category winning."""
        questions: dict[str, tuple[str, str]] = {}
        for exchange in self.exchanges:
            questions.setdefault(exchange.question_id, (exchange.question, exchange.category))
        return questions


def read_conversations(spec: ChatterbotDataset) -> Conversations:
    """The question → answer exchanges of the selected chatterbot-corpus files.

    The slice/label ``category`` of an exchange is the first category its YAML file declares
    (files in name order). Ids are content hashes, so they are stable across freezes.
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
    exchanges: list[Exchange] = []
    skipped: list[str] = []
    for path in files:
        content = _read_corpus_file(path)
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
                where = f"{path.name} conversation {index}: empty {'question' if not question else 'answer'}"
                if spec.empty_texts == "error":
                    raise DataError(f"{folder / where}; set empty_texts: keep (encode it as the empty string) "
                                    "or drop in datasets.yaml")
                if spec.empty_texts == "drop":
                    skipped.append(f"{where}: dropped with its qrel (empty_texts: drop)")
                    continue
            exchanges.append(Exchange(question, answer, category))
    if not exchanges:
        raise DataError(f"{folder}: no usable conversations in {', '.join(p.name for p in files)}")
    return Conversations(folder, files, exchanges, skipped)


def load_chatterbot(spec: ChatterbotDataset) -> RawDataset:
    """Questions are queries, distinct answers are documents, every answer given is relevant.

    A query is a distinct opening question (the same question appears in several
    conversations with different answers); its document is the reply that immediately
    follows it. Answers shared by several questions become one document. The slice column
    ``category`` is the first category the YAML file declares (first file wins, files in
    name order). Ids are content hashes, so they are stable across freezes.
    """
    conversations = read_conversations(spec)
    documents: dict[str, str] = {}
    pairs: set[tuple[str, str]] = set()
    for exchange in conversations.exchanges:
        documents.setdefault(exchange.answer_id, exchange.answer)
        pairs.add((exchange.question_id, exchange.answer_id))
    questions = conversations.question_categories()
    corpus = pa.table(
        {"doc_id": sorted(documents), "title": [""] * len(documents), "text": [documents[d] for d in sorted(documents)]},
        schema=CORPUS_SCHEMA,
    )
    ordered_ids = sorted(questions)
    query_table = pa.table({
        "query_id": ordered_ids,
        "text": [questions[q][0] for q in ordered_ids],
        "category": [questions[q][1] for q in ordered_ids],
    })
    ordered = sorted(pairs)
    qrels = pa.table(
        {"query_id": [q for q, _ in ordered], "doc_id": [d for _, d in ordered], "relevance": [1] * len(ordered)},
        schema=QRELS_SCHEMA,
    )
    source = conversations.source(spec)
    where = f"chatterbot-corpus {conversations.folder}"
    return RawDataset(corpus, select_query_columns(query_table, spec.slices, spec.group_column, where), qrels, source)


def load_chatterbot_questions(spec: ChatterbotDataset) -> TaskTables:
    """The distinct questions labelled by category (classification, clustering): the texts of
    :func:`load_chatterbot`'s queries, with ``category`` as ``label`` (and kept as a slice)."""
    conversations = read_conversations(spec)
    questions = conversations.question_categories()
    ordered_ids = sorted(questions)
    texts = pa.table({
        "text_id": ordered_ids,
        "text": [questions[q][0] for q in ordered_ids],
        "label": [questions[q][1] for q in ordered_ids],
        "category": [questions[q][1] for q in ordered_ids],
    })
    return task_tables(spec.task, texts, None, conversations.source(spec), "chatterbot")
