"""Contexts: the top-k passages of a run, in rank order, that the generator answers from.

The run's rows of each query are ordered by (score descending, doc_id ascending) whatever its
rank column says — the order every metric of the project uses — self-hits are dropped first
when the dataset says so (queries that are also documents), and the first ``k`` documents
become the context, re-ranked 1..k. A passage's text is the document text the models encoded
(``title + " " + text`` when there is a title). Every query of the frozen query table gets a
context; a query absent from the run gets an empty one.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from embedpyramid.data import DataError, document_texts


@dataclass(frozen=True)
class Passage:
    doc_id: str
    rank: int
    text: str


@dataclass(frozen=True)
class Context:
    query_id: str
    query: str
    passages: tuple[Passage, ...]

    @property
    def doc_ids(self) -> tuple[str, ...]:
        return tuple(passage.doc_id for passage in self.passages)


def build_contexts(
    run: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, k: int, *, drop_self_hits: bool = False
) -> list[Context]:
    """One context per query of ``queries`` (in its order): the query's top-``k`` documents.

    ``run`` has columns query_id, doc_id, score; ``queries`` query_id, text; ``corpus`` doc_id,
    title, text. A run document missing from the corpus is an error naming the query and the
    document.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1; got {k}")
    texts = dict(zip(corpus["doc_id"].to_list(), document_texts(corpus.to_arrow()), strict=True))
    rows = run.select("query_id", "doc_id", "score")
    if drop_self_hits:
        rows = rows.filter(pl.col("query_id") != pl.col("doc_id"))
    top = (
        rows.sort(["query_id", "score", "doc_id"], descending=[False, True, False])
        .group_by("query_id", maintain_order=True)
        .head(k)
        .group_by("query_id", maintain_order=True)
        .agg("doc_id")
    )
    ranked = dict(zip(top["query_id"].to_list(), top["doc_id"].to_list(), strict=True))
    contexts = []
    for query_id, query in zip(queries["query_id"].to_list(), queries["text"].to_list(), strict=True):
        passages = []
        for rank, doc_id in enumerate(ranked.get(query_id, []), start=1):
            if doc_id not in texts:
                raise DataError(f"run of query {query_id!r} names document {doc_id!r}, which is not in the corpus; "
                                "recompute the run on the frozen dataset it belongs to")
            passages.append(Passage(doc_id, rank, texts[doc_id]))
        contexts.append(Context(query_id, query, tuple(passages)))
    return contexts
