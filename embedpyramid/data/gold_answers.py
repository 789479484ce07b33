"""Gold answers for L6 (answer containment, token F1): where a dataset has them, and in what form.

A dataset declares its source in ``datasets.yaml`` (``gold_answers:``). ``relevant-documents``
fits datasets whose documents *are* answers, like chatterbot-corpus, where each document is a
reply given to a question: the gold answers of a query are the texts of its documents judged
relevant (grade >= the protocol's relevance threshold). They are derived from the frozen corpus
and qrels rather than stored, so they can never disagree with the frozen data.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from embedpyramid.config import AnyDataset
from embedpyramid.data.frozen import GOLD_ANSWERS_SCHEMA


def gold_answers_from_relevant_documents(corpus: pa.Table, qrels: pa.Table, relevance_threshold: int) -> pa.Table:
    """``query_id, answer``: the text of every document judged relevant to the query, sorted by
    (query_id, doc_id)."""
    relevant = qrels.filter(pc.greater_equal(qrels["relevance"], relevance_threshold))
    joined = relevant.select(["query_id", "doc_id"]).join(corpus.select(["doc_id", "text"]), "doc_id", join_type="inner")
    ordered = joined.sort_by([("query_id", "ascending"), ("doc_id", "ascending")])
    return pa.table({"query_id": ordered["query_id"], "answer": ordered["text"]}, schema=GOLD_ANSWERS_SCHEMA)


def dataset_gold_answers(spec: AnyDataset, corpus: pa.Table, qrels: pa.Table, relevance_threshold: int) -> pa.Table | None:
    """The gold answers a dataset entry declares, or None when it declares none."""
    if spec.gold_answers == "relevant-documents":
        return gold_answers_from_relevant_documents(corpus, qrels, relevance_threshold)
    return None
