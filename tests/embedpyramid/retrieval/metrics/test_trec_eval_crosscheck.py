"""Every measure, per query, against trec_eval (pytrec_eval) on randomised runs and qrels, under
each tie rule; the expected values against brute-force enumeration of the tied orders."""

import itertools
import math

import numpy as np
import polars as pl
import pytest
import pytrec_eval

from embedpyramid.config import Measure, MetricConventions, default_measures
from embedpyramid.retrieval.metrics import evaluate_run, random_ranking_floor

CUTOFFS = (1, 2, 3, 5, 10, 20)
N_QUERIES = 40
N_DOCS = 60
# our name -> pytrec_eval measure family; recip_rank is handled per cutoff below
TREC_FAMILY = {"nDCG": "ndcg_cut", "P": "P", "Recall": "recall", "MAP": "map_cut", "Hit": "success"}


def random_collection(seed: int, *, distinct_scores: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Graded qrels (-1..3) and a run with score ties (unless ``distinct_scores``), unjudged
    documents, a shuffled rank column, queries without positives and queries without any
    retrieved document."""
    rng = np.random.default_rng(seed)
    qrel_rows: list[tuple[str, str, int]] = []
    run_rows: list[tuple[str, int, str, float]] = []
    for q in range(N_QUERIES):
        query_id = f"q{q:02d}"
        judged = rng.choice(N_DOCS, size=rng.integers(1, 25), replace=False)
        no_positive = q % 7 == 0
        grades = rng.integers(-1, 1 if no_positive else 4, size=judged.size)
        qrel_rows += [(query_id, f"d{d:02d}", int(g)) for d, g in zip(judged, grades, strict=True)]
        depth = 0 if q % 9 == 1 else int(rng.integers(1, 30))
        retrieved = rng.choice(N_DOCS, size=depth, replace=False)
        if distinct_scores:
            scores = rng.permutation(depth) / 8
        else:
            scores = rng.integers(0, 8, size=depth) / 8  # few distinct values: many ties
        ranks = rng.permutation(depth) + 1
        run_rows += [
            (query_id, int(r), f"d{d:02d}", float(s))
            for d, s, r in zip(retrieved, scores, ranks, strict=True)
        ]
    qrels = pl.DataFrame(
        qrel_rows, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64},
        orient="row",
    )
    run = pl.DataFrame(
        run_rows,
        schema={"query_id": pl.String, "rank": pl.Int64, "doc_id": pl.String, "score": pl.Float64},
        orient="row",
    )
    return run, qrels


def project_ranking(run: pl.DataFrame) -> dict[str, list[str]]:
    """The ``doc_id`` rule, computed independently: score descending, then doc_id ascending."""
    ranking: dict[str, list[str]] = {}
    for query_id, doc_id, _score in sorted(
        run.select("query_id", "doc_id", "score").rows(), key=lambda row: (row[0], -row[2], row[1])
    ):
        ranking.setdefault(query_id, []).append(doc_id)
    return ranking


def strictly_decreasing(ranking: dict[str, list[str]], depth: int | None = None) -> dict[str, dict[str, float]]:
    """Scores strictly decreasing with rank, so trec_eval's own tie-breaking never applies."""
    return {
        query_id: {doc_id: 1000.0 - rank for rank, doc_id in enumerate(docs[:depth])}
        for query_id, docs in ranking.items()
    }


def as_given(run: pl.DataFrame, depth: int | None = None) -> dict[str, dict[str, float]]:
    """The run with its own scores, ties included: trec_eval orders it itself. ``depth`` cuts it
    to trec_eval's top ``depth`` (score descending, doc_id descending)."""
    trec: dict[str, dict[str, float]] = {}
    ordered = sorted(run.select("query_id", "doc_id", "score").rows(), key=lambda r: (r[0], -r[2], _descending(r[1])))
    for query_id, doc_id, score in ordered:
        docs = trec.setdefault(query_id, {})
        if depth is None or len(docs) < depth:
            docs[doc_id] = score
    return trec


def _descending(text: str) -> tuple[int, ...]:
    return tuple(-ord(character) for character in text) + (0,)


def trec_eval_values(
    qrels: pl.DataFrame, relevance_level: int, run_at_depth
) -> dict[str, dict[str, float]]:
    """trec_eval per query, keyed by our canonical measure names; ``run_at_depth(depth)`` gives
    the trec run (whole when depth is None)."""
    trec_qrels: dict[str, dict[str, int]] = {}
    for query_id, doc_id, relevance in qrels.rows():
        trec_qrels.setdefault(query_id, {})[doc_id] = relevance
    cutoff_list = ",".join(map(str, CUTOFFS))
    evaluator = pytrec_eval.RelevanceEvaluator(
        trec_qrels,
        {f"{family}.{cutoff_list}" for family in TREC_FAMILY.values()} | {"Rprec", "recip_rank"},
        relevance_level=relevance_level,
    )
    expected: dict[str, dict[str, float]] = {}
    for query_id, trec in evaluator.evaluate(run_at_depth(None)).items():
        row = expected.setdefault(query_id, {"RPrec": trec["Rprec"], "MRR": trec["recip_rank"]})
        for name, family in TREC_FAMILY.items():
            row |= {f"{name}@{k}": trec[f"{family}_{k}"] for k in CUTOFFS}
        # CompleteEvidence@k is recall_k = 1 as an indicator.
        row |= {f"CompleteEvidence@{k}": float(trec[f"recall_{k}"] == 1.0) for k in CUTOFFS}
    reciprocal = pytrec_eval.RelevanceEvaluator(
        trec_qrels, {"recip_rank"}, relevance_level=relevance_level
    )
    for k in CUTOFFS:
        for query_id, trec in reciprocal.evaluate(run_at_depth(k)).items():
            expected[query_id][f"MRR@{k}"] = trec["recip_rank"]
    return expected


def per_query_values(result) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for query_id, metric, value in result.per_query.rows():
        table.setdefault(query_id, {})[metric] = value
    return table


def assert_matches_trec_eval(result, expected, *, skip=("Judged",)) -> None:
    ours = per_query_values(result)
    for query_id in result.evaluated_query_ids:
        # trec_eval skips queries absent from the run; the project scores them 0
        theirs = expected.get(query_id, dict.fromkeys(ours[query_id], 0.0))
        for metric, value in ours[query_id].items():
            if metric.split("@")[0] in skip:
                continue
            assert value == pytest.approx(theirs[metric], abs=1e-9, rel=0), (query_id, metric)


def test_pytrec_eval_accepts_non_default_cutoffs() -> None:
    evaluator = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"ndcg_cut.1,2,3", "map_cut.2"})
    assert set(evaluator.evaluate({"q": {"a": 1.0}})["q"]) == {
        "ndcg_cut_1", "ndcg_cut_2", "ndcg_cut_3", "map_cut_2",
    }  # fmt: skip


