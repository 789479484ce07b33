import numpy as np
import polars as pl
import pytest

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats import minimum_detectable_effect, queries_needed
from embedpyramid.stats.comparisons import compare_models
from embedpyramid.stats.hsd_tables import tukey_hsd_tables
from embedpyramid.stats.verdict import dataset_verdicts


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


def confirmatory_row(model_b: str, mean_delta: float, decision: str, p_adjusted: float) -> dict:
    return {"dataset": "d", "system": "exact", "metric": "nDCG@10", "model_a": "A", "model_b": model_b, "n": 50,
            "mean_delta": mean_delta, "sd_delta": 0.1, "d_z": mean_delta / 0.1, "ci_low": mean_delta - 0.02,
            "ci_high": mean_delta + 0.02, "p_adjusted": p_adjusted, "family_size": 2, "confidence": 0.95,
            "decision": decision, "family": "confirmatory"}


def hsd_model(model: str, mean: float, letters: str, rank_low: int, rank_high: int) -> dict:
    return {"dataset": "d", "system": "exact", "metric": "nDCG@10", "model": model, "n": 50, "mean": mean,
            "letters": letters, "rank_low": rank_low, "rank_high": rank_high, "confidence": 0.95}


def hsd_pair(model_a: str, model_b: str, mean_delta: float, p_value: float) -> dict:
    return {"dataset": "d", "system": "exact", "metric": "nDCG@10", "model_a": model_a, "model_b": model_b,
            "mean_delta": mean_delta, "sd_delta": 0.08, "d_z": mean_delta / 0.08, "ci_low": mean_delta - 0.03,
            "ci_high": mean_delta + 0.03, "p_value": p_value, "significant": p_value <= 0.05}


# B and C both beat the baseline A (Holm p 0.0002), but the HSD cannot tell B from C (p 0.306)
# and ranks both 1–2: the issue's case.
BCA = pl.DataFrame([confirmatory_row("B", 0.10, "better", 0.0002), confirmatory_row("C", 0.09, "better", 0.0002)])
BCA_MODELS = pl.DataFrame([hsd_model("B", 0.60, "a", 1, 2), hsd_model("C", 0.59, "a", 1, 2),
                           hsd_model("A", 0.50, "b", 3, 3)])
BCA_PAIRS = pl.DataFrame([hsd_pair("A", "B", 0.10, 0.0001), hsd_pair("A", "C", 0.09, 0.0001),
                          hsd_pair("B", "C", -0.01, 0.306)])


def test_two_models_that_both_beat_the_baseline_but_not_each_other_are_a_top_group_not_a_winner():
    verdict, = dataset_verdicts(BCA, BCA_MODELS, power=0.8, detectable_delta=0.02, hsd_pairs=BCA_PAIRS)
    assert verdict.winner is None and verdict.top_group == ("B", "C")
    # The margin is over the closest contender C (the B–C pair, sign flipped), not over the baseline.
    assert (verdict.first, verdict.second) == ("B", "C")
    assert verdict.delta == pytest.approx(0.01) and (verdict.ci_low, verdict.ci_high) == pytest.approx((-0.02, 0.04))
    assert verdict.d_z == pytest.approx(0.01 / 0.08) and verdict.p_adjusted == 0.306
    assert (verdict.adjustment, verdict.family_size, verdict.interval) == ("tukey-hsd", 3, "simultaneous")
    assert verdict.mde == pytest.approx(float(minimum_detectable_effect(0.08, 50, alpha=0.05 / 3)))
    text = verdict.text()
    assert text.startswith("d · nDCG@10 over 50 queries: top group B and C: not distinguishable (B over the closest "
                           "contender C: Δ = +0.0100, simultaneous 95% CI [-0.0200, +0.0400], "
                           "p (Tukey HSD, 3 pairs) = 0.3060, d_z = +0.12)")
    assert "wins" not in text and "Better than the baseline A (Holm, confirmatory family): B and C." in text
    assert text.endswith("Tukey HSD groups: a: B, C; b: A.")


