import math

import bm25s
import numpy as np
import polars as pl
import pytest
import Stemmer

from embedpyramid.config import MetricConventions, parse_measure
from embedpyramid.config.system_kinds import Bm25System
from embedpyramid.retrieval.metrics import evaluate_run
from embedpyramid.systems.bm25 import bm25_search, build_bm25_index, make_tokenizer, query_terms, top_documents


def plain(**fields: object) -> Bm25System:
    """BM25 without stopwords or stemming, so terms are the lowercased words."""
    return Bm25System.model_validate({"kind": "bm25", "tokenizer": {"stopwords": None, "stemmer": None}, **fields})


def test_lucene_bm25_matches_a_hand_computed_three_document_corpus():
    # N = 3, |d| = 3, 2, 1 terms, avgdl = 2, k1 = 1.2, b = 0.75.
    index = build_bm25_index(plain(k1=1.2, b=0.75), ["cat cat mouse", "cat dog", "bird"])
    result = bm25_search(index, ["cat bird"], depth=10)
    # idf(cat) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6); idf(bird) = ln(1 + 2.5 / 1.5) = ln(8/3)
    # d0: ln(1.6) * 2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2)) = ln(1.6) * 2 / 3.65
    # d1: ln(1.6) * 1 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2)) = ln(1.6) / 2.2
    # d2: ln(8/3) * 1 / (1 + 1.2 * (0.25 + 0.75 * 1 / 2)) = ln(8/3) / 1.75
    expected = {2: math.log(8 / 3) / 1.75, 0: math.log(1.6) * 2 / 3.65, 1: math.log(1.6) / 2.2}
    assert result.run.doc.tolist() == [2, 0, 1]
    assert result.run.score.tolist() == pytest.approx([expected[2], expected[0], expected[1]], rel=1e-6)
    assert expected[2] == pytest.approx(0.5604738, rel=1e-6)


def test_atire_variant_uses_its_own_idf_and_numerator():
    index = build_bm25_index(plain(method="atire", k1=1.2, b=0.75), ["cat cat mouse", "cat dog", "bird"])
    result = bm25_search(index, ["cat"], depth=10)
    # idf = ln(N / df) = ln(3 / 2); tf component = tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))
    assert result.run.score.tolist() == pytest.approx(
        [math.log(1.5) * 2 * 2.2 / 3.65, math.log(1.5) * 2.2 / 2.2], rel=1e-6
    )


def test_repeated_query_terms_count_each_time():
    index = build_bm25_index(plain(), ["cat cat mouse", "cat dog", "bird"])
    once, twice = bm25_search(index, ["cat"], 10).run, bm25_search(index, ["cat cat"], 10).run
    assert twice.score.tolist() == pytest.approx([2 * s for s in once.score.tolist()], rel=1e-6)


def test_tokenizer_lowercases_drops_stopwords_and_stems():
    tokenizer = make_tokenizer(Bm25System.model_validate({"kind": "bm25"}).tokenizer)
    assert tokenizer.tokenize(["The cats are Running"], return_as="string", show_progress=False) == [["cat", "run"]]


def test_query_terms_come_from_the_corpus_vocabulary():
    index = build_bm25_index(Bm25System.model_validate({"kind": "bm25"}), ["cats purr", "dogs bark"])
    assert query_terms(index, "A running cat") == query_terms(index, "cats")
    assert query_terms(index, "unicorns and the") == []


def test_ties_at_the_cut_go_to_the_smaller_document_index():
    index = build_bm25_index(plain(), ["dog", "bird", "dog", "dog"])
    result = bm25_search(index, ["dog"], depth=2)
    assert result.run.doc.tolist() == [0, 2]
    assert result.run.score[0] == result.run.score[1]


def test_documents_without_a_query_term_and_stopword_only_queries_are_not_retrieved():
    index = build_bm25_index(Bm25System.model_validate({"kind": "bm25"}), ["cats purr", "dogs bark", "birds sing"])
    result = bm25_search(index, ["cat", "the and of", "unicorns"], depth=10)
    assert result.run.query.tolist() == [0] and result.run.doc.tolist() == [0]
    assert result.empty_queries == 2
    assert result.latency.n_queries == 3 and result.latency.scope == "every query"


def test_top_documents_keeps_positive_scores_in_project_order():
    scores = np.array([0.0, 2.0, 2.0, 1.0, 0.0, 2.0], dtype=np.float32)
    assert top_documents(scores, 2).tolist() == [1, 2]
    assert top_documents(scores, 10).tolist() == [1, 2, 5, 3]


def test_scores_agree_with_bm25s_tokenize_and_retrieve_on_the_default_corpus(chatterbot_tables):
    """The wrapper (bm25s's Tokenizer class, own top-k) against the plain ``bm25s.tokenize`` path."""
    tables = chatterbot_tables
    index = build_bm25_index(Bm25System.model_validate({"kind": "bm25"}), tables.doc_texts)
    result = bm25_search(index, tables.query_texts, depth=10)
    stemmer = Stemmer.Stemmer("english")
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    reference.index(bm25s.tokenize(tables.doc_texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    tokens = bm25s.tokenize(tables.query_texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    for query in range(0, len(tables.query_texts), 17):
        ids = reference.get_tokens_ids(tokens[query])
        mine = result.run.query_slice(query)
        if not ids:
            assert len(mine) == 0
            continue
        full = reference.get_scores_from_ids(ids)
        assert np.array_equal(mine.score, full[mine.doc])
        rest = np.delete(full, mine.doc)
        if len(mine) == 10:
            assert (rest <= mine.score[-1]).all()  # nothing left out beats the last kept score
        else:
            assert (rest == 0).all()  # every document sharing a term is retrieved


def test_the_run_is_scored_by_the_project_metrics():
    index = build_bm25_index(plain(), ["cat cat mouse", "cat dog", "bird"])
    run = bm25_search(index, ["cat bird", "dog"], depth=10).run.table(["q0", "q1"], ["d0", "d1", "d2"])
    qrels = pl.DataFrame({"query_id": ["q0", "q1"], "doc_id": ["d2", "d0"], "relevance": [1, 1]},
                         schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})
    values = evaluate_run(pl.from_arrow(run), qrels, [parse_measure("MRR@10")], MetricConventions()).per_query
    assert values["value"].to_list() == [1.0, 0.0]


def test_a_document_of_stopwords_only_has_length_zero():
    spec = Bm25System.model_validate({"kind": "bm25", "tokenizer": {"stopwords": "en", "stemmer": None}})
    index = build_bm25_index(spec, ["cat cat mouse", "cat dog", "bird", "the of"])
    # N = 4, |d| = 3, 2, 1, 0, avgdl = 1.5; idf(cat) = ln(1 + (4 - 2 + 0.5) / 2.5) = ln 2.
    result = bm25_search(index, ["cat"], depth=10)
    assert result.run.score.tolist() == pytest.approx(
        [math.log(2) * 2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 1.5)), math.log(2) / (1 + 1.2 * (0.25 + 0.75 * 2 / 1.5))],
        rel=1e-6,
    )
