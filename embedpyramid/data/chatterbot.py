"""The embedded default dataset: chatterbot-corpus question/answer conversations."""

from __future__ import annotations

import hashlib
from importlib.util import find_spec
from pathlib import Path

import pyarrow as pa
import yaml

from embedpyramid.config import ChatterbotDataset
from embedpyramid.data.frozen import CORPUS_SCHEMA, QRELS_SCHEMA, DataError, RawDataset, select_query_columns

# libyaml's safe loader parses the corpus ~10x faster than the pure-Python one, when present.
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
                where = f"{path.name} conversation {index}: empty {'question' if not question else 'answer'}"
                if spec.empty_texts == "error":
                    raise DataError(f"{folder / where}; set empty_texts: keep (encode it as the empty string) "
                                    "or drop in datasets.yaml")
                if spec.empty_texts == "drop":
                    skipped.append(f"{where}: dropped with its qrel (empty_texts: drop)")
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
              "skipped_conversations": skipped, "empty_texts": {"policy": spec.empty_texts}}
    return RawDataset(corpus, select_query_columns(query_table, spec.slices, spec.group_column, "chatterbot"), qrels, source)