def test_a_model_ranked_first_alone_by_the_hsd_wins_by_its_margin_over_the_runner_up():
    models = BCA_MODELS.with_columns(
        rank_high=pl.Series([1, 2, 3]), rank_low=pl.Series([1, 2, 3]), letters=pl.Series(["a", "b", "c"]))
    pairs = BCA_PAIRS.with_columns(p_value=pl.Series([0.0001, 0.0001, 0.004]))
    verdict, = dataset_verdicts(BCA, models, power=0.8, detectable_delta=0.02, hsd_pairs=pairs)
    assert (verdict.winner, verdict.second, verdict.top_group) == ("B", "C", ("B",))
    assert verdict.delta == pytest.approx(0.01) and verdict.p_adjusted == 0.004
    assert verdict.text().startswith("d · nDCG@10 over 50 queries: B wins, better than every other model (Tukey HSD, "
                                     "all pairs at once); over the closest contender C: Δ = +0.0100, simultaneous")


def test_the_baseline_can_win_and_three_models_without_hsd_tables_are_refused():
    worse = pl.DataFrame([confirmatory_row("B", -0.10, "worse", 0.001), confirmatory_row("C", -0.2, "worse", 0.001)])
    models = pl.DataFrame([hsd_model("A", 0.6, "a", 1, 1), hsd_model("B", 0.5, "b", 2, 2), hsd_model("C", 0.4, "c", 3, 3)])
    pairs = pl.DataFrame([hsd_pair("A", "B", -0.1, 0.001), hsd_pair("A", "C", -0.2, 0.0001),
                          hsd_pair("B", "C", -0.1, 0.001)])
    verdict, = dataset_verdicts(worse, models, power=0.8, detectable_delta=0.02, hsd_pairs=pairs)
    assert (verdict.winner, verdict.second, verdict.delta) == ("A", "B", pytest.approx(0.1))
    assert "Better than the baseline" not in verdict.text()
    with pytest.raises(ValueError, match="3 models need the Tukey HSD"):
        dataset_verdicts(BCA, pl.DataFrame(), power=0.8, detectable_delta=0.02)


def test_the_issues_case_computed_end_to_end_gives_a_top_group_on_every_system():
    """B and C both far above the baseline A, B and C equal on average: through compare_models
    and the randomized HSD (two systems, one Holm family of four tests), neither B nor C wins."""
    rng = np.random.default_rng(3)
    n, rows = 60, []
    for system in ("knn", "probe"):
        base = rng.uniform(0.2, 0.6, n)
        shared = base + 0.25 + rng.normal(0, 0.05, n)
        for model, values in (("A", base), ("B", shared + rng.normal(0, 0.05, n)), ("C", shared + rng.normal(0, 0.05, n))):
            rows += [("d", model, system, f"q{i:03d}", "nDCG@10", float(np.clip(v, 0, 1))) for i, v in enumerate(values)]
    per_query = pl.DataFrame(rows, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")
    queries = pl.DataFrame({"query_id": [f"q{i:03d}" for i in range(n)], "text": ["w"] * n})
    settings = ComparisonSettings(baseline="A", n_resamples=1_000, n_permutations=2_000, report_metric="nDCG@10",
                                  slice_columns=(), length_buckets=())
    comparisons = compare_models(per_query, queries, settings)
    hsd, pairs = tukey_hsd_tables(per_query, queries, settings, "nDCG@10")
    verdicts = dataset_verdicts(comparisons, hsd, power=0.8, detectable_delta=0.02, hsd_pairs=pairs)
    assert [v.system for v in verdicts] == ["knn", "probe"]
    for verdict in verdicts:
        b_c = pairs.filter((pl.col("system") == verdict.system) & (pl.col("model_a") == "B")).row(0, named=True)
        assert not b_c["significant"] and verdict.p_adjusted == b_c["p_value"] > 0.05
        assert verdict.winner is None and set(verdict.top_group) == {"B", "C"} and verdict.second in {"B", "C"}
        assert verdict.better_than_baseline == verdict.top_group and verdict.delta >= 0
        assert "top group" in verdict.text() and " wins" not in verdict.text()
    assert set(comparisons.filter(pl.col("family") == "confirmatory")["family_size"]) == {4}