@pytest.mark.parametrize("relevance_threshold", [1, 2])
@pytest.mark.parametrize("seed", range(5))
def test_trec_eval_rule_matches_trec_eval_on_runs_with_ties(seed: int, relevance_threshold: int) -> None:
    run, qrels = random_collection(seed)
    assert run.select("query_id", "score").is_duplicated().any()  # score ties
    measures = default_measures(CUTOFFS)
    conventions = MetricConventions(relevance_threshold=relevance_threshold, ties="trec_eval")
    result = evaluate_run(run, qrels, measures, conventions)
    expected = trec_eval_values(qrels, relevance_threshold, lambda depth: as_given(run, depth))

    with_positive = set(qrels.filter(pl.col("relevance") >= relevance_threshold)["query_id"].to_list())
    assert result.evaluated_query_ids == sorted(with_positive)
    assert set(result.excluded_query_ids) == set(qrels["query_id"].to_list()) - with_positive
    not_retrieved = sorted(with_positive - set(run["query_id"].to_list()))
    unjudged = run.join(qrels, on=["query_id", "doc_id"], how="anti")
    # the random collection exercises every edge the conventions name
    assert result.excluded_query_ids and not_retrieved and unjudged.height
    assert (qrels["relevance"] < 0).any()  # negative grades, judged non-relevant as in trec_eval
    assert_matches_trec_eval(result, expected)
    assert not_retrieved[0] not in expected
    assert result.tied_queries  # the ties that decide these numbers are counted


@pytest.mark.parametrize("seed", range(3))
def test_doc_id_rule_matches_trec_eval_fed_the_projects_own_order(seed: int) -> None:
    run, qrels = random_collection(seed)
    result = evaluate_run(run, qrels, default_measures(CUTOFFS), MetricConventions(ties="doc_id"))
    ranking = project_ranking(run)
    expected = trec_eval_values(qrels, 1, lambda depth: strictly_decreasing(ranking, depth))
    assert_matches_trec_eval(result, expected)


@pytest.mark.parametrize("seed", range(3))
def test_without_ties_all_three_rules_match_trec_eval(seed: int) -> None:
    run, qrels = random_collection(seed, distinct_scores=True)
    assert not run.select("query_id", "score").is_duplicated().any()
    expected = trec_eval_values(qrels, 1, lambda depth: as_given(run, depth))
    results = [evaluate_run(run, qrels, default_measures(CUTOFFS), MetricConventions(ties=rule))
               for rule in ("expected", "trec_eval", "doc_id")]
    for result in results:
        assert_matches_trec_eval(result, expected)
        assert result.tied_queries == {}


