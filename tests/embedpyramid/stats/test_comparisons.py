import numpy as np
import polars as pl
import pytest
from scipy import stats
from toy_per_query import QUERIES, SETTINGS, per_query_table

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.stats import benjamini_hochberg_adjust
from embedpyramid.stats.comparisons import COMPARISON_SCHEMA, alias_groups, compare_models
from embedpyramid.stats.pairing import query_deltas


def row(table, metric, slice_column, slice_value):
    selected = table.filter(
        (pl.col("metric") == metric)
        & (pl.col("slice_column") == slice_column)
        & (pl.col("slice_value") == slice_value)
    )
    assert selected.height == 1
    return selected.row(0, named=True)

def test_deltas_within_tie_epsilon_are_exactly_zero_in_every_statistic():
    """28 queries differ by float dust (one ulp of 0.1, up or down), one loses 0.1: the L5 case
    of 0 wins, 28 ties and 1 loss. With the dust zeroed the deltas are 28 zeros and -0.1, so by
    hand: mean -0.1/29, sd 0.1/sqrt(29) (one non-zero among n: sd^2 = x^2/n), d_z = -1/sqrt(29),
    t = -1 on 28 df, every sign pattern as extreme as the observed one (p = 1), and no resample
    mean above zero. 28 of 29 deltas tie at 0, so the default (hybrid) interval is the t
    interval ``-0.1/29 -+ t_28(0.975) · 0.1/29``: its upper end is above 0 by the sampling
    uncertainty of one loss among 29 queries, not by dust; a bootstrap interval ends at or below 0."""
    n, up, down = 29, np.nextafter(0.1, 1.0), np.nextafter(0.1, 0.0)
    b = [up if i % 3 else down for i in range(n - 1)] + [0.0]
    per_query = pl.DataFrame(
        [("toy", "base", "exact", f"q{i:02d}", "m", 0.1) for i in range(n)]
        + [("toy", "new", "exact", f"q{i:02d}", "m", value) for i, value in enumerate(b)],
        schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")
    queries = pl.DataFrame({"query_id": [f"q{i:02d}" for i in range(n)], "text": ["w"] * n})
    settings = ComparisonSettings(baseline="base", n_resamples=2_000, n_permutations=2_000, slice_columns=(),
                                  length_buckets=(), report_metric="m")
    tied = compare_models(per_query, queries, settings).row(0, named=True)
    assert (tied["wins"], tied["ties"], tied["losses"]) == (0, 28, 1)
    assert tied["share_above_zero"] == 0.0 and tied["boot_median"] <= 0.0
    half = stats.t.ppf(0.975, n - 1) * 0.1 / n
    assert tied["interval"] == "t"
    assert (tied["ci_low"], tied["ci_high"]) == pytest.approx((-0.1 / n - half, -0.1 / n + half), rel=1e-12)
    for method in ("studentized", "bca", "percentile"):
        booted = compare_models(per_query, queries, settings.model_copy(update={"interval": method})).row(0, named=True)
        assert booted["ci_high"] <= 0.0 and booted["share_above_zero"] == 0.0
    assert tied["mean_delta"] == pytest.approx(-0.1 / n, rel=1e-14)
    assert tied["sd_delta"] == pytest.approx(0.1 / np.sqrt(n), rel=1e-14)
    assert tied["d_z"] == pytest.approx(-1 / np.sqrt(n), rel=1e-14)
    assert tied["t_p_value"] == pytest.approx(2 * stats.t.sf(1.0, n - 1), rel=1e-12)
    assert tied["p_value"] == 1.0
    assert query_deltas(per_query, settings)["delta"].to_list() == [0.0] * (n - 1) + [-0.1]
    # Counting the dust as evidence (tie_epsilon 0) puts resample means above zero.
    dust = compare_models(per_query, queries, settings.model_copy(update={"tie_epsilon": 0.0})).row(0, named=True)
    assert dust["share_above_zero"] > 0.0 and (dust["wins"], dust["losses"]) == (18, 11)

def test_comparisons_table_hand_checked():
    table = compare_models(per_query_table(), QUERIES, SETTINGS)
    assert table.schema == pl.Schema(COMPARISON_SCHEMA)
    # 1 pair x 2 metrics x (all + 2 categories + 3 length buckets).
    assert table.height == 12
    assert table.select("slice_column", "slice_value").unique(maintain_order=True).rows() == [
        ("all", "all"),
        ("category", "a"),
        ("category", "b"),
        ("query_length", "<=2 words"),
        ("query_length", "3-4 words"),
        ("query_length", ">4 words"),
    ]
    assert table["metric"].unique(maintain_order=True).to_list() == ["nDCG@10", "Recall@100"]

    everything = row(table, "nDCG@10", "all", "all")
    assert (everything["model_a"], everything["model_b"], everything["n"]) == ("base", "new", 6)
    assert everything["mean_a"] == pytest.approx(2.25 / 6, abs=1e-15)
    assert everything["mean_b"] == pytest.approx(3.25 / 6, abs=1e-15)
    assert everything["mean_delta"] == pytest.approx(1 / 6, abs=1e-15)
    assert (everything["wins"], everything["ties"], everything["losses"]) == (4, 1, 1)
    # 8 x deltas = (1, 0, 2, -1, 3, 3): |sum of flipped signs| >= 8 when the flipped subset of
    # {1, 2, 1, 3, 3} sums to <= 1 or >= 9: 6 of 32 patterns (the zero doubles both counts).
    assert everything["p_value"] == 6 / 32
    assert everything["ci_low"] < everything["mean_delta"] < everything["ci_high"]
    assert not everything["small_slice"]

    category_a = row(table, "nDCG@10", "category", "a")
    assert category_a["n"] == 4 and not category_a["small_slice"]
    assert (category_a["mean_a"], category_a["mean_b"]) == (0.40625, 0.46875)
    assert category_a["mean_delta"] == 0.0625
    assert (category_a["wins"], category_a["ties"], category_a["losses"]) == (2, 1, 1)

    # Category b: two queries, both +0.375 -> a constant shift, and a small slice.
    category_b = row(table, "nDCG@10", "category", "b")
    assert category_b["n"] == 2 and category_b["small_slice"]
    assert category_b["ci_low"] == category_b["ci_high"] == category_b["mean_delta"] == 0.375
    assert category_b["p_value"] == 2 / 4

    # Recall is identical for both models: exactly zero, p = 1, all ties.
    recall = row(table, "Recall@100", "all", "all")
    assert (recall["ci_low"], recall["ci_high"], recall["boot_median"]) == (0.0, 0.0, 0.0)
    assert (recall["p_value"], recall["ties"], recall["share_above_zero"]) == (1.0, 6, 0.0)

    # Effect size and the second test: d_z = mean / sd, the paired t-test p-value beside the
    # sign-flip one; the exact sign-flip p has no Monte-Carlo error.
    deltas = np.array([0.125, 0, 0.25, -0.125, 0.375, 0.375])
    assert everything["sd_delta"] == pytest.approx(deltas.std(ddof=1), abs=1e-15)
    assert everything["d_z"] == pytest.approx(deltas.mean() / deltas.std(ddof=1), abs=1e-14)
    assert everything["t_p_value"] == pytest.approx(stats.ttest_1samp(deltas, 0.0).pvalue, abs=1e-12)
    assert everything["p_value_mc_error"] == 0.0
    assert everything["ci_low_mc_error"] > 0.0 and everything["interval"] == "studentized"
    assert everything["mde"] > everything["sd_delta"]  # 6 queries detect only large effects

    # Two families: the report metric over all queries against the baseline is confirmatory
    # (Holm over its single test), everything else exploratory (Benjamini-Hochberg).
    assert (everything["family"], everything["adjustment"], everything["family_size"]) == ("confirmatory", "holm", 1)
    assert everything["p_adjusted"] == everything["p_value"]
    exploratory = table.filter(pl.col("family") == "exploratory")
    assert exploratory.height == 11 and set(exploratory["adjustment"]) == {"bh"}
    assert set(exploratory["family_size"]) == {11}
    np.testing.assert_array_equal(
        exploratory["p_adjusted"], benjamini_hochberg_adjust(exploratory["p_value"].to_numpy())
    )
    assert everything["decision"] == "not significant"
    assert set(table["aliases"].to_list()[0]) == set()
    assert set(table["seed"]) == {3} and set(table["n_resamples"]) == {2_000}
    assert set(table["resampling"]) == {"query"}

def test_a_comparison_with_no_difference_is_exactly_zero_with_share_zero():
    base = per_query_table(models=("base",))
    table = compare_models(pl.concat([base, base.with_columns(pl.lit("twin").alias("model"))]), QUERIES, SETTINGS)
    for column in ("mean_delta", "ci_low", "ci_high", "boot_median", "share_above_zero", "d_z"):
        assert (table[column] == 0.0).all(), column
    assert (table["p_value"] == 1.0).all() and (table["decision"] == "not significant").all()

def test_aliases_are_tested_once_and_listed_on_the_canonical_row():
    base = per_query_table()
    copies = pl.concat([
        base.filter(pl.col("metric") == "Recall@100").with_columns(pl.lit(name).alias("metric"))
        for name in ("Hit@100", "MAP@100")
    ])
    table = compare_models(
        pl.concat([base, copies]), QUERIES, SETTINGS, aliases={"Hit@100": "Recall@100", "MAP@100": "Recall@100"}
    )
    assert table["metric"].unique(maintain_order=True).to_list() == ["nDCG@10", "Recall@100"]
    recall = row(table, "Recall@100", "all", "all")
    assert recall["aliases"] == ["Hit@100", "MAP@100"]
    assert row(table, "nDCG@10", "all", "all")["aliases"] == []
    # The report metric stands for its group when it is an alias.
    groups = alias_groups(pl.concat([base, copies]), {"Hit@100": "Recall@100"}, report_metric="Hit@100")
    assert groups == {"nDCG@10": [], "Hit@100": ["Recall@100"], "MAP@100": []}
    broken = copies.with_columns(pl.when(pl.col("query_id") == "q2").then(0.0).otherwise(pl.col("value")).alias("value"))
    with pytest.raises(ValueError, match="'Hit@100' is listed as an alias of 'Recall@100' but differs"):
        compare_models(pl.concat([base, broken]), QUERIES, SETTINGS, aliases={"Hit@100": "Recall@100"})

def test_truncated_slice_holds_the_queries_truncated_under_either_card():
    table = compare_models(per_query_table(), QUERIES, SETTINGS, truncated={"base": {"q1"}, "new": {"q5", "q6"}})
    truncated = table.filter(pl.col("slice_column") == "truncated")
    assert truncated.select("slice_value", "n").unique(maintain_order=True).rows() == [("yes", 3), ("no", 3)]
    assert row(table, "nDCG@10", "truncated", "yes")["mean_delta"] == pytest.approx((0.125 + 0.375 + 0.375) / 3)
    # Nothing known or nothing truncated: no slice.
    for truncated_ids in ({"base": None, "new": None}, {"base": set(), "new": set()}):
        plain = compare_models(per_query_table(), QUERIES, SETTINGS, truncated=truncated_ids)
        assert "truncated" not in set(plain["slice_column"])

def test_values_outside_the_value_range_are_refused():
    outside = per_query_table().with_columns(pl.when(pl.col("query_id") == "q1").then(1.5).otherwise(pl.col("value")).alias("value"))
    with pytest.raises(ValueError, match=r"outside value_range \[0.0, 1.0\]"):
        compare_models(outside, QUERIES, SETTINGS)
    unbounded = compare_models(outside, QUERIES, SETTINGS.model_copy(update={"value_range": None}))
    assert unbounded.height == 12

def test_swapping_baseline_negates_deltas_and_intervals():
    forward = compare_models(per_query_table(), QUERIES, SETTINGS)
    backward = compare_models(
        per_query_table(), QUERIES, SETTINGS.model_copy(update={"baseline": "new"})
    )
    np.testing.assert_array_equal(backward["mean_delta"], -forward["mean_delta"])
    np.testing.assert_array_equal(backward["ci_low"], -forward["ci_high"])
    np.testing.assert_array_equal(backward["ci_high"], -forward["ci_low"])
    np.testing.assert_array_equal(backward["wins"], forward["losses"])

def test_group_column_resamples_and_flips_whole_groups():
    settings = SETTINGS.model_copy(update={"group_column": "session"})
    table = compare_models(per_query_table(), QUERIES, settings)
    everything = row(table, "nDCG@10", "all", "all")
    assert (everything["n"], everything["n_units"]) == (6, 3)
    assert everything["resampling"] == "group:session"
    # Group sums x 8: s1 = 1, s2 = 2, s3 = 5; |+-1 +-2 +-5| >= 8 only with one common sign.
    assert everything["p_value"] == 2 / 8

def test_all_pairs_and_slice_columns_absent_from_the_dataset():
    settings = SETTINGS.model_copy(update={"all_pairs": True, "slice_columns": ("category", "answerable"), "length_buckets": ()})
    table = compare_models(per_query_table(models=("base", "new", "other")), QUERIES, settings)
    assert table.select("model_a", "model_b").unique(maintain_order=True).rows() == [
        ("base", "new"),
        ("base", "other"),
        ("new", "other"),
    ]
    assert set(table["slice_column"]) == {"all", "category"}
    # Confirmatory: the report metric over all queries for the two pairs with the baseline.
    confirmatory = table.filter(pl.col("family") == "confirmatory")
    assert confirmatory.select("model_a", "model_b", "metric", "slice_column").rows() == [
        ("base", "new", "nDCG@10", "all"), ("base", "other", "nDCG@10", "all")]
    assert set(confirmatory["family_size"]) == {2} and table.filter(pl.col("family") == "exploratory").height == 16

def test_a_query_missing_in_one_model_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"model 'new' has no rows for 1 queries .*\['q3'\]"):
        compare_models(per_query_table(drop={("new", "q3")}), QUERIES, SETTINGS)
    with pytest.raises(ValueError, match=r"model 'new' lacks 1 \(query, metric\) .*'q2' / nDCG@10"):
        query_deltas(per_query_table(drop={("new", "q2", "nDCG@10")}), SETTINGS)

