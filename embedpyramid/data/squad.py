"""SQuAD / KorQuAD JSON files as a retrieval dataset: which paragraph holds the answer?

The format (SQuAD 1.1 and 2.0, KorQuAD 1.0; Rajpurkar et al. 2016, 2018; Lim et al. 2019)::

    {"version": "v2.0", "data": [{"title": "...", "paragraphs": [
        {"context": "...", "qas": [{"id": "...", "question": "...",
                                     "answers": [{"text": "...", "answer_start": 0}],
                                     "is_impossible": false}]}]}]}

* corpus — every distinct context paragraph (exact text after stripping surrounding whitespace),
  including paragraphs whose questions are all unanswerable: they are distractors like any other.
  A paragraph that appears under several articles is one document (its first article's title).
  ``doc_id`` is a content hash of the text, so ids are stable across freezes. The title is
  stored (and so encoded as title + " " + text) only with ``include_title``.
* queries — every answerable question, ``query_id`` = its SQuAD id; the article title is the
  query column ``article`` (a slice, or a ``group_column``: questions on one article are not
  independent).
* qrels — the paragraph the question was asked on, relevance 1. Other paragraphs that happen to
  contain the answer text are unjudged, so count as non-relevant (the usual convention).
* excluded, and counted in the manifest: unanswerable questions (``is_impossible``, SQuAD 2.0)
  and questions without any answer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from embedpyramid.config import SquadDataset
from embedpyramid.data.frozen import CORPUS_SCHEMA, QRELS_SCHEMA, DataError, RawDataset, select_query_columns


def _paragraph_id(text: str) -> str:
    return "p" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not valid UTF-8 at byte {error.start}; re-save the file as UTF-8") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path}:{error.lineno}: malformed JSON ({error.msg} at column {error.colno})") from None


def _mapping(value: Any, where: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object with '{key}', got {type(value).__name__}")
    return value


def _list(record: dict[str, Any], key: str, where: str) -> list[Any]:
    value = record.get(key)
    if not isinstance(value, list):
        raise DataError(f"{where}: '{key}' must be a list; is this a SQuAD/KorQuAD file?")
    return value


def load_squad(path: Path, spec: SquadDataset) -> RawDataset:
    """Read a SQuAD / KorQuAD JSON file (see the module docstring for the mapping)."""
    root = _mapping(_read_json(path), str(path), "data")
    documents: dict[str, tuple[str, str]] = {}
    queries: list[dict[str, str]] = []
    qrels: list[tuple[str, str]] = []
    seen_ids: dict[str, str] = {}
    unanswerable = without_answer = paragraphs = 0
    for a, article in enumerate(_list(root, "data", str(path))):
        where_article = f"{path}: data[{a}]"
        article = _mapping(article, where_article, "paragraphs")
        title = str(article.get("title") or "").strip()
        for p, paragraph in enumerate(_list(article, "paragraphs", where_article)):
            where = f"{where_article}.paragraphs[{p}]"
            paragraphs += 1
            paragraph = _mapping(paragraph, where, "context")
            context = str(paragraph.get("context") or "").strip()
            if not context:
                raise DataError(f"{where}: empty or missing 'context'; every paragraph needs its text")
            doc_id = _paragraph_id(context)
            documents.setdefault(doc_id, (title, context))
            for q, qa in enumerate(_list(paragraph, "qas", where)):
                where_qa = f"{where}.qas[{q}]"
                qa = _mapping(qa, where_qa, "question")
                query_id, question = str(qa.get("id") or "").strip(), str(qa.get("question") or "").strip()
                if not query_id:
                    raise DataError(f"{where_qa}: missing 'id'")
                if query_id in seen_ids:
                    raise DataError(f"{where_qa}: duplicate question id {query_id!r} (first at {seen_ids[query_id]}); ids must be unique")
                seen_ids[query_id] = where_qa
                if not question:
                    raise DataError(f"{where_qa}: question {query_id!r} has an empty text")
                if qa.get("is_impossible") is True:
                    unanswerable += 1
                    continue
                if not qa.get("answers"):
                    without_answer += 1
                    continue
                queries.append({"query_id": query_id, "text": question, "article": title})
                qrels.append((query_id, doc_id))
    if not qrels:
        raise DataError(f"{path}: no answerable question; nothing to evaluate")
    doc_ids = sorted(documents)
    corpus = pa.table(
        {
            "doc_id": doc_ids,
            "title": [documents[d][0] if spec.include_title else "" for d in doc_ids],
            "text": [documents[d][1] for d in doc_ids],
        },
        schema=CORPUS_SCHEMA,
    )
    queries.sort(key=lambda row: row["query_id"])
    query_table = pa.table({column: [row[column] for row in queries] for column in ("query_id", "text", "article")})
    qrels.sort()
    qrels_table = pa.table(
        {"query_id": [q for q, _ in qrels], "doc_id": [d for _, d in qrels], "relevance": [1] * len(qrels)},
        schema=QRELS_SCHEMA,
    )
    source = {
        "loader": "squad", "path": str(path), "version": root.get("version"), "include_title": spec.include_title,
        "paragraphs": paragraphs, "duplicate_paragraphs_merged": paragraphs - len(documents),
        "unanswerable_excluded": unanswerable, "without_answer_excluded": without_answer,
    }
    return RawDataset(corpus, select_query_columns(query_table, spec.slices, spec.group_column, str(path)), qrels_table, source)