def test_a_tie_at_the_cutoff_gives_trec_eval_its_number() -> None:
    # The constructed case: the relevant document r is tied with m across k = 3.
    run = pl.DataFrame({"query_id": ["q"] * 4, "doc_id": ["a", "b", "m", "r"], "score": [0.9, 0.8, 0.5, 0.5]})
    qrels = pl.DataFrame({"query_id": ["q"], "doc_id": ["r"], "relevance": [1]})
    p3 = {rule: evaluate_run(run, qrels, [Measure("P", 3)], MetricConventions(ties=rule)).per_query["value"][0]
          for rule in ("trec_eval", "doc_id", "expected")}
    theirs = pytrec_eval.RelevanceEvaluator({"q": {"r": 1}}, {"P.3"}).evaluate(
        {"q": dict(zip(run["doc_id"], run["score"], strict=True))})["q"]["P_3"]
    assert p3["trec_eval"] == pytest.approx(theirs) == pytest.approx(1 / 3)  # doc_id descending: r, m
    assert p3["doc_id"] == 0.0  # doc_id ascending: m, r
    assert p3["expected"] == pytest.approx(1 / 6)  # r at rank 3 or 4, half the time each


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_negative_grades_are_treated_as_trec_eval_treats_them(gain: str) -> None:
    # Grade -1 on retrieved documents at the top: trec_eval gives them gain 0 and counts them as
    # judged non-relevant; so does the project (nDCG@10 and MAP@100, per query).
    run, qrels = random_collection(21, distinct_scores=True)
    negative = qrels.with_columns(pl.when(pl.col("relevance") == 0).then(-1).otherwise(pl.col("relevance"))
                                  .alias("relevance"))
    assert (negative["relevance"] == -1).sum() > 20
    measures = [Measure("nDCG", 10), Measure("MAP", 20)]
    result = evaluate_run(run, negative, measures, MetricConventions(gain=gain))
    remapped = negative.with_columns(
        pl.when(pl.col("relevance") > 0).then(2 ** pl.col("relevance").clip(lower_bound=0) - 1).otherwise(pl.col("relevance"))
        .cast(pl.Int64).alias("relevance")) if gain == "exponential" else negative
    expected = trec_eval_values(remapped, 1, lambda depth: as_given(run, depth))
    assert_matches_trec_eval(result, expected)


def test_exponential_gain_matches_trec_eval_with_remapped_grades() -> None:
    # trec_eval's nDCG gain is the grade itself: feeding it grades 2^g - 1 (g = 0..3 -> 0, 1, 3,
    # 7) gives the exponential-gain nDCG of the original grades.
    run, qrels = random_collection(11)
    ndcg = [Measure("nDCG", k) for k in CUTOFFS]
    result = evaluate_run(run, qrels, ndcg, MetricConventions(gain="exponential", ties="trec_eval"))
    remapped = qrels.with_columns(
        pl.when(pl.col("relevance") > 0)
        .then(2 ** pl.col("relevance").clip(lower_bound=0) - 1)
        .otherwise(0)
        .cast(pl.Int64)
        .alias("relevance")
    )
    expected = trec_eval_values(remapped, 1, lambda depth: as_given(run, depth))
    assert_matches_trec_eval(result, expected)


def mean_over_orders(orders: list[list[str]], qrels: pl.DataFrame, measures) -> dict[str, float]:
    """Each order scored under a fixed rule, as one query each in a single evaluate_run call; the
    mean per metric. ``qrels`` holds one query."""
    names = [f"order{i}" for i in range(len(orders))]
    run = pl.DataFrame({
        "query_id": [name for name, docs in zip(names, orders, strict=True) for _ in docs],
        "doc_id": [doc for docs in orders for doc in docs],
        "score": [float(len(docs) - i) for docs in orders for i in range(len(docs))],
    })
    copies = pl.concat([qrels.with_columns(pl.lit(name).alias("query_id")) for name in names])
    scored = evaluate_run(run, copies, measures, MetricConventions(ties="doc_id")).per_query
    return dict(scored.group_by("metric").agg(pl.col("value").mean()).rows())


def tied_orders(run: pl.DataFrame) -> list[list[str]]:
    """Every order of every tie group of a one-query run."""
    groups = [list(g["doc_id"]) for g in run.sort("score", descending=True).partition_by("score", maintain_order=True)]
    return [
        [doc for group in choice for doc in group]
        for choice in itertools.product(*(itertools.permutations(group) for group in groups))
    ]


