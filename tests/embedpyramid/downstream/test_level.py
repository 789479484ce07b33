"""The per-partition L6 pipeline on a toy dataset, by hand, with the offline generator and judge."""

import polars as pl
import pytest

from embedpyramid.config import MetricConventions
from embedpyramid.data import gold_answers_from_relevant_documents
from embedpyramid.downstream import (
    ExtractiveGenerator,
    QrelsJudge,
    evaluate_downstream,
    paired_coverage,
    read_downstream,
    write_downstream,
)
from embedpyramid.downstream.level import qrels_mapping

CORPUS = pl.DataFrame({
    "doc_id": ["d1", "d2", "d3"], "title": ["", "", ""],
    "text": ["Paris is the capital of France. It is big.", "Berlin is a city in Germany.", "The capital of Italy is Rome."],
})
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3"],
                        "text": ["What is the capital of France?", "Where is Berlin?", "Unjudged?"]})
QRELS = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "doc_id": ["d1", "d2", "d3"], "relevance": [1, 1, 0]},
                     schema_overrides={"relevance": pl.Int32})
GOLD = pl.from_arrow(gold_answers_from_relevant_documents(CORPUS.to_arrow(), QRELS.to_arrow(), 1))


def run(rows):
    return pl.DataFrame(rows, schema=["query_id", "doc_id", "score"], orient="row")


RUN_A = run([("q1", "d3", 0.9), ("q1", "d1", 0.8), ("q1", "d2", 0.1), ("q2", "d2", 0.7), ("q2", "d1", 0.6),
             ("q3", "d1", 0.5)])
RUN_B = run([("q1", "d2", 0.9), ("q1", "d3", 0.8), ("q1", "d1", 0.1), ("q2", "d2", 0.7), ("q2", "d1", 0.6),
             ("q3", "d1", 0.5)])
CRITERIA = ["relevance", "ranking", "coverage"]


def evaluate(run_table, model):
    generator = ExtractiveGenerator.from_corpus(CORPUS["text"].to_list())
    judge = QrelsJudge(qrels_mapping(QRELS), CRITERIA, 2)
    progress = []
    result = evaluate_downstream(run_table, QUERIES, CORPUS, QRELS, GOLD, generator=generator, judge=judge,
                                 dataset="toy", model=model, system="exact", k=2, conventions=MetricConventions(),
                                 progress=lambda done, total: progress.append((done, total)))
    assert progress == [(1, 3), (2, 3), (3, 3)]
    return result


def values(result):
    return {(row["query_id"], row["metric"]): row["value"] for row in result.per_query.iter_rows(named=True)}


def test_answers_metrics_and_grades_by_hand():
    result = evaluate(RUN_A, "a@1")
    answers = {row["query_id"]: row for row in result.answers.iter_rows(named=True)}
    assert answers["q1"]["context"] == ["d3", "d1"]
    assert answers["q1"]["answer"] == "Paris is the capital of France." and answers["q1"]["citations"] == ["d1"]
    assert answers["q2"]["answer"] == "Berlin is a city in Germany."
    got = values(result)
    assert {key: value for key, value in got.items() if key[0] == "q1"} == pytest.approx({
        ("q1", "answer:citation_precision"): 1.0, ("q1", "answer:citation_recall"): 1.0, ("q1", "context:recall"): 1.0,
        ("q1", "answer:contains_gold"): 0.0,  # the gold answer is the whole two-sentence reply
        ("q1", "answer:token_f1"): 2 * (5 / 8) / (1 + 5 / 8),  # paris is capital of france / + it is big
        ("q1", "judge:relevance"): 5.0, ("q1", "judge:ranking"): 4.0,  # nDCG@2 = 1 / log2(3) -> 4
        ("q1", "judge:coverage"): 5.0,
    })
    assert got["q2", "answer:contains_gold"] == 1.0 and got["q2", "judge:ranking"] == 5.0
    assert not any(query == "q3" for query, _ in got)  # no relevant document: excluded, counted
    counts = result.manifest["counts"]
    assert (counts["queries"], counts["excluded_queries"], counts["judged_queries"]) == (3, 1, 2)
    assert counts["queries_with_gold_answers"] == 2 and counts["judge_malformed"] == 0
    assert result.manifest["agreement"] == []  # the judge is the qrels: nothing to agree with
    assert result.per_query.columns == ["dataset", "model", "system", "query_id", "metric", "value"]
    assert set(result.per_query["model"]) == {"a@1"} and set(result.per_query["system"]) == {"exact"}


def test_a_worse_context_gives_a_worse_answer_and_grades():
    got = values(evaluate(RUN_B, "b@2"))
    assert got["q1", "answer:citation_precision"] == 0.0 and got["q1", "context:recall"] == 0.0
    assert [got["q1", f"judge:{c}"] for c in CRITERIA] == [1.0, 1.0, 1.0]
    # "capital of italy is rome" vs the gold reply: 3 common tokens, precision 3/5, recall 3/8.
    assert got["q1", "answer:token_f1"] == pytest.approx(2 * 0.6 * 0.375 / 0.975)


def test_artefacts_round_trip_and_paired_coverage_keeps_common_queries(tmp_path):
    result = evaluate(RUN_A, "a@1")
    paths = write_downstream(result, tmp_path / "downstream")
    assert {p.name for p in paths.values()} == {"answers.parquet", "judgements.parquet", "per_query.parquet",
                                                 "manifest.json"}
    again = read_downstream(tmp_path / "downstream")
    assert again.per_query.equals(result.per_query) and again.answers.equals(result.answers)
    assert again.manifest["judge"]["kind"] == "qrels" and again.manifest["k"] == 2

    other = evaluate(RUN_B, "b@2").per_query.filter(
        ~((pl.col("query_id") == "q2") & (pl.col("metric") == "judge:coverage")))  # as if malformed
    kept, dropped = paired_coverage(pl.concat([result.per_query, other]))
    assert dropped.rows() == [("toy", "exact", "judge:coverage", 1)]
    assert kept.filter(pl.col("metric") == "judge:coverage")["query_id"].to_list() == ["q1", "q1"]
    assert kept.height == 2 * result.per_query.height - 2