def test_other_input_errors_say_what_to_fix():
    with pytest.raises(ValueError, match="baseline model 'absent'"):
        compare_models(per_query_table(), QUERIES, SETTINGS.model_copy(update={"baseline": "absent"}))
    with pytest.raises(ValueError, match="missing from the queries table"):
        compare_models(per_query_table(), QUERIES.filter(pl.col("query_id") != "q6"), SETTINGS)
    both_lack = {("base", "q1", "Recall@100"), ("new", "q1", "Recall@100")}
    with pytest.raises(ValueError, match="every scored query needs every metric"):
        compare_models(per_query_table(drop=both_lack), QUERIES, SETTINGS)
    duplicated = pl.concat([per_query_table(), per_query_table().head(1)])
    with pytest.raises(ValueError, match="repeat a"):
        compare_models(duplicated, QUERIES, SETTINGS)
    unknown_group = SETTINGS.model_copy(update={"group_column": "nope"})
    with pytest.raises(ValueError, match="group_column 'nope'"):
        compare_models(per_query_table(), QUERIES, unknown_group)

def test_a_dataset_with_only_the_baseline_gives_an_empty_typed_table():
    table = compare_models(per_query_table(models=("base",)), QUERIES, SETTINGS)
    assert table.is_empty()
    assert table.schema == pl.Schema(COMPARISON_SCHEMA)

def test_queries_with_a_dataset_column_serve_several_datasets():
    second = per_query_table().with_columns(dataset=pl.lit("toy2"))
    both = pl.concat([per_query_table(), second])
    with pytest.raises(ValueError, match="no dataset column"):
        compare_models(both, QUERIES, SETTINGS)
    queries = pl.concat(
        [QUERIES.with_columns(dataset=pl.lit(name)) for name in ("toy", "toy2")]
    )
    table = compare_models(both, queries, SETTINGS)
    assert table["dataset"].unique(maintain_order=True).to_list() == ["toy", "toy2"]
    # Families are formed per dataset: the two identical datasets get identical adjustments.
    first, second = (table.filter(pl.col("dataset") == d) for d in ("toy", "toy2"))
    np.testing.assert_array_equal(first["p_adjusted"], second["p_adjusted"])
    assert set(second["family_size"]) == {1, 11}
