import math

import pytest

from embedpyramid.config import MetricConventions
from embedpyramid.downstream import Answer, Context, Passage, QrelsJudge, score_to_grade

QRELS = {"q": {"a": 2, "b": 1, "c": 0, "d": 2}, "none": {"a": 0}}


def context(*doc_ids, query_id="q"):
    return Context(query_id, "?", tuple(Passage(d, i, d) for i, d in enumerate(doc_ids, start=1)))


def test_score_to_grade_rounds_halves_up():
    assert [score_to_grade(s) for s in (0.0, 0.124, 0.125, 0.5, 0.625, 1.0)] == [1, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        score_to_grade(1.5)


def test_grades_follow_the_documented_mapping_by_hand():
    judge = QrelsJudge(QRELS, ["relevance", "ranking", "coverage"], k=3)
    judgement = judge.judge(context("c", "b", "x"), Answer("q", "text", citations=("b",)))
    # relevance: best cited grade 1 / best grade 2 = 0.5 -> 3.
    # ranking: DCG = 0/log2(2) + 1/log2(3) + 0 = 0.6309; IDCG@3 = 2 + 2/log2(3) + 1/2 = 3.7619;
    #          nDCG = 0.1677 -> 1 + floor(0.671 + 0.5) = 2.
    # coverage: relevant (grade >= 1) = a, b, d; context holds b -> 1/3 -> 1 + floor(1.833) = 2.
    assert dict(judgement.grades) == {"relevance": 3, "ranking": 2, "coverage": 2}
    ndcg = (1 / math.log2(3)) / (2 + 2 / math.log2(3) + 0.5)
    assert f"ranking {ndcg:.3f}" in judgement.rationale


def test_a_perfect_context_and_answer_get_fives_and_no_citation_gets_relevance_one():
    judge = QrelsJudge(QRELS, ["relevance", "ranking", "coverage"], k=3)
    assert dict(judge.judge(context("a", "d", "b"), Answer("q", "t", ("d",))).grades) == {
        "relevance": 5, "ranking": 5, "coverage": 5}
    assert judge.judge(context("a", "d", "b"), Answer("q", "t")).grades["relevance"] == 1


def test_the_threshold_decides_relevance_and_queries_without_relevant_documents_are_skipped():
    strict = QrelsJudge(QRELS, ["coverage"], k=3, conventions=MetricConventions(relevance_threshold=2))
    assert dict(strict.judge(context("a", "b"), Answer("q", "t")).grades) == {"coverage": 3}  # a of (a, d)
    skipped = strict.judge(context("a", query_id="none"), Answer("none", "t"))
    assert skipped.grades == {} and skipped.skipped == "no qrel at or above the relevance threshold"
    with pytest.raises(ValueError, match="grades only"):
        QrelsJudge(QRELS, ["fluency"], k=3)
