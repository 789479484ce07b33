import polars as pl
import pytest

from embedpyramid.reports.verdict import dataset_verdicts
from embedpyramid.stats import minimum_detectable_effect, queries_needed
from embedpyramid.stats.compare import ComparisonSettings, compare_models


def per_query(offset: float, n: int = 60) -> pl.DataFrame:
    """Model b = model a + offset, +-0.1 on two thirds of the queries (clipped to [0, 1])."""
    base = [0.3 + 0.4 * ((i * 37) % 100) / 100 for i in range(n)]
    rows = [("d", "a", "exact", f"q{i:03d}", "nDCG@10", value) for i, value in enumerate(base)]
    rows += [("d", "b", "exact", f"q{i:03d}", "nDCG@10", min(1.0, max(0.0, value + offset + 0.1 * ((i % 3) - 1))))
             for i, value in enumerate(base)]
    return pl.DataFrame(rows, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")


SETTINGS = ComparisonSettings(baseline="a", n_resamples=2_000, n_permutations=5_000, report_metric="nDCG@10",
                              slice_columns=(), length_buckets=())
QUERIES = pl.DataFrame({"query_id": [f"q{i:03d}" for i in range(60)], "text": ["w"] * 60})


def test_a_clear_loser_makes_the_baseline_the_winner_with_the_sign_flipped():
    comparisons = compare_models(per_query(-0.2), QUERIES, SETTINGS)
    row = comparisons.filter(pl.col("family") == "confirmatory").row(0, named=True)
    assert row["decision"] == "worse"
    verdict, = dataset_verdicts(comparisons, pl.DataFrame(), power=0.8, detectable_delta=0.02)
    assert (verdict.winner, verdict.second, verdict.family_size) == ("a", "b", 1)
    assert verdict.delta == pytest.approx(-row["mean_delta"]) and verdict.ci_low == pytest.approx(-row["ci_high"])
    assert verdict.d_z == pytest.approx(-row["d_z"]) and verdict.p_adjusted == row["p_adjusted"]
    assert verdict.text().startswith("d · nDCG@10 over 60 queries: a wins over b (Δ = +")
    assert "p (Holm, 1 test)" in verdict.text() and "Tukey" not in verdict.text()


def test_no_detectable_difference_gives_the_planning_numbers():
    comparisons = compare_models(per_query(0.0), QUERIES, SETTINGS)
    row = comparisons.filter(pl.col("family") == "confirmatory").row(0, named=True)
    assert row["decision"] == "not significant"
    verdict, = dataset_verdicts(comparisons, pl.DataFrame(), power=0.8, detectable_delta=0.02)
    assert verdict.winner is None
    assert verdict.mde == pytest.approx(float(minimum_detectable_effect(row["sd_delta"], 60)))
    assert verdict.queries_needed == queries_needed(row["sd_delta"], 0.02)
    text = verdict.text()
    assert "no detectable difference between" in text and f"{verdict.mde:.4f} (power 0.8, α 0.05)" in text
    assert f"detecting Δ = 0.02 would take about {verdict.queries_needed:,} queries" in text
