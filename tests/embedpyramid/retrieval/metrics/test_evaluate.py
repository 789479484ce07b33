"""One test per metric convention, on tiny runs with hand-computed values."""

import math

import polars as pl
import pytest

from embedpyramid.config import Measure, MetricConventions, parse_measure
from embedpyramid.retrieval.metrics import RetrievalEvaluation, evaluate_run

LOG2_3 = math.log2(3)  # discount of rank 2 is 1/log2(3) = 0.63093; rank 3: 1/log2(4) = 0.5


def make_run(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    """(query_id, doc_id, score) rows; rank numbers them in the given order."""
    return pl.DataFrame(
        {
            "query_id": [q for q, _, _ in rows],
            "rank": list(range(1, len(rows) + 1)),
            "doc_id": [d for _, d, _ in rows],
            "score": [s for _, _, s in rows],
        },
        schema={"query_id": pl.String, "rank": pl.Int64, "doc_id": pl.String, "score": pl.Float64},
    )


def make_qrels(rows: list[tuple[str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "query_id": [q for q, _, _ in rows],
            "doc_id": [d for _, d, _ in rows],
            "relevance": [r for _, _, r in rows],
        },
        schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64},
    )


def values(evaluation: RetrievalEvaluation, query_id: str) -> dict[str, float]:
    rows = evaluation.per_query.filter(pl.col("query_id") == query_id)
    return dict(zip(rows["metric"].to_list(), rows["value"].to_list(), strict=True))


def measures(*texts: str) -> list[Measure]:
    return [parse_measure(text) for text in texts]


def test_graded_gain_linear_and_exponential() -> None:
    run = make_run([("q", "b", 0.9), ("q", "a", 0.8), ("q", "x", 0.7)])
    qrels = make_qrels([("q", "a", 3), ("q", "b", 1), ("q", "c", 2)])
    linear = evaluate_run(run, qrels, measures("nDCG@3"))
    # linear gains b=1, a=3, x=0: DCG = 1 + 3/log2(3) = 2.89279
    # ideal a, c, b = 3, 2, 1: IDCG = 3 + 2/log2(3) + 1/2 = 4.76186 -> nDCG = 0.60749
    assert values(linear, "q")["nDCG@3"] == pytest.approx(
        (1 + 3 / LOG2_3) / (3 + 2 / LOG2_3 + 0.5)
    )
    exponential = evaluate_run(
        run, qrels, measures("nDCG@3"), MetricConventions(gain="exponential")
    )
    # exponential gains 2^g - 1: b=1, a=7, c=3: DCG = 1 + 7/log2(3) = 5.41651
    # IDCG = 7 + 3/log2(3) + 1/2 = 9.39279 -> nDCG = 0.57667
    assert values(exponential, "q")["nDCG@3"] == pytest.approx(
        (1 + 7 / LOG2_3) / (7 + 3 / LOG2_3 + 0.5)
    )
    assert exponential.conventions.gain == "exponential"


def test_unjudged_documents_count_as_non_relevant() -> None:
    run = make_run([("q", "unjudged", 0.9), ("q", "a", 0.8)])
    qrels = make_qrels([("q", "a", 1), ("q", "zero", 0)])
    result = values(evaluate_run(run, qrels, measures("P@2", "MRR@2", "nDCG@2", "Hit@1")), "q")
    # rank 1 unjudged (gain 0, not relevant), rank 2 relevant:
    # P@2 = 1/2; MRR@2 = 1/2; nDCG@2 = (1/log2(3)) / 1 = 0.63093; Hit@1 = 0
    assert result == pytest.approx({"P@2": 0.5, "MRR@2": 0.5, "nDCG@2": 1 / LOG2_3, "Hit@1": 0.0})


def test_queries_without_positive_qrels_are_excluded_and_listed() -> None:
    run = make_run([("q1", "a", 0.9), ("q2", "a", 0.9), ("q3", "a", 0.9)])
    qrels = make_qrels([("q1", "a", 1), ("q2", "a", 0), ("q2", "b", -1)])
    # q2 has only non-positive grades, q3 has no qrels at all, q4 was never retrieved either
    result = evaluate_run(run, qrels, measures("P@1"), query_ids=["q4", "q3", "q2", "q1"])
    assert result.evaluated_query_ids == ["q1"]
    assert result.excluded_query_ids == ["q2", "q3", "q4"]
    assert result.per_query["query_id"].to_list() == ["q1"]
    # by default the queries are those of the qrels: q2 is excluded, q3's run rows are ignored
    default = evaluate_run(run, qrels, measures("P@1"))
    assert (default.evaluated_query_ids, default.excluded_query_ids) == (["q1"], ["q2"])


def test_queries_with_positives_but_nothing_retrieved_score_zero() -> None:
    run = make_run([("q1", "a", 0.9)])
    qrels = make_qrels([("q1", "a", 1), ("q2", "a", 2), ("q2", "b", 1)])
    every_measure = measures(
        "Recall@10", "Hit@10", "MRR@10", "MAP@10", "nDCG@10", "P@10", "RPrec"
    )
    result = evaluate_run(run, qrels, every_measure)
    assert result.evaluated_query_ids == ["q1", "q2"]
    # q2 has R = 2 but an empty ranking: 0 on every measure (not excluded, not NaN)
    assert values(result, "q2") == {str(m): 0.0 for m in every_measure}


@pytest.mark.parametrize(
    ("ties", "expected"),
    [
        # rank column: b=1, a=2, c=3; scores tie between a and b, c outranks both.
        ("doc_id", {"P@2": 0.5, "MRR@3": 0.5, "Hit@2": 1.0, "Hit@1": 0.0}),  # c, a, b
        ("trec_eval", {"P@2": 0.0, "MRR@3": 1 / 3, "Hit@2": 0.0, "Hit@1": 0.0}),  # c, b, a
        # a is at rank 2 or 3 with probability 1/2 each.
        ("expected", {"P@2": 0.25, "MRR@3": (1 / 2 + 1 / 3) / 2, "Hit@2": 0.5, "Hit@1": 0.0}),
    ],
)
def test_score_ties_follow_the_rule_whatever_the_rank_column_says(ties: str, expected: dict) -> None:
    run = make_run([("q", "b", 0.5), ("q", "a", 0.5), ("q", "c", 0.9)])
    qrels = make_qrels([("q", "a", 1)])
    result = evaluate_run(run, qrels, measures("P@2", "MRR@3", "Hit@2", "Hit@1"), MetricConventions(ties=ties))
    assert values(result, "q") == pytest.approx(expected, abs=1e-15)
    # The tie group {a, b} holds ranks 2 and 3: it straddles k = 2 (not 1 or 3).
    assert result.tied_queries == {"q": 1}


def test_expected_values_over_a_tie_group_by_hand() -> None:
    # Five documents, all tied; two relevant (grades 2 and 1) and one judged non-relevant.
    run = make_run([("q", d, 1.0) for d in "abcde"])
    qrels = make_qrels([("q", "a", 2), ("q", "b", 1), ("q", "c", 0)])
    result = values(
        evaluate_run(
            run, qrels,
            measures("P@2", "Recall@2", "Hit@2", "MRR@5", "MAP@2", "nDCG@2", "CompleteEvidence@3", "Judged@2"),
        ),
        "q",
    )
    discount = 1 + 1 / LOG2_3
    assert result == pytest.approx(
        {
            "P@2": 2 / 5,  # each rank holds a relevant document with probability 2/5
            "Recall@2": 2 / 5,  # 0.8 expected relevant documents of R = 2
            "Hit@2": 1 - (3 / 5) * (2 / 4),  # 1 - P(neither of the first two is relevant)
            # first relevant at rank 1..4 with probability 2/5, 3/10, 1/5, 1/10
            "MRR@5": 2 / 5 + 3 / 10 / 2 + 1 / 5 / 3 + 1 / 10 / 4,
            # E[rel_1 * 1] = 2/5; E[rel_2 * (rel_1 + rel_2)] = 2/5 + 1 * (2 * 1)/(5 * 4)
            "MAP@2": (2 / 5 + (2 / 5 + 1 / 10) / 2) / 2,
            "nDCG@2": (3 / 5) * discount / (2 + 1 / LOG2_3),  # expected gain 3/5 at each rank
            "CompleteEvidence@3": 3 / 10,  # C(3, 2) / C(5, 2)
            "Judged@2": 3 / 5,
        },
        abs=1e-12,
    )


def test_aliases_are_computed_once_and_reported() -> None:
    run = make_run([("q1", "a", 0.9), ("q1", "x", 0.8), ("q2", "y", 0.9), ("q2", "b", 0.8)])
    qrels = make_qrels([("q1", "a", 1), ("q2", "b", 1)])
    every = measures("Recall@1", "Hit@1", "MRR@1", "MAP@1", "nDCG@1", "P@1", "Recall@2", "Hit@2", "MAP@2", "MRR@2",
                     "RPrec", "MRR", "P@2", "Judged@2")
    result = evaluate_run(run, qrels, every)
    # Binary grades, one relevant document per query, two documents retrieved per query.
    assert result.aliases == {
        "Hit@1": "Recall@1", "MRR@1": "Recall@1", "MAP@1": "Recall@1", "nDCG@1": "Recall@1", "P@1": "Recall@1",
        "RPrec": "Recall@1", "Hit@2": "Recall@2", "MRR@2": "MAP@2", "MRR": "MAP@2", "Judged@2": "P@2",
    }
    for alias, canonical in result.aliases.items():
        assert values(result, "q2")[alias] == values(result, "q2")[canonical]
    # Graded (q1 has grades 2 and 1), two relevant documents for q1, a judged non-relevant one
    # for q2: only the rules that hold for every ranking remain, plus the uncut MRR at the
    # run's depth of 2.
    graded = evaluate_run(run, make_qrels([("q1", "a", 2), ("q1", "x", 1), ("q2", "b", 1), ("q2", "y", 0)]), every)
    assert graded.aliases == {"MRR@1": "Hit@1", "P@1": "Hit@1", "MAP@1": "Recall@1", "MRR": "MRR@2"}


def test_depth_shorter_than_k() -> None:
    run = make_run([("q", "a", 0.9), ("q", "x", 0.8)])
    qrels = make_qrels([("q", "a", 1), ("q", "b", 1), ("q", "c", 1)])
    result = values(
        evaluate_run(run, qrels, measures("P@5", "Recall@5", "nDCG@5", "MAP@5", "RPrec")), "q"
    )
    assert result == pytest.approx(
        {
            "P@5": 1 / 5,  # 1 relevant retrieved, divided by k = 5 although only 2 retrieved
            "Recall@5": 1 / 3,  # 1 of R = 3
            # DCG@5 = 1; IDCG@5 over the 3 judged docs: 1 + 1/log2(3) + 1/2 = 2.13093 -> 0.46928
            "nDCG@5": 1 / (1 + 1 / LOG2_3 + 0.5),
            "MAP@5": 1 / 3,  # precision 1 at rank 1, divided by all R = 3
            "RPrec": 1 / 3,  # top R = 3 ranks hold a, x and nothing: 1/3
        }
    )


def test_self_hits_are_dropped_only_when_the_conventions_say_so() -> None:
    run = make_run([("q1", "q1", 0.9), ("q1", "a", 0.8), ("q1", "b", 0.7)])
    qrels = make_qrels([("q1", "a", 1)])
    kept = values(evaluate_run(run, qrels, measures("P@1", "MRR@3", "P@2")), "q1")
    # q1 itself holds rank 1: P@1 = 0, MRR@3 = 1/2, P@2 = 1/2
    assert kept == {"P@1": 0.0, "MRR@3": 0.5, "P@2": 0.5}
    dropped = evaluate_run(
        run, qrels, measures("P@1", "MRR@3", "P@2"), MetricConventions(drop_self_hits=True)
    )
    # ranking becomes a, b: P@1 = 1, MRR@3 = 1, P@2 = 1/2
    assert values(dropped, "q1") == {"P@1": 1.0, "MRR@3": 1.0, "P@2": 0.5}
    assert dropped.conventions.as_dict()["drop_self_hits"] is True


def test_relevance_threshold_above_one() -> None:
    run = make_run([("q", "a", 0.9), ("q", "b", 0.8), ("q", "c", 0.7), ("low", "a", 0.9)])
    qrels = make_qrels([("q", "a", 1), ("q", "b", 2), ("q", "c", 3), ("low", "a", 1)])
    result = evaluate_run(
        run,
        qrels,
        measures("P@1", "MRR@3", "Recall@2", "MAP@3", "RPrec", "nDCG@3"),
        MetricConventions(relevance_threshold=2),
    )
    # "low" has only a grade-1 qrel: no positive under threshold 2, so it is excluded
    assert result.excluded_query_ids == ["low"]
    # relevant = grade >= 2 = {b, c}, R = 2; ranking a, b, c
    assert values(result, "q") == pytest.approx(
        {
            "P@1": 0.0,  # a has grade 1
            "MRR@3": 0.5,  # first relevant at rank 2
            "Recall@2": 0.5,  # b of {b, c}
            "MAP@3": (1 / 2 + 2 / 3) / 2,  # precisions 1/2 at rank 2, 2/3 at rank 3 -> 0.58333
            "RPrec": 0.5,  # top 2 = a, b
            # nDCG gains stay graded: DCG = 1 + 2/log2(3) + 3/2 = 3.76186,
            # IDCG = 3 + 2/log2(3) + 1/2 = 4.76186 -> 0.79000
            "nDCG@3": (1 + 2 / LOG2_3 + 1.5) / (3 + 2 / LOG2_3 + 0.5),
        }
    )


def test_negative_grades_are_non_relevant_with_zero_gain() -> None:
    run = make_run([("q", "a", 0.9), ("q", "b", 0.8), ("neg", "a", 0.9)])
    qrels = make_qrels([("q", "a", -1), ("q", "b", 2), ("neg", "a", -2)])
    for gain, b_gain in (("linear", 2), ("exponential", 3)):
        result = evaluate_run(
            run, qrels, measures("P@1", "nDCG@2"), MetricConventions(gain=gain)
        )
        assert result.excluded_query_ids == ["neg"]  # only a negative grade
        # a (grade -1) has gain 0, not -1 (linear) or 2^-1 - 1 = -0.5 (exponential):
        # nDCG@2 = (b_gain/log2(3)) / b_gain = 0.63093; P@1 = 0
        assert values(result, "q") == pytest.approx(
            {"P@1": 0.0, "nDCG@2": (b_gain / LOG2_3) / b_gain}
        )


def test_map_divides_by_all_relevant_not_min_k_r() -> None:
    run = make_run([("q", "a", 0.9)])
    qrels = make_qrels([("q", "a", 1), ("q", "b", 1), ("q", "c", 1)])
    # AP@1 = precision 1 at rank 1 / R = 3 (not / min(1, 3) = 1)
    assert values(evaluate_run(run, qrels, measures("MAP@1")), "q") == pytest.approx(
        {"MAP@1": 1 / 3}
    )


def test_result_table_shape_order_and_conventions() -> None:
    run = make_run([("q2", "a", 0.9), ("q1", "a", 0.9)])
    qrels = make_qrels([("q2", "a", 1), ("q1", "b", 1)])
    conventions = MetricConventions(relevance_threshold=1)
    result = evaluate_run(
        run, qrels, measures("P@1", "nDCG@10", "MAP@5", "P@1"), conventions
    )
    assert result.per_query.schema == pl.Schema(
        {"query_id": pl.String, "metric": pl.String, "value": pl.Float64}
    )
    # one row per query and distinct measure, sorted by query_id then metric
    assert result.per_query.rows() == [
        ("q1", "MAP@5", 0.0),
        ("q1", "P@1", 0.0),
        ("q1", "nDCG@10", 0.0),
        ("q2", "MAP@5", 1.0),
        ("q2", "P@1", 1.0),
        ("q2", "nDCG@10", 1.0),
    ]
    assert result.conventions == conventions


def test_no_evaluated_queries_gives_an_empty_table() -> None:
    result = evaluate_run(make_run([]), make_qrels([("q", "a", 0)]), measures("P@1", "RPrec"))
    assert result.per_query.height == 0
    assert result.per_query.columns == ["query_id", "metric", "value"]
    assert result.excluded_query_ids == ["q"]


@pytest.mark.parametrize(
    ("run", "qrels", "message"),
    [
        (make_run([]).drop("score"), make_qrels([]), "run has no column 'score'"),
        (
            make_run([]),
            make_qrels([]).with_columns(pl.col("relevance").cast(pl.Float64)),
            "qrels.relevance has dtype Float64, expected integer",
        ),
        (
            make_run([("q", "a", 0.5), ("q", "a", 0.4)]),
            make_qrels([("q", "a", 1)]),
            "run has 2 rows sharing a \\(query_id, doc_id\\) pair.*'q'.*'a'",
        ),
        (
            make_run([("q", "a", float("nan"))]),
            make_qrels([("q", "a", 1)]),
            "run.score has 1 NaN values",
        ),
        (
            make_run([("q", "a", 0.5)]).with_columns(pl.lit(None, pl.String).alias("doc_id")),
            make_qrels([("q", "a", 1)]),
            "run.doc_id has 1 null values",
        ),
    ],
)
def test_malformed_inputs_raise_clear_errors(
    run: pl.DataFrame, qrels: pl.DataFrame, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate_run(run, qrels, measures("P@1"))


def test_duplicate_query_ids_raise() -> None:
    with pytest.raises(ValueError, match="query_ids has duplicates"):
        evaluate_run(make_run([]), make_qrels([]), measures("P@1"), query_ids=["q", "q"])


def test_measures_given_as_strings_raise() -> None:
    with pytest.raises(TypeError, match="'P@1'.*parse_measure"):
        evaluate_run(make_run([]), make_qrels([]), ["P@1"])  # type: ignore[list-item]


def test_tie_aware_values_never_pass_one_by_rounding():
    # 11 documents tied, 7 relevant: the expected relevance per rank is 7/11, and eleven of them
    # sum to 1 + 2e-16 in floating point; a measure in [0, 1] must stay there (paired tests refuse
    # values outside it).
    run = make_run([("q", f"d{i}", 1.0) for i in range(11)])
    qrels = pl.DataFrame({"query_id": ["q"] * 7, "doc_id": [f"d{i}" for i in range(7)], "relevance": [1] * 7})
    evaluation = evaluate_run(run, qrels, [parse_measure("Recall@11")], MetricConventions(ties="expected"))
    assert evaluation.per_query["value"].to_list() == [1.0]


@pytest.mark.parametrize("ties", ["expected", "trec_eval"])
def test_colliding_pair_keys_are_told_apart_on_the_ids(monkeypatch, ties: str) -> None:
    # Runs and qrels are matched on integer keys of (query, document) pairs; with every key equal
    # (the worst collision) each match is still confirmed on the ids, and a frame's duplicate
    # check falls back to the ids themselves.
    import numpy as np

    from embedpyramid.retrieval.metrics import evaluate, ranking

    run = make_run([("q1", "a", 0.9), ("q1", "b", 0.5), ("q1", "c", 0.5), ("q2", "a", 0.8), ("q2", "c", 0.1)])
    qrels = make_qrels([("q1", "b", 2), ("q1", "z", 1), ("q2", "a", 1), ("q2", "b", 3), ("q3", "a", 1)])
    wanted = measures("nDCG@3", "P@2", "MAP@3", "MRR", "Judged@2")
    conventions = MetricConventions(ties=ties)
    reference = evaluate_run(run, qrels, wanted, conventions).per_query

    def colliding(query: np.ndarray, doc_hash: np.ndarray) -> np.ndarray:
        return np.zeros(len(query), np.uint64)

    monkeypatch.setattr(ranking, "pair_keys", colliding)
    monkeypatch.setattr(evaluate, "pair_keys", colliding)
    assert evaluate_run(run, qrels, wanted, conventions).per_query.equals(reference)
    with pytest.raises(ValueError, match="run has 2 rows sharing"):
        evaluate_run(make_run([("q1", "a", 0.9), ("q1", "a", 0.5)]), qrels, wanted, conventions)
