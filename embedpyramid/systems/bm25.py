"""BM25 over the frozen corpus with ``bm25s``: the lexical first stage of pyramid L5.

Texts become terms with bm25s's ``Tokenizer`` (:class:`~embedpyramid.config.system_kinds.Bm25Tokenizer`:
lowercase, the regex split, stopword removal, then PyStemmer stemming); the corpus fixes the
vocabulary, and a query term outside it is dropped. A document's text is ``title + " " + text``
as on the dense side (:func:`embedpyramid.data.document_texts`).

Scoring is bm25s's (Kamphuis et al., "Which BM25 do you mean? A large-scale reproducibility
study of scoring variants", ECIR 2020). With N documents, df(t) the documents holding term t,
tf(t, d) its count in d, |d| the terms of d after stopwords and stemming and avgdl their mean,
the default ``method: lucene`` scores

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

— Lucene's BM25 without the constant (k1 + 1) numerator factor, which changes no ranking — with
a query term repeated n times counted n times. ``robertson`` uses idf = ln((N − df + 0.5) /
(df + 0.5)) clipped at 0; ``atire`` idf = ln(N / df) and tf·(k1 + 1) in the numerator;
``bm25l``/``bm25+`` add ``delta`` as in the paper.

The run keeps, per query, the ``depth`` best documents with a score above 0; a document sharing
no term with the query (score 0) is not retrieved, so a query whose terms are all stopwords or
unknown retrieves nothing (and scores 0 on every metric). Ties in score go to the smaller doc_id
(:mod:`embedpyramid.systems.runs`): bm25s's own top-k breaks them arbitrarily, so the selection
is done here on bm25s's full score vector.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from typing import Any

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from embedpyramid.config.system_kinds import Bm25System, Bm25Tokenizer
from embedpyramid.systems.latency import StageLatency
from embedpyramid.systems.runs import CodedRun

_BACKEND = "numpy"
"""bm25s's scoring backend: numpy (numba would JIT-compile; the scores are the same)."""


def make_tokenizer(settings: Bm25Tokenizer) -> Tokenizer:
    """A fresh bm25s ``Tokenizer`` with the configured settings (its vocabulary is empty)."""
    return Tokenizer(
        lower=settings.lower, splitter=settings.token_pattern,
        stopwords=list(settings.stopwords) if isinstance(settings.stopwords, tuple) else settings.stopwords,
        stemmer=None if settings.stemmer is None else Stemmer.Stemmer(settings.stemmer),
    )


@dataclass(frozen=True, eq=False)
class Bm25Index:
    """A bm25s index over documents in corpus order, and what built it."""

    spec: Bm25System
    retriever: bm25s.BM25 = field(repr=False)
    tokenizer: Tokenizer = field(repr=False)
    n_documents: int
    vocabulary_size: int
    index_seconds: float

    def describe(self) -> dict[str, Any]:
        """The settings and versions recorded with the numbers."""
        return {
            **self.spec.identity(), "backend": _BACKEND, "n_documents": self.n_documents,
            "vocabulary_size": self.vocabulary_size, "bm25s": importlib_metadata.version("bm25s"),
            "PyStemmer": importlib_metadata.version("PyStemmer"),
        }


def build_bm25_index(spec: Bm25System, documents: Sequence[str]) -> Bm25Index:
    """Tokenize ``documents`` (corpus order) and build the bm25s index; timed."""
    if not documents:
        raise ValueError("BM25 needs at least one document")
    start = time.perf_counter()
    tokenizer = make_tokenizer(spec.tokenizer)
    # allow_empty=False: a document without terms has length 0 (the Tokenizer's default would give
    # it one empty-string term, which shifts avgdl away from bm25s.tokenize's and the formula's).
    tokens = tokenizer.tokenize(list(documents), update_vocab=True, return_as="tuple", show_progress=False,
                                allow_empty=False)
    retriever = bm25s.BM25(k1=spec.k1, b=spec.b, delta=spec.delta, method=spec.method, backend=_BACKEND)
    retriever.index(tokens, show_progress=False)
    seconds = time.perf_counter() - start
    return Bm25Index(spec, retriever, tokenizer, len(documents), len(tokens.vocab), seconds)


def query_terms(index: Bm25Index, text: str) -> list[int]:
    """The query's term ids in the corpus vocabulary (unknown terms dropped; may be empty)."""
    return next(index.tokenizer.streaming_tokenize([text], update_vocab=False, allow_empty=False))


def top_documents(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` best positive scores, by score descending then index ascending."""
    positive = np.flatnonzero(scores > 0)
    if positive.size > depth:
        values = scores[positive]
        kth = np.partition(values, positive.size - depth)[positive.size - depth]
        positive = positive[values >= kth]
    order = np.lexsort((positive, -scores[positive]))
    return positive[order[:depth]]


@dataclass(frozen=True, eq=False)
class Bm25Run:
    """The BM25 run, the queries that kept no term, and the per-query latency."""

    run: CodedRun
    empty_queries: int
    latency: StageLatency


def bm25_search(index: Bm25Index, queries: Sequence[str], depth: int) -> Bm25Run:
    """Retrieve the top ``depth`` documents of every query, one query per call.

    Each call — tokenizing the query, scoring every document, selecting the top — is timed, so
    the latency is that of every query at batch 1 (this is how the run is computed, not a
    separate measurement).
    """
    if depth < 1:
        raise ValueError(f"depth must be positive, got {depth}")
    retriever = index.retriever
    query_rows, doc_rows, score_rows, seconds = [], [], [], np.empty(len(queries))
    empty = 0
    for position, text in enumerate(queries):
        start = time.perf_counter()
        term_ids = query_terms(index, text)
        if term_ids:
            scores = retriever.get_scores_from_ids(term_ids)
            documents = top_documents(scores, depth)
            doc_rows.append(documents)
            score_rows.append(scores[documents])
            query_rows.append(np.full(documents.size, position, dtype=np.int64))
        else:
            empty += 1
        seconds[position] = time.perf_counter() - start
    run = CodedRun(
        np.concatenate(query_rows) if query_rows else np.empty(0, np.int64),
        np.concatenate(doc_rows) if doc_rows else np.empty(0, np.int64),
        np.concatenate(score_rows) if score_rows else np.empty(0, np.float32),
    )
    return Bm25Run(run, empty, StageLatency.from_seconds(seconds, scope="every query"))
