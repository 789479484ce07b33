import numpy as np
import polars as pl
import pytest

from embedpyramid.config import BitextSettings
from embedpyramid.tasks.bitext import compare_bitext, evaluate_bitext, k_occurrence, mining_scores
from embedpyramid.vectors import TextVectors

# Cosines of sources s0..s3 (rows) with targets t0..t3 (columns); t_i translates s_i. Target t3
# is a hub: every source is closer to it (0.45) than s0..s2 are to their own translations (0.4).
HUB = np.array([
    [0.40, 0.05, 0.05, 0.45],
    [0.05, 0.40, 0.05, 0.45],
    [0.05, 0.05, 0.40, 0.45],
    [0.05, 0.05, 0.05, 0.50],
])


def hub_data() -> tuple[pl.DataFrame, TextVectors]:
    """Unit vectors with exactly the HUB cosines: targets are basis vectors e0..e3, source i is
    its row of HUB plus the rest of a unit norm on its own axis e(4+i)."""
    rows = []
    for i, cosines in enumerate(HUB):
        source = np.zeros(8)
        source[:4], source[4 + i] = cosines, np.sqrt(1 - (cosines**2).sum())
        rows.append(source)
    vectors = TextVectors([f"en:s{i}" for i in range(4)] + [f"xx:t{i}" for i in range(4)],
                          np.vstack([rows, np.eye(8)[:4]]))
    pairs = pl.DataFrame({"pair_id": [f"en-xx/s{i}" for i in range(4)], "text_id_1": [f"en:s{i}" for i in range(4)],
                          "text_id_2": [f"xx:t{i}" for i in range(4)], "gold": [1.0] * 4, "split": ["test"] * 4,
                          "language_pair": ["en-xx"] * 4})
    return pairs, vectors


def test_csls_and_margin_fix_the_hubs_false_matches_by_hand():
    # k = 2: r_T(s0..s2) = (0.45 + 0.40) / 2 = 0.425, r_T(s3) = (0.50 + 0.05) / 2 = 0.275;
    # r_S(t0..t2) = (0.40 + 0.05) / 2 = 0.225, r_S(t3) = (0.50 + 0.45) / 2 = 0.475.
    csls = mining_scores(HUB, "csls", 2)
    assert csls[0, 0] == pytest.approx(0.8 - 0.425 - 0.225)  # 0.15: its translation
    assert csls[0, 3] == pytest.approx(0.9 - 0.425 - 0.475)  # 0.00: the hub
    assert csls[3, 3] == pytest.approx(1.0 - 0.275 - 0.475)
    margin = mining_scores(HUB, "margin", 2)
    assert margin[0, 0] == pytest.approx(0.40 / 0.325) and margin[0, 3] == pytest.approx(1.0)
    assert np.argmax(HUB, axis=1).tolist() == [3, 3, 3, 3]
    assert np.argmax(csls, axis=1).tolist() == [0, 1, 2, 3] == np.argmax(margin, axis=1).tolist()
    assert k_occurrence(HUB, 1).tolist() == [0, 0, 0, 4] and k_occurrence(csls, 1).tolist() == [1, 1, 1, 1]


def test_evaluate_bitext_reports_accuracy_f1_and_hubness_per_scoring():
    pairs, vectors = hub_data()
    result = evaluate_bitext(pairs, vectors, BitextSettings(k=2, hubness_k=1), dataset="d", model="m")
    values = {(row["system"], row["metric"]): row["value"]
              for row in result.summary.filter(pl.col("subset") == "en-xx").iter_rows(named=True)}
    assert values["nearest", "accuracy"] == 0.25 and values["csls", "accuracy"] == values["margin", "accuracy"] == 1.0
    # Nearest predicts t3 for all: only class t3 scores, F1 = 2*1/(1+4) = 0.4, macro over 4 targets.
    assert values["nearest", "f1"] == pytest.approx(0.1)
    assert values["nearest", "precision"] == pytest.approx(0.0625) and values["nearest", "recall"] == 0.25
    assert values["nearest", "antihub_share"] == 0.75 and values["nearest", "max_k_occurrence"] == 4.0
    assert values["nearest", "hubness_skew"] == pytest.approx(2 / np.sqrt(3))  # skew of [0, 0, 0, 4]
    assert values["csls", "hubness_skew"] == 0.0 and values["csls", "antihub_share"] == 0.0
    per_item = result.per_item.filter(pl.col("system") == "nearest")
    assert per_item["query_id"].to_list() == pairs["pair_id"].to_list()
    assert per_item["value"].to_list() == [0.0, 0.0, 0.0, 1.0]
    overall = result.summary.filter((pl.col("subset") == "all") & (pl.col("system") == "csls"))
    assert overall["value"].to_list() == [1.0] and overall["n_items"].to_list() == [4]


def test_comparison_of_scorings_macro_f1():
    pairs, vectors = hub_data()
    result = evaluate_bitext(pairs, vectors, BitextSettings(k=2), dataset="d", model="m")
    nearest = result.predictions.filter(pl.col("system") == "nearest").with_columns(pl.lit("x").alias("system"))
    csls = result.predictions.filter(pl.col("system") == "csls").with_columns(pl.lit("x").alias("system"),
                                                                              pl.lit("m2").alias("model"))
    compared = compare_bitext(nearest, csls, n_resamples=200)
    row = compared.row(0, named=True)
    assert (row["subset"], row["metric"], row["value_a"], row["value_b"]) == ("en-xx", "f1", pytest.approx(0.1), 1.0)
