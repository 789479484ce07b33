"""MTEB's retrieval layout, read offline: a retrieval task (``loader: mteb``, ``task: retrieval``)
into the frozen corpus, queries and qrels, a reranking task into the frozen task tables.

mteb 2.26's ``RetrievalDatasetLoader`` reads one Hugging Face dataset whose subsets (configs) are
the parts of the task, for one split each:

* ``corpus`` (``_id`` or ``id``, ``text``, optional ``title``), ``queries`` (``_id`` or ``id``,
  ``text``; a config named ``query`` is read instead when there is one), the qrels in ``default``
  (else ``qrels``: ``query-id``, ``corpus-id``, ``score``) and, for a reranking task, ``top_ranked``
  (``query-id``, ``corpus-ids``: the candidates of each query);
* for a multilingual task the same with the subset's prefix: ``<subset>-corpus``,
  ``<subset>-queries``, ``<subset>-qrels``, ``<subset>-top_ranked``.

Each part is read at the dataset's ``split`` when it has that split, else at its only split (the
corpus and queries often have a split of their own name). As MTEB, only the queries with qrels are
kept (any grade: a query whose judgements are all 0 is evaluated and scores 0), and a document's
text is ``(title + " " + text).strip()`` when it has a title.

A reranking task's ``top_ranked`` may also come in MTEB's older format, one row per query with its
``query``, ``positive`` and ``negative`` texts (``AbsTaskReranking.transform_old_dataset_format``):
rows without a positive or a negative are dropped, and the ids are MTEB's
(``<split>_query<row>``, ``apositive_<query>_<i>``, ``negative_<query>_<i>``), on which ties in score
are ordered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from embedpyramid.config.datasets import MtebDataset
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    PAIRS_SCHEMA,
    QRELS_SCHEMA,
    DataError,
    RawDataset,
    TaskTables,
    select_query_columns,
    task_tables,
    trec_id_problem,
)
from embedpyramid.data.hub_layout import MtebLayout, read_split

QUERY_PREFIX, DOCUMENT_PREFIX = "q:", "d:"
"""Text ids of a reranking dataset: its queries' and documents' ids behind these prefixes, so a
query and a document may share an id (the texts table holds both)."""
ROLES = {"query": QUERY_PREFIX, "document": DOCUMENT_PREFIX}
"""The ``role`` of each text of a reranking dataset and the prefix of its text id."""


@dataclass(frozen=True)
class RetrievalParts:
    """One split of an MTEB retrieval task: the documents (id → (title, text)), the queries
    (id → their row, ``text`` and any other column), the judgements (query id → doc id → grade), the
    candidates of a reranking task (query id → doc ids, in order; None when the task has none),
    the configs they were read from and what was dropped on the way."""

    documents: dict[str, tuple[str, str]]
    queries: dict[str, dict[str, Any]]
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, list[str]] | None
    configs: dict[str, str]
    dropped: dict[str, int]


def read_retrieval_parts(layout: MtebLayout, spec: MtebDataset) -> RetrievalParts:
    """The corpus, queries, qrels and (when present) top-ranked candidates of ``spec``'s subset and
    split in MTEB's retrieval layout (see the module docstring); a missing part is an error naming
    the folder, the configs found and what to set."""
    names = _part_configs(layout, spec.subset)
    split = spec.split or "test"
    configs = {part: f"{name}[{_split_of(layout, name, split)}]" for part, name in names.items()}
    qrels_table, qrels_where = _part(layout, names["qrels"], split)
    qrels: dict[str, dict[str, int]] = {}
    for row, record in enumerate(_records(qrels_table, ("query-id", "corpus-id", "score"), qrels_where)):
        try:
            grade = int(record["score"])
        except (TypeError, ValueError):
            raise DataError(f"{qrels_where}: row {row}: score {record['score']!r} is not an integer grade") from None
        query, doc = _id(record["query-id"], qrels_where, row), _id(record["corpus-id"], qrels_where, row)
        qrels.setdefault(query, {})[doc] = grade
    if not qrels:
        raise DataError(f"{qrels_where}: no judgements; the split {split!r} has nothing to evaluate")
    corpus_table, corpus_where = _part(layout, names["corpus"], split)
    documents: dict[str, tuple[str, str]] = {}
    for row, record in enumerate(_records(corpus_table, (_id_column(corpus_table, corpus_where), "text"), corpus_where)):
        doc_id = _id(record.get("_id", record.get("id")), corpus_where, row)
        documents[doc_id] = (str(record.get("title") or ""), str(record["text"] or ""))
    queries_table, queries_where = _part(layout, names["queries"], split)
    queries: dict[str, dict[str, Any]] = {}
    for row, record in enumerate(_records(queries_table, (_id_column(queries_table, queries_where), "text"),
                                          queries_where)):
        query_id = _id(record.get("_id", record.get("id")), queries_where, row)
        if query_id in qrels:
            queries[query_id] = {**record, "text": str(record["text"] or "")}
    dropped = {"queries_without_qrels": queries_table.num_rows - len(queries),
               "qrels_of_unknown_queries": sum(len(docs) for query, docs in qrels.items() if query not in queries)}
    qrels = {query: docs for query, docs in qrels.items() if query in queries}
    candidates = None
    if "top_ranked" in names:
        table, where = _part(layout, names["top_ranked"], split)
        candidates = {}
        for row, record in enumerate(_records(table, ("query-id", "corpus-ids"), where)):
            ids = record["corpus-ids"]
            if not isinstance(ids, list):
                raise DataError(f"{where}: row {row}: corpus-ids is {ids!r:.60}, not a list of document ids")
            candidates[_id(record["query-id"], where, row)] = [_id(doc, where, row) for doc in ids]
    return RetrievalParts(documents, queries, qrels, candidates, configs, dropped)


def load_mteb_retrieval(layout: MtebLayout, spec: MtebDataset, origin: dict[str, Any]) -> RawDataset:
    """A retrieval task in MTEB's layout as the frozen corpus, queries (with the slice and group
    columns the queries config has) and qrels. Judgements of documents not in the corpus are an
    error, as in a BEIR folder."""
    parts = _without_empty_texts(read_retrieval_parts(layout, spec), spec, str(layout.root))
    where = parts.configs["qrels"]
    for query, docs in parts.qrels.items():
        unknown = sorted(doc for doc in docs if doc not in parts.documents)
        if unknown:
            raise DataError(f"{layout.root}: {where}: query {query!r} judges documents {unknown[:5]} that are not in "
                            f"the corpus ({parts.configs['corpus']}); fix the qrels or the corpus")
    doc_ids = sorted(parts.documents)
    corpus = pa.table({"doc_id": doc_ids, "title": [parts.documents[d][0] for d in doc_ids],
                       "text": [parts.documents[d][1] for d in doc_ids]}, schema=CORPUS_SCHEMA)
    query_ids = sorted(parts.queries)
    extra = list(dict.fromkeys([*spec.slices, *([spec.group_column] if spec.group_column else [])]))
    columns: dict[str, list[Any]] = {"query_id": query_ids, "text": [parts.queries[q]["text"] for q in query_ids]}
    for column in extra:
        values = [parts.queries[q].get(column) for q in query_ids]
        columns[column] = [None if value is None else str(value) for value in values]
    queries = pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})
    judged = sorted((query, doc, grade) for query, docs in parts.qrels.items() for doc, grade in docs.items())
    qrels = pa.table({"query_id": [r[0] for r in judged], "doc_id": [r[1] for r in judged],
                      "relevance": [r[2] for r in judged]}, schema=QRELS_SCHEMA)
    source = {"loader": "mteb", **origin, "path": str(layout.root), "layout": f"{layout.kind}, MTEB retrieval",
              "subset": spec.subset, "split": spec.split or "test", "configs": parts.configs,
              **{key: value for key, value in parts.dropped.items() if key != "empty_texts"},
              "empty_texts": {"policy": spec.empty_texts, **parts.dropped.get("empty_texts", {})}}
    return RawDataset(corpus, select_query_columns(queries, spec.slices, spec.group_column, parts.configs["queries"]),
                      qrels, source)


def load_mteb_reranking(layout: MtebLayout, spec: MtebDataset, origin: dict[str, Any]) -> TaskTables:
    """A reranking task as the frozen task tables: ``texts`` holds every query (``role`` query,
    id ``q:<query id>``) and every document it names (``role`` document, id ``d:<doc id>``) with
    the queries' slice columns; ``pairs`` holds one row per (query, document) that is a candidate
    or judged: ``gold`` the grade (0 when unjudged), ``judged`` ``yes`` or ``no``, ``candidate``
    ``yes`` for the documents to rank, ``no`` for judged documents outside the candidates (they
    count in the ideal ranking and the number of relevant documents, as in pytrec_eval). A query
    with judgements but no candidates is kept, and scores 0 as in MTEB (its run is empty); one none
    of whose judged documents is in the corpus has nothing to hold it and is dropped and counted."""
    split = spec.split or "test"
    if _old_format(layout, spec.subset):
        parts = _old_format_parts(layout, spec, split)
    else:
        parts = read_retrieval_parts(layout, spec)
        if parts.candidates is None:
            raise DataError(f"{layout.root}: no top_ranked subset (configs: {', '.join(sorted(layout.subsets))}): a "
                            "reranking task ranks each query's candidates; read a task without them as task: "
                            "retrieval")
    assert parts.candidates is not None
    extra = [c for c in dict.fromkeys([*spec.slices, *([spec.group_column] if spec.group_column else [])])]
    texts: dict[str, dict[str, Any]] = {}
    pairs: dict[str, list[Any]] = {name: [] for name in (*PAIRS_SCHEMA.names, "candidate", "judged")}
    missing_documents: set[str] = set()
    without_candidates, without_pairs = 0, 0
    for query_id in sorted(parts.queries):
        ranked = list(dict.fromkeys(parts.candidates.get(query_id, [])))
        judged = parts.qrels[query_id]
        without_candidates += not ranked
        unknown = [doc for doc in ranked if doc not in parts.documents]
        if unknown:
            raise DataError(f"{layout.root}: {parts.configs.get('top_ranked', 'candidates')}: query {query_id!r} "
                            f"names candidate {unknown[0]!r}, which is not in the corpus "
                            f"({parts.configs.get('corpus', 'its documents')}); fix the candidates or the corpus")
        listed = set(ranked)
        missing_documents |= {doc for doc in judged if doc not in parts.documents}
        documents = [*ranked, *sorted(doc for doc in judged if doc not in listed and doc in parts.documents)]
        if not documents:
            without_pairs += 1
            continue
        query_text = QUERY_PREFIX + query_id
        texts[query_text] = {"text": parts.queries[query_id]["text"], "role": "query",
                             **{column: _optional_string(parts.queries[query_id].get(column)) for column in extra}}
        for doc_id in documents:
            title, body = parts.documents[doc_id]
            texts.setdefault(DOCUMENT_PREFIX + doc_id, {"text": (f"{title} {body}".strip() if title else body),
                                                        "role": "document", **dict.fromkeys(extra)})
            pairs["pair_id"].append(f"{query_id}\t{doc_id}")
            pairs["text_id_1"].append(query_text)
            pairs["text_id_2"].append(DOCUMENT_PREFIX + doc_id)
            pairs["gold"].append(float(judged.get(doc_id, 0)))
            pairs["split"].append(split)
            pairs["candidate"].append("yes" if doc_id in listed else "no")
            pairs["judged"].append("yes" if doc_id in judged else "no")
    if not texts:
        raise DataError(f"{layout.root}: no query of split {split!r} has both judgements and candidates; check split: "
                        "and subset:")
    ordered = sorted(texts)
    table = pa.table({"text_id": ordered, **{column: [texts[t][column] for t in ordered]
                                             for column in ("text", "role", *extra)}})
    table = table.cast(pa.schema([pa.field(name, pa.string()) for name in table.column_names]))
    source = {"loader": "mteb", **origin, "path": str(layout.root), "layout": f"{layout.kind}, MTEB retrieval",
              "subset": spec.subset, "split": split, "configs": parts.configs, **parts.dropped,
              "queries_without_candidates": without_candidates, "queries_dropped": without_pairs,
              "judged_documents_not_in_corpus": len(missing_documents)}
    pair_schema = pa.schema([*PAIRS_SCHEMA, pa.field("candidate", pa.string()), pa.field("judged", pa.string())])
    return task_tables("reranking", table, pa.table(pairs).cast(pair_schema), source, str(layout.root))


def _without_empty_texts(parts: RetrievalParts, spec: MtebDataset, where: str) -> RetrievalParts:
    """The parts under the entry's ``empty_texts`` policy, as a BEIR folder's: ``keep`` (encoded as
    the empty string), ``drop`` (removed with their judgements, listed) or ``error``."""
    empty_documents = sorted(doc for doc, (title, text) in parts.documents.items() if not title.strip()
                             and not text.strip())
    empty_queries = sorted(query for query, record in parts.queries.items() if not record["text"].strip())
    if spec.empty_texts == "keep" or not (empty_documents or empty_queries):
        return parts
    if spec.empty_texts == "error":
        raise DataError(f"{where}: empty texts: documents {empty_documents[:5]} ({parts.configs['corpus']}), queries "
                        f"{empty_queries[:5]} ({parts.configs['queries']}); set empty_texts: keep (encode them as the "
                        "empty string) or drop in datasets.yaml")
    gone_documents, gone_queries = set(empty_documents), set(empty_queries)
    dropped_qrels = [[query, doc, grade] for query, docs in parts.qrels.items() for doc, grade in docs.items()
                     if query in gone_queries or doc in gone_documents]
    qrels = {query: kept for query, docs in parts.qrels.items() if query not in gone_queries
             and (kept := {doc: grade for doc, grade in docs.items() if doc not in gone_documents})}
    return RetrievalParts(
        {doc: texts for doc, texts in parts.documents.items() if doc not in gone_documents},
        {query: record for query, record in parts.queries.items() if query in qrels}, qrels, parts.candidates,
        parts.configs, {**parts.dropped, "empty_texts": {"dropped_documents": empty_documents,
                                                          "dropped_queries": empty_queries,
                                                          "dropped_qrels": dropped_qrels}})


def _optional_string(value: Any) -> str | None:
    return None if value is None else str(value)


def _part_configs(layout: MtebLayout, subset: str | None) -> dict[str, str]:
    """The configs holding each part (corpus, queries, qrels, top_ranked when present) of
    ``subset`` (None: the task's only one), named as MTEB names them."""
    configs = set(layout.subsets)
    if subset is None:
        prefixed = sorted({name.rsplit("-", 1)[0] for name in configs if name.endswith("-corpus")})
        if "corpus" in configs or not prefixed:
            subset = "default"
        elif len(prefixed) == 1:
            subset = prefixed[0]
        else:
            raise DataError(f"{layout.root}: {len(prefixed)} subsets ({', '.join(prefixed)}) in MTEB's retrieval layout; "
                            "set subset: to one of them in datasets.yaml")
    prefix = "" if subset == "default" else f"{subset}-"
    names = {"corpus": f"{prefix}corpus", "queries": "query" if "query" in configs else f"{prefix}queries",
             "qrels": f"{subset}-qrels" if prefix else ("default" if "default" in configs else "qrels")}
    if f"{prefix}top_ranked" in configs:
        names["top_ranked"] = f"{prefix}top_ranked"
    if f"{prefix}instruction" in configs:
        raise DataError(f"{layout.root}: subset {prefix}instruction holds per-query instructions (MTEB's instruction "
                        "retrieval), which are not read; point the entry at a task without them")
    missing = {part: name for part, name in names.items() if name not in configs}
    if missing:
        raise DataError(f"{layout.root}: no {', '.join(f'{part} ({name})' for part, name in missing.items())} in MTEB's "
                        f"retrieval layout (configs found, {layout.kind}: {', '.join(sorted(configs)) or 'none'}); "
                        "point the entry at an MTEB retrieval or reranking task's data, or set subset:")
    return names


def _split_of(layout: MtebLayout, config: str, split: str) -> str:
    """MTEB's split of one part: the wanted one when the part has it, else its only split."""
    splits = layout.subsets[config]
    if split in splits:
        return split
    if len(splits) == 1:
        return next(iter(splits))
    raise DataError(f"{layout.root}: subset {config!r} has no split {split!r} (its splits: {', '.join(sorted(splits))}); "
                    "set split: to one of them in datasets.yaml")


def _part(layout: MtebLayout, config: str, split: str) -> tuple[pa.Table, str]:
    files = layout.subsets[config][_split_of(layout, config, split)]
    where = str(files[0]) if len(files) == 1 else f"{files[0]} (+{len(files) - 1} more)"
    return read_split(files), where


def _id_column(table: pa.Table, where: str) -> str:
    for column in ("_id", "id"):
        if column in table.column_names:
            return column
    raise DataError(f"{where}: no id column (_id or id; columns: {', '.join(table.column_names)})")


def _records(table: pa.Table, columns: Iterable[str], where: str) -> list[dict[str, Any]]:
    missing = [column for column in columns if column not in table.column_names]
    if missing:
        raise DataError(f"{where}: no column(s) {', '.join(missing)} (columns: {', '.join(table.column_names)}); MTEB's "
                        "retrieval layout has corpus (_id, title, text), queries (_id, text), qrels (query-id, "
                        "corpus-id, score) and top_ranked (query-id, corpus-ids)")
    return table.to_pylist()


def _id(value: Any, where: str, row: int) -> str:
    identifier = "" if value is None else str(value)
    problem = trec_id_problem(identifier)
    if problem is not None:
        raise DataError(f"{where}: row {row}: id {identifier!r} cannot be used: {problem} (runs are exported as TREC "
                        "files); rename it")
    return identifier


def _old_format(layout: MtebLayout, subset: str | None) -> bool:
    """Whether the data is MTEB's older reranking format (no corpus config; rows of query,
    positive and negative)."""
    if any(name == "corpus" or name.endswith("-corpus") for name in layout.subsets):
        return False
    name = subset or ("default" if "default" in layout.subsets else next(iter(layout.subsets), None))
    if name not in layout.subsets:
        return False
    files = next(iter(layout.subsets[name].values()))
    return {"query", "positive", "negative"} <= set(read_split(files[:1]).column_names)


def _old_format_parts(layout: MtebLayout, spec: MtebDataset, split: str) -> RetrievalParts:
    """MTEB's older reranking rows as retrieval parts, with MTEB's ids
    (``AbsTaskReranking._process_example``): rows without a positive or without a negative are
    dropped first, the others numbered in order."""
    from embedpyramid.data.mteb_files import one_subset

    subset = one_subset(layout, spec.subset)
    splits = layout.subsets[subset]
    if split not in splits:
        raise DataError(f"{layout.root}: subset {subset!r} has no split {split!r} (its splits: "
                        f"{', '.join(sorted(splits))}); set split: to one of them in datasets.yaml")
    files = splits[split]
    where = str(files[0]) if len(files) == 1 else f"{files[0]} (+{len(files) - 1} more)"
    documents: dict[str, tuple[str, str]] = {}
    queries: dict[str, dict[str, Any]] = {}
    qrels: dict[str, dict[str, int]] = {}
    candidates: dict[str, list[str]] = {}
    rows = _records(read_split(files), ("query", "positive", "negative"), where)
    kept = [record for record in rows if record["positive"] and record["negative"]]
    for index, record in enumerate(kept):
        query_id = f"{split}_query{index}"
        queries[query_id] = {"text": str(record["query"])}
        ranked = []
        for kind, grade, texts in (("apositive", 1, record["positive"]), ("negative", 0, record["negative"])):
            for i, text in enumerate(texts):
                doc_id = f"{kind}_{query_id}_{i:05d}"
                documents[doc_id] = ("", str(text))
                qrels.setdefault(query_id, {})[doc_id] = grade
                ranked.append(doc_id)
        candidates[query_id] = ranked
    return RetrievalParts(documents, queries, qrels, candidates, {"rows": f"{subset}[{split}]"},
                          {"rows_without_positive_or_negative": len(rows) - len(kept)})
