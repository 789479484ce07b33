import numpy as np
import polars as pl
import pytest

from embedpyramid.systems.runs import CodedRun, descending_key, empty_queries, encode_run, queries_with_ties, ranked


def test_ranked_orders_by_query_then_score_then_document_and_cuts():
    run = ranked(np.array([1, 0, 0, 0, 1]), np.array([4, 2, 1, 3, 0]), np.array([0.5, 1.0, 1.0, 2.0, 0.7]), depth=2)
    assert run.query.tolist() == [0, 0, 1, 1]
    # Query 0: doc 3 (2.0), then docs 1 and 2 tie at 1.0 -> the smaller index, doc 1; doc 2 is cut.
    assert run.doc.tolist() == [3, 1, 0, 4]
    assert run.score.tolist() == pytest.approx([2.0, 1.0, 0.7, 0.5])
    assert run.ranks().tolist() == [1, 2, 1, 2]


def test_ranked_rounds_to_float32_before_ordering():
    # Distinct in float64, equal in float32: the stored scores tie, so the smaller index must win.
    run = ranked(np.array([0, 0]), np.array([1, 0]), np.array([1.0 + 1e-12, 1.0]))
    assert run.doc.tolist() == [0, 1]


def test_ranked_refuses_nan_scores():
    with pytest.raises(ValueError, match="NaN"):
        ranked(np.array([0]), np.array([0]), np.array([np.nan]))


def test_table_writes_the_project_run_format():
    run = ranked(np.array([0, 0, 1]), np.array([1, 0, 1]), np.array([0.2, 0.9, 0.4]))
    table = run.table(["qa", "qb"], ["da", "db"])
    assert table.column_names == ["query_id", "rank", "doc_id", "score"]
    assert table.column("query_id").to_pylist() == ["qa", "qa", "qb"]
    assert table.column("rank").to_pylist() == [1, 2, 1]
    assert table.column("doc_id").to_pylist() == ["da", "db", "db"]


def test_encode_run_reorders_and_drops_queries_outside_the_list():
    run = pl.DataFrame({"query_id": ["q1", "q1", "q9"], "rank": [1, 2, 1], "doc_id": ["b", "a", "a"],
                        "score": [1.0, 1.0, 3.0]})
    coded = encode_run(run, ["q0", "q1"], ["a", "b"], name="toy")
    # The stated rank is ignored: tied scores go to the smaller doc_id.
    assert coded.query.tolist() == [1, 1] and coded.doc.tolist() == [0, 1]


def test_encode_run_names_unknown_documents_and_repeated_pairs():
    unknown = pl.DataFrame({"query_id": ["q0"], "rank": [1], "doc_id": ["zz"], "score": [1.0]})
    with pytest.raises(ValueError, match="'toy' names 1 documents that are not in the corpus, e.g. 'zz'"):
        encode_run(unknown, ["q0"], ["a"], name="toy")
    repeated = pl.DataFrame({"query_id": ["q0", "q0"], "rank": [1, 2], "doc_id": ["a", "a"], "score": [1.0, 0.5]})
    with pytest.raises(ValueError, match="repeats"):
        encode_run(repeated, ["q0"], ["a"], name="toy")


def test_ties_and_empty_queries_are_counted():
    run = CodedRun(np.array([0, 0, 0, 2, 2]), np.array([0, 1, 2, 0, 1]), np.array([3.0, 2.0, 2.0, 1.0, 0.5]))
    assert queries_with_ties(run) == 1
    assert empty_queries(run, 3) == 1
    assert run.query_slice(2).doc.tolist() == [0, 1]
    assert len(run.query_slice(1)) == 0


def test_descending_key_orders_like_the_scores_reversed():
    rng = np.random.default_rng(0)
    scores = np.r_[rng.standard_normal(200) * 1e3, [0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40]].astype(np.float32)
    keys = descending_key(scores)
    by_key = scores[np.argsort(keys, kind="stable")]
    assert (np.diff(by_key) <= 0).all()
    assert keys[scores.size - 6] == keys[scores.size - 5]  # 0.0 and -0.0 tie


def test_ranked_matches_a_three_key_sort_on_random_rows():
    rng = np.random.default_rng(1)
    query, doc = rng.integers(0, 50, 5000), rng.permutation(5000)
    score = rng.integers(-3, 4, 5000).astype(np.float32)  # many ties
    run = ranked(query, doc, score)
    order = np.lexsort((doc, -score, query))
    assert run.doc.tolist() == doc[order].tolist()


def test_ranked_refuses_a_repeated_pair():
    from embedpyramid.systems.runs import RepeatedPairError

    with pytest.raises(RepeatedPairError, match="query 3 holds document 7 twice"):
        ranked(np.array([3, 1, 3]), np.array([7, 7, 7]), np.array([1.0, 2.0, 0.5]))
