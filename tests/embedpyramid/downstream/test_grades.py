"""L6 across partitions: comparing the judge and answer metrics, and their order among the
retrieval measures."""

import numpy as np
import polars as pl
import pytest
from simulated_grades import simulated_grades

from embedpyramid.config import AnalysisConfig
from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.downstream import analyse_grades
from embedpyramid.downstream.grades import _verdict, compare_downstream
from embedpyramid.summary.results import sort_metrics

SETTINGS = ComparisonSettings(baseline="base", n_resamples=500, n_permutations=500, seed=3, slice_columns=(),
                              length_buckets=())


def rows(model: str, metric: str, values) -> list[tuple]:
    return [("d", model, "exact", f"q{i:02d}", metric, float(v)) for i, v in enumerate(values)]


@pytest.fixture
def per_query() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    base, better = rng.integers(1, 4, 30), rng.integers(3, 6, 30)
    data = (rows("base", "judge:relevance", base) + rows("other", "judge:relevance", better)
            + rows("base", "answer:citation_precision", rng.random(30)) + rows("other", "answer:citation_precision", rng.random(30))
            # a metric only 20 queries have (e.g. gold answers): compared over its own queries
            + rows("base", "answer:contains_gold", rng.integers(0, 2, 20))
            + rows("other", "answer:contains_gold", rng.integers(0, 2, 20)))
    return pl.DataFrame(data, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")


def queries() -> pl.DataFrame:
    return pl.DataFrame({"query_id": [f"q{i:02d}" for i in range(30)], "text": ["a question"] * 30})


def test_grades_and_answer_metrics_are_compared_over_the_queries_each_covers(per_query):
    compared = compare_downstream(per_query, queries(), SETTINGS)
    table = {row["metric"]: row for row in compared.filter(pl.col("slice_column") == "all").iter_rows(named=True)}
    assert set(table) == {"judge:relevance", "answer:citation_precision", "answer:contains_gold"}
    assert table["judge:relevance"]["n"] == 30 and table["answer:contains_gold"]["n"] == 20
    # Grades 1-5 are accepted (the retrieval range [0, 1] would refuse them) and the clear gain is found.
    assert table["judge:relevance"]["mean_delta"] > 1 and table["judge:relevance"]["decision"] == "better"
    assert {row["family"] for row in table.values()} == {"exploratory"}


def test_nothing_is_compared_without_the_baseline_or_a_second_model(per_query):
    assert compare_downstream(per_query.filter(pl.col("model") == "other"), queries(), SETTINGS).is_empty()
    assert compare_downstream(per_query.filter(pl.col("model") == "base"), queries(), SETTINGS).is_empty()


def test_metrics_of_other_levels_sort_after_the_retrieval_measures_by_name():
    frame = pl.DataFrame({"metric": ["judge:relevance", "nDCG@10", "answer:token_f1", "Recall@5", "nDCG@5"]})
    assert sort_metrics(frame)["metric"].to_list() == ["nDCG@5", "nDCG@10", "Recall@5", "answer:token_f1",
                                                       "judge:relevance"]


def test_the_l6_verdict_reads_the_clustered_wald_test_not_the_likelihood_ratio():
    # No model effect, three criteria grading one answer (a shared answer effect): on this seed the
    # LRT, which assumes independent grades, rejects, and the clustered Wald test does not.
    grades = simulated_grades(14, (0.0, 0.0, 0.0), n_queries=60, query_sd=0.5, cell_sd=0.8, noise_sd=0.5)
    analysis = analyse_grades(grades, AnalysisConfig(power={"n_simulations": 100}, seed=7), dataset="toy",
                              system="exact")
    lrt, wald = (analysis.omnibus.filter(pl.col("test") == name).row(0, named=True) for name in ("likelihood ratio", "wald"))
    assert lrt["p_value"] <= 0.05 < wald["p_value"]
    text = _verdict(analysis)
    assert text.startswith("toy · exact: the answer quality does not detectably differ by model (Wald χ²(2) = "
                           f"{wald['statistic']:.1f}, p = {wald['p_value']:.2g}, α = 0.05, {wald['candidate']}, "
                           "covariance clustered on 60 queries; p from F(2, 59)")
