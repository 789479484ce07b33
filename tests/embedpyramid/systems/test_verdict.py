import polars as pl
import pytest

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.systems.verdict import system_comparisons

QUERIES = pl.DataFrame({"query_id": [f"q{i:02d}" for i in range(12)], "text": ["a question"] * 12,
                        "category": ["x"] * 6 + ["y"] * 6})


def rows(model: str, system: str, values: list[float], metric: str = "nDCG@10") -> pl.DataFrame:
    return pl.DataFrame({"dataset": "toy", "model": model, "system": system,
                         "query_id": [f"q{i:02d}" for i in range(len(values))], "metric": metric, "value": values})


SETTINGS = ComparisonSettings(baseline="unused", n_resamples=2000, n_permutations=10_000, seed=7,
                              slice_columns=("category",), length_buckets=(), min_slice_n=2, report_metric="nDCG@10")


def test_each_system_is_compared_with_its_own_models_exact_run():
    per_query = pl.concat([
        rows("m1@1", "exact", [0.0, 0.5, 1.0] * 4),
        rows("m1@1", "rrf", [1.0] * 12),
        rows("m2@2", "exact", [1.0] * 12),
        rows("m2@2", "rrf", [1.0] * 12),
        rows("none", "bm25", [0.0] * 12),
        rows("m1@1", "exact", [0.2] * 12, metric="MRR@10"),
    ])
    table = system_comparisons(per_query, QUERIES, SETTINGS, metrics=["nDCG@10"])
    overall = table.filter(pl.col("slice_column") == "all").sort("model", "system_b")
    assert overall.select("model", "system_a", "system_b").rows() == [
        ("m1@1", "exact", "bm25"), ("m1@1", "exact", "rrf"), ("m2@2", "exact", "bm25"), ("m2@2", "exact", "rrf"),
    ]
    deltas = dict(zip(zip(overall["model"], overall["system_b"], strict=True), overall["mean_delta"], strict=True))
    # m1: rrf - exact = (1, .5, 0) x 4 -> mean 0.5; bm25 - exact = -(0, .5, 1) x 4 -> -0.5.
    assert deltas[("m1@1", "rrf")] == pytest.approx(0.5)
    assert deltas[("m1@1", "bm25")] == pytest.approx(-0.5)
    assert deltas[("m2@2", "rrf")] == 0.0 and deltas[("m2@2", "bm25")] == -1.0
    assert set(table["metric"]) == {"nDCG@10"}
    # Identical per-query values: the interval is [0, 0], no detectable difference.
    same = overall.filter((pl.col("model") == "m2@2") & (pl.col("system_b") == "rrf")).row(0, named=True)
    assert (same["ci_low"], same["ci_high"], same["verdict"]) == (0.0, 0.0, "no detectable difference")
    worse = overall.filter((pl.col("model") == "m2@2") & (pl.col("system_b") == "bm25")).row(0, named=True)
    # 12 losses: the two-sided sign-flip p, enumerated exactly (2^12 <= n_permutations), is 2 / 2^12;
    # Holm over the confirmatory family (nDCG@10 over all queries: 4 system pairs) multiplies the
    # smallest p by 4; the slices are exploratory (Benjamini-Hochberg).
    assert worse["losses"] == 12 and worse["p_value"] == pytest.approx(2 / 4096)
    assert (worse["family"], worse["adjustment"], worse["family_size"]) == ("confirmatory", "holm", 4)
    assert worse["p_adjusted"] == pytest.approx(4 * 2 / 4096) and worse["verdict"] == "worse"
    assert set(table["slice_value"]) == {"all", "x", "y"}
    assert set(table.filter(pl.col("slice_column") != "all")["family"]) == {"exploratory"}


def test_without_an_exact_run_there_is_nothing_to_compare():
    with pytest.raises(ValueError, match="no system has an exact run"):
        system_comparisons(rows("none", "bm25", [0.0] * 12), QUERIES, SETTINGS)