@pytest.mark.parametrize("seed", range(6))
def test_expected_rule_is_the_mean_over_every_order_of_the_tied_documents(seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(8)]
    run = pl.DataFrame({"query_id": ["q"] * 8, "doc_id": docs, "score": rng.integers(0, 3, size=8) / 2.0})
    grades = rng.integers(-1, 3, size=10)
    qrels = pl.DataFrame({"query_id": ["q"] * 10, "doc_id": [f"d{i}" for i in range(10)], "relevance": grades})
    if not (grades >= 1).any():
        qrels = qrels.with_columns(pl.lit(2).alias("relevance"))
    measures = default_measures((1, 2, 3, 5, 7))
    expected_rule = per_query_values(evaluate_run(run, qrels, measures))["q"]
    orders = tied_orders(run)
    assert len(orders) > 1
    means = mean_over_orders(orders, qrels, measures)
    for metric, value in expected_rule.items():
        assert value == pytest.approx(means[metric], abs=1e-12), metric


@pytest.mark.parametrize("seed", range(3))
def test_renaming_documents_leaves_expected_values_unchanged(seed: int) -> None:
    run, qrels = random_collection(seed)
    rename = {f"d{d:02d}": f"doc-{(37 * d + 11) % N_DOCS:02d}" for d in range(N_DOCS)}
    renamed_run = run.with_columns(pl.col("doc_id").replace_strict(rename))
    renamed_qrels = qrels.with_columns(pl.col("doc_id").replace_strict(rename))
    measures = default_measures(CUTOFFS)
    before = evaluate_run(run, qrels, measures).per_query
    after = evaluate_run(renamed_run, renamed_qrels, measures).per_query
    np.testing.assert_allclose(after["value"], before["value"], rtol=0, atol=1e-12)
    # trec_eval's and the doc_id rules move with the names.
    moved = [evaluate_run(r, q, measures, MetricConventions(ties="trec_eval")).per_query["value"]
             for r, q in ((run, qrels), (renamed_run, renamed_qrels))]
    assert not np.allclose(moved[0], moved[1])


def test_a_constant_scorer_scores_the_random_ranking_floor() -> None:
    # A constant scorer over the whole corpus is one tie group: its expected values are the
    # floor, and both equal the mean over all 5! orders of the corpus.
    corpus = ["a", "b", "c", "d", "e"]
    qrels = pl.DataFrame({"query_id": ["q1", "q1", "q1", "q2"], "doc_id": ["a", "c", "e", "b"],
                          "relevance": [2, 1, -1, 1]})
    constant = pl.DataFrame({"query_id": ["q1"] * 5 + ["q2"] * 5, "doc_id": corpus * 2, "score": [0.5] * 10})
    measures = default_measures((1, 2, 3))
    floor = per_query_values(random_ranking_floor(qrels, corpus, measures, depth=5))
    scored = per_query_values(evaluate_run(constant, qrels, measures))
    for query_id in ("q1", "q2"):
        means = mean_over_orders([list(o) for o in itertools.permutations(corpus)],
                                 qrels.filter(pl.col("query_id") == query_id), measures)
        for metric in floor[query_id]:
            assert floor[query_id][metric] == pytest.approx(means[metric], abs=1e-12), (query_id, metric)
            assert scored[query_id][metric] == pytest.approx(means[metric], abs=1e-12), (query_id, metric)
    # Closed forms: P@k = R / N, Hit@1 = R / N, Judged@3 = J / N.
    assert floor["q1"]["P@3"] == pytest.approx(2 / 5) and floor["q2"]["Hit@1"] == pytest.approx(1 / 5)
    assert floor["q1"]["Judged@3"] == pytest.approx(3 / 5)


def test_floor_cut_at_the_run_depth_and_without_self_hits() -> None:
    corpus = [f"d{i}" for i in range(100)] + ["q1"]
    qrels = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "q1"], "relevance": [1, 1]})
    floor = random_ranking_floor(qrels, corpus, [Measure("Hit", 10), Measure("MRR")],
                                 MetricConventions(drop_self_hits=True), depth=10)
    values = per_query_values(floor)["q1"]
    # 100 candidates (the query itself dropped), R = 2 of which only d1 can be retrieved.
    assert values["Hit@10"] == pytest.approx(1 - math.comb(99, 10) / math.comb(100, 10))
    assert values["MRR"] == pytest.approx(sum(1 / 100 / i for i in range(1, 11)))  # cut at depth 10
