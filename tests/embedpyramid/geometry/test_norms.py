import json
import math

import numpy as np
import polars as pl
import pytest

from embedpyramid.geometry.norms import (
    anisotropy,
    geometry_report,
    length_norm_correlations,
    length_quintiles,
    norm_summary,
    quintile_table,
    spread_vs_margin,
    vector_norms,
)


def test_norm_summary_counts_nan_and_zero_vectors_and_uses_the_population_sd():
    vectors = np.array([[3, 4], [0, 0], [np.nan, 1], [6, 8], [1, 0], [np.inf, 0]], np.float32)
    summary = norm_summary(vectors)
    # Finite norms 5, 0, 10, 1: mean 4, squared deviations 1 + 16 + 36 + 9 = 62 over n = 4.
    assert summary == {
        "n": 6, "nan_vectors": 2, "zero_vectors": 1,
        "mean": 4.0, "sd": pytest.approx(math.sqrt(62 / 4)), "min": 0.0, "max": 10.0, "max_over_min": math.inf,
    }
    assert norm_summary(np.array([[3, 4], [6, 8]], np.float32))["max_over_min"] == 2.0


def test_norm_summary_of_only_nan_vectors_has_nan_statistics():
    summary = norm_summary(np.full((2, 3), np.nan, np.float32))
    assert summary["nan_vectors"] == 2 and math.isnan(summary["mean"]) and math.isnan(summary["max_over_min"])


def test_vector_norms_accumulate_in_float64():
    vectors = np.full((3, 4096), 0.1, np.float32)
    np.testing.assert_allclose(vector_norms(vectors), np.sqrt(4096 * np.float64(np.float32(0.1)) ** 2), rtol=1e-14)


def test_length_norm_correlations_by_hand():
    chars = np.array([1, 2, 3, 4, 7])
    norms = np.array([1.0, 2.0, 3.0, 5.0, np.nan])  # the NaN vector is left out
    tokens = np.array([8, 4, 2, 1, 1])
    result = length_norm_correlations(norms, chars, tokens)
    # Deviations of chars (-1.5, -.5, .5, 1.5), of norms (-1.75, -.75, .25, 2.25): r = 6.5 / sqrt(5 * 8.75).
    assert result["pearson_chars"] == pytest.approx(6.5 / math.sqrt(5 * 8.75))
    assert result["spearman_chars"] == pytest.approx(1.0)
    assert result["spearman_tokens"] == pytest.approx(-1.0)
    assert result["n"] == 4


def test_length_norm_correlations_are_nan_for_constant_input():
    result = length_norm_correlations(np.ones(4), np.arange(4), np.arange(4))
    assert all(math.isnan(result[key]) for key in ("pearson_chars", "spearman_chars", "pearson_tokens"))


def test_length_quintiles_rank_by_length_then_position():
    assert length_quintiles(np.array([50, 10, 40, 20, 30])).tolist() == [4, 0, 3, 1, 2]
    assert length_quintiles(np.full(10, 7)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # n = 7: floor(5 r / 7) for r = 0..6 is 0, 0, 1, 2, 2, 3, 4.
    assert length_quintiles(np.arange(7)).tolist() == [0, 0, 1, 2, 2, 3, 4]
    for n in range(5, 60):
        sizes = np.bincount(length_quintiles(np.random.default_rng(n).integers(0, 4, n)), minlength=5)
        assert sizes.max() - sizes.min() <= 1


def test_quintile_table_by_hand():
    chars = np.arange(10, 0, -1)  # 10 .. 1
    table = quintile_table(chars, 2 * chars, chars / 10)
    assert table["quintile"].to_list() == [1, 2, 3, 4, 5]
    assert table["chars_min"].to_list() == [1, 3, 5, 7, 9]
    assert table["chars_max"].to_list() == [2, 4, 6, 8, 10]
    assert table["n"].to_list() == [2] * 5
    assert table["mean_tokens"].to_list() == [3.0, 7.0, 11.0, 15.0, 19.0]
    np.testing.assert_allclose(table["mean_norm"].to_numpy(), [0.15, 0.35, 0.55, 0.75, 0.95])


def test_quintile_table_keeps_empty_quintiles_and_skips_nan_norms():
    # n = 3: ranks 0, 1, 2 fall in quintiles floor(5r/3) + 1 = 1, 2, 4.
    table = quintile_table(np.array([5, 6, 7]), np.array([1, 2, 3]), np.array([1.0, np.nan, 3.0]))
    assert table["n"].to_list() == [1, 1, 0, 1, 0]
    assert table["chars_min"].to_list() == [5, 6, None, 7, None]
    assert table["mean_norm"].to_list() == [1.0, None, None, 3.0, None]


def test_anisotropy_of_orthogonal_identical_and_opposite_vectors():
    assert anisotropy(np.eye(4, dtype=np.float32)) == 0.0
    assert anisotropy(np.tile(np.array([1, 2, 3], np.float32), (5, 1))) == pytest.approx(1.0)
    # Two opposite vectors: every pair is distinct, so every cosine is exactly -1.
    assert anisotropy(np.array([[1, 0], [-3, 0]], np.float32), n_pairs=50) == -1.0
    # Zero and NaN vectors have no direction and are left out.
    with_broken = np.vstack([np.eye(3), np.zeros((1, 3)), np.full((1, 3), np.nan)]).astype(np.float32)
    assert anisotropy(with_broken) == 0.0
    assert math.isnan(anisotropy(np.ones((1, 3), np.float32)))


def test_anisotropy_is_seeded():
    vectors = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32) + 0.5
    assert anisotropy(vectors, seed=1) == anisotropy(vectors, seed=1)
    assert anisotropy(vectors, seed=1) != anisotropy(vectors, seed=2)
    assert 0.0 < anisotropy(vectors, n_pairs=100_000) < 1.0


