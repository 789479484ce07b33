"""The offline extractive generator: the best sentence of the context, citing its passage.

The rule is fixed and uses nothing of the model under evaluation, so that only the context
changes between models:

1. split every passage of the context into sentences (:func:`~embedpyramid.downstream.text.sentences`);
2. score each sentence by the summed inverse document frequency of the distinct query words it
   contains, ``score(s) = sum_{w in words(q) & words(s)} idf(w)`` with the smoothed
   ``idf(w) = ln((N + 1) / (df(w) + 1)) + 1`` over the N documents of the frozen corpus (a word
   the corpus lacks gets the largest idf);
3. the answer is the highest-scoring sentence; ties go to the better-ranked passage, then to the
   earlier sentence; when no sentence shares a word with the query, the answer is the first
   sentence of the top passage (the lead rule);
4. it cites exactly the passage the sentence came from. An empty context gives an empty answer
   with no citation.

This is the "best sentence by term overlap" baseline of extractive QA (cf. the sliding-window
baseline of Richardson et al. 2013, MCTest), weighted by idf so that function words do not decide.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.context import Context
from embedpyramid.downstream.text import sentences, word_tokens


class ExtractiveGenerator:
    """``document_frequency`` maps a word to the number of corpus documents holding it."""

    def __init__(self, document_frequency: Mapping[str, int], n_documents: int):
        if n_documents < 1:
            raise ValueError(f"n_documents must be at least 1; got {n_documents}")
        self.document_frequency = dict(document_frequency)
        self.n_documents = n_documents

    @classmethod
    def from_corpus(cls, texts: Iterable[str]) -> ExtractiveGenerator:
        frequency: Counter[str] = Counter()
        n = 0
        for text in texts:
            frequency.update(set(word_tokens(text)))
            n += 1
        return cls(frequency, n)

    def idf(self, word: str) -> float:
        return math.log((self.n_documents + 1) / (self.document_frequency.get(word, 0) + 1)) + 1.0

    def describe(self) -> dict[str, Any]:
        return {"kind": "extractive", "rule": "max summed idf of shared query words; ties: passage rank, "
                "sentence order; no overlap: first sentence of the top passage", "n_documents": self.n_documents}

    def answer(self, context: Context) -> Answer:
        query_words = set(word_tokens(context.query))
        best: tuple[float, str, str] | None = None  # (score, sentence, doc_id)
        lead: tuple[str, str] | None = None
        for passage in context.passages:
            for sentence in sentences(passage.text):
                if lead is None:
                    lead = (sentence, passage.doc_id)
                score = sum(self.idf(word) for word in query_words & set(word_tokens(sentence)))
                if score > 0 and (best is None or score > best[0]):
                    best = (score, sentence, passage.doc_id)
        if best is not None:
            return Answer(context.query_id, best[1], (best[2],))
        if lead is not None:
            return Answer(context.query_id, lead[0], (lead[1],))
        return Answer(context.query_id, "")
