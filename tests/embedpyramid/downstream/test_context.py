import polars as pl
import pytest

from embedpyramid.data import DataError
from embedpyramid.downstream import build_contexts

CORPUS = pl.DataFrame({"doc_id": ["a", "b", "c", "q1"], "title": ["", "Title", "", ""],
                       "text": ["Alpha text.", "Beta text.", "Gamma text.", "Self."]})
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["first?", "second?", "third?"]})


def run(rows):
    return pl.DataFrame(rows, schema=["query_id", "rank", "doc_id", "score"], orient="row")


def test_passages_follow_score_then_doc_id_and_are_cut_at_k():
    # The rank column is ignored: b and a tie at 0.9 and a wins by doc_id; c (0.5) is cut at k=2.
    contexts = build_contexts(run([("q1", 1, "c", 0.5), ("q1", 2, "b", 0.9), ("q1", 3, "a", 0.9)]), QUERIES, CORPUS, 2)
    assert [c.query_id for c in contexts] == ["q1", "q2", "q3"]
    first = contexts[0]
    assert first.doc_ids == ("a", "b") and [p.rank for p in first.passages] == [1, 2]
    assert first.passages[1].text == "Title Beta text."  # title + text, as encoded
    assert first.query == "first?" and contexts[1].passages == ()  # q2 is absent from the run


def test_self_hits_are_dropped_before_the_cut_when_asked():
    rows = run([("q1", 1, "q1", 1.0), ("q1", 2, "a", 0.8), ("q1", 3, "b", 0.7)])
    assert build_contexts(rows, QUERIES, CORPUS, 2)[0].doc_ids == ("q1", "a")
    assert build_contexts(rows, QUERIES, CORPUS, 2, drop_self_hits=True)[0].doc_ids == ("a", "b")


def test_a_document_missing_from_the_corpus_is_named():
    with pytest.raises(DataError, match="query 'q2' names document 'zz'"):
        build_contexts(run([("q2", 1, "zz", 1.0)]), QUERIES, CORPUS, 3)
    with pytest.raises(ValueError, match="k must be at least 1"):
        build_contexts(run([]), QUERIES, CORPUS, 0)
