import polars as pl
import pytest
from scipy import stats

from embedpyramid.downstream.descriptive import describe_grades, per_query_means
from embedpyramid.downstream.design import grade_design

ROWS = [("a", "q1", "rel", 1.0), ("a", "q2", "rel", 2.0), ("a", "q3", "rel", 3.0),
        ("a", "q1", "cov", 3.0), ("a", "q2", "cov", 4.0), ("a", "q3", "cov", 5.0),
        ("b", "q1", "rel", 5.0), ("b", "q2", "rel", 5.0), ("b", "q3", "rel", 5.0),
        ("b", "q1", "cov", 4.0), ("b", "q2", "cov", 4.0), ("b", "q3", "cov", 4.0)]
DESIGN = grade_design(pl.DataFrame(ROWS, schema=["model", "query_id", "criterion", "grade"], orient="row"), ["a", "b"],
                      interaction=False)


def test_mean_sd_and_t_interval_by_hand():
    table = describe_grades(DESIGN, 0.95)
    assert table.select("model", "criterion").rows() == [("a", "rel"), ("a", "cov"), ("a", "all"),
                                                         ("b", "rel"), ("b", "cov"), ("b", "all")]
    rel = table.row(0, named=True)
    half = stats.t.ppf(0.975, 2) * 1.0 / 3**0.5  # sd of (1, 2, 3) is 1
    assert (rel["n"], rel["mean"], rel["sd"], rel["median"]) == (3, 2.0, 1.0, 2.0)
    assert (rel["ci_low"], rel["ci_high"]) == pytest.approx((2 - half, 2 + half))
    # "all": per-query means over the criteria (2, 3, 4) -> mean 3, sd 1, n 3 (queries, not grades).
    every = table.row(2, named=True)
    assert (every["n"], every["mean"], every["sd"]) == (3, 3.0, 1.0)
    constant = table.row(4, named=True)
    assert constant["sd"] == 0.0 and constant["ci_low"] == constant["ci_high"] == 4.0


def test_per_query_means_follow_the_query_order():
    means = per_query_means(DESIGN)
    assert means["a"].tolist() == [2.0, 3.0, 4.0] and means["b"].tolist() == [4.5, 4.5, 4.5]
