import polars as pl
import pytest
from toy_per_query import QUERIES, SETTINGS, per_query_table

from embedpyramid.summary.regressions import regressions


def test_regressions_list_worst_and_best_queries_with_their_documents():
    qrels = pl.DataFrame(
        {
            "query_id": ["q4", "q4", "q4", "q5", "q6"],
            "doc_id": ["d4", "d9", "d0", "d5", "d6"],
            "relevance": [1, 2, 0, 1, 1],
        }
    )
    runs = {
        "base": pl.DataFrame(
            {"query_id": ["q4", "q4", "q5"], "rank": [2, 1, 1], "doc_id": ["d1", "d4", "d7"]}
        ),
        "new": pl.DataFrame(
            {"query_id": ["q4", "q5", "q6"], "rank": [1, 1, 1], "doc_id": ["d8", "d5", "d6"]}
        ),
    }
    corpus = pl.DataFrame({"doc_id": ["d4", "d5", "d8"], "text": ["four", "five", "eight"]})
    settings = SETTINGS.model_copy(update={"worst_n": 2})
    listed = regressions(
        per_query_table(), QUERIES, qrels, runs, settings, "nDCG@10", corpus=corpus
    )
    assert listed.select("direction", "rank", "query_id", "delta", "n_direction", "n_tied").rows() == [
        ("regression", 1, "q4", -0.125, 1, 1),
        ("improvement", 1, "q5", 0.375, 4, 2),  # tied with q6 on delta: query_id decides, disclosed
        ("improvement", 2, "q6", 0.375, 4, 2),
    ]
    worst = listed.row(0, named=True)
    assert (worst["value_a"], worst["value_b"], worst["text"]) == (0.5, 0.375, "w w w w")
    assert worst["gold_doc_ids"] == ["d9", "d4"]  # most relevant first, non-relevant d0 dropped
    assert (worst["top1_a"], worst["top1_b"]) == ("d4", "d8")
    assert (worst["top1_a_text"], worst["top1_b_text"]) == ("four", "eight")
    assert listed.row(2, named=True)["top1_a"] is None  # base retrieved nothing for q6

    long_runs = pl.concat([run.with_columns(model=pl.lit(m)) for m, run in runs.items()])
    same = regressions(per_query_table(), QUERIES, qrels, long_runs, settings, "nDCG@10")
    assert same.columns == listed.columns[:-2]
    assert same["top1_b"].to_list() == listed["top1_b"].to_list()

    with pytest.raises(ValueError, match="runs has no rows for models \\['new'\\]"):
        regressions(per_query_table(), QUERIES, qrels, {"base": runs["base"]}, settings, "nDCG@10")
    with pytest.raises(ValueError, match="metric 'MAP@10' is not in per_query"):
        regressions(per_query_table(), QUERIES, qrels, runs, settings, "MAP@10")

def test_regressions_of_a_dataset_with_only_the_baseline_are_empty():
    qrels = pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "relevance": [1]})
    runs = {"base": pl.DataFrame({"query_id": ["q1"], "rank": [1], "doc_id": ["d1"]})}
    alone = per_query_table(models=("base",))
    listed = regressions(alone, QUERIES, qrels, runs, SETTINGS, "nDCG@10")
    assert listed.is_empty()
    assert "top1_b" in listed.columns