def test_spread_vs_margin_by_hand():
    doc_norms = np.array([1.0, 3.0, np.nan])  # mean 2, population sd 1: spread 0.5
    scores = np.array([
        np.linspace(1.0, 0.5, 10),   # margin (1 - 0.5) / 1 = 0.5
        np.linspace(0.8, 0.6, 10),   # margin 0.2 / 0.8 = 0.25
        np.linspace(-0.1, -0.5, 10),  # top-1 not positive: left out
    ])
    result = spread_vs_margin(doc_norms, scores)
    assert result["spread"] == 0.5
    assert result["margin"] == pytest.approx(0.375)
    assert result["ratio"] == pytest.approx(0.5 / 0.375)
    assert result["margin_queries"] == 2
    # Third scores 1 - 2 (0.5 / 9) and 0.8 - 2 (0.2 / 9).
    third = spread_vs_margin(doc_norms, scores[:, :3], margin_rank=3)
    assert third["margin"] == pytest.approx((2 * 0.5 / 9 + 2 * 0.2 / 9 / 0.8) / 2)
    with pytest.raises(ValueError, match="at least 10"):
        spread_vs_margin(doc_norms, scores[:, :5])


def test_geometry_report_caps_tokens_and_is_json_able():
    rng = np.random.default_rng(3)
    chars = rng.integers(5, 500, 200)
    docs = (rng.normal(size=(200, 16)) * (1 + chars[:, None] / 100)).astype(np.float32)
    docs[7] = np.nan
    queries = rng.normal(size=(20, 16)).astype(np.float32)
    report = geometry_report(queries, docs, chars, chars // 4, max_tokens=64, seed=5)
    assert report.token_cap == 64 and report.quintiles["mean_tokens"].max() <= 64
    assert report.doc_norms["nan_vectors"] == 1 and report.length_correlations["n"] == 199
    assert report.length_correlations["spearman_chars"] > 0.5
    assert report.anisotropy == anisotropy(docs, seed=5)
    assert report.spread_margin["margin_queries"] == 20
    encoded = json.loads(json.dumps(report.as_dict(), allow_nan=False))
    assert encoded["quintiles"][0]["quintile"] == 1 and encoded["seed"] == 5

    unit_queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    finite = docs[np.isfinite(docs).all(axis=1)]
    cosines = np.sort(unit_queries @ (finite / np.linalg.norm(finite, axis=1, keepdims=True)).T, axis=1)[:, ::-1]
    given = geometry_report(queries, docs, chars, chars // 4, max_tokens=64, seed=5, cosine_top_scores=cosines[:, :10])
    assert given.spread_margin == pytest.approx(report.spread_margin, rel=1e-5)


def test_geometry_report_json_turns_infinities_into_null():
    docs = np.array([[0, 0], [1, 0], [0, 2]] + [[1, 1]] * 9, np.float32)
    report = geometry_report(np.ones((2, 2), np.float32), docs, np.arange(12), np.arange(12))
    assert report.doc_norms["max_over_min"] == math.inf and report.token_cap is None
    assert report.as_dict()["doc_norms"]["max_over_min"] is None
    assert isinstance(report.quintiles, pl.DataFrame)
