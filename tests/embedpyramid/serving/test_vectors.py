import numpy as np
import pytest

from embedpyramid.retrieval.search import exact_topk
from embedpyramid.serving import Int8Vectors, exact_search, truncate_and_normalize
from embedpyramid.serving.vectors import binarize, order_rows


def test_truncation_keeps_the_leading_coordinates_and_renormalizes():
    vectors = np.array([[3.0, 4.0, 12.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], np.float32)
    cut = truncate_and_normalize(vectors, 2)
    assert cut.dtype == np.float32 and cut.shape == (3, 2)
    np.testing.assert_allclose(cut, [[0.6, 0.8], [0.0, 0.0], [1.0, 0.0]])  # an all-zero cut stays zero
    rng = np.random.default_rng(1)
    np.testing.assert_allclose(np.linalg.norm(truncate_and_normalize(rng.standard_normal((50, 384)), 64), axis=1), 1.0,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="cannot cut 3-d vectors to 4"):
        truncate_and_normalize(vectors, 4)


def test_int8_round_trip_error_is_at_most_half_a_step_per_dimension():
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((500, 48)).astype(np.float32) * rng.uniform(0.01, 3.0, 48).astype(np.float32)
    vectors[:, 5] = 0.0
    quantized = Int8Vectors.quantize(vectors)
    assert quantized.codes.dtype == np.int8 and np.abs(quantized.codes).max() == 127
    error = np.abs(quantized.dequantize() - vectors)
    assert (error <= quantized.scales / 2 * (1 + 1e-5)).all()
    peak = np.abs(vectors).max(axis=0)
    np.testing.assert_allclose(quantized.scales, np.where(peak > 0, peak / 127, 1.0), rtol=1e-6)
    assert (quantized.codes[:, 5] == 0).all()
    assert quantized.nbytes == 500 * 48 + 4 * 48


def test_binarize_packs_sign_bits():
    codes = binarize(np.array([[1, -1, 0, 2, -3, 4, 5, -6, 0.5, 0, 0, 0, 0, 0, 0, -1]], np.float32))
    assert codes.tolist() == [[0b10010110, 0b10000000]]
    with pytest.raises(ValueError, match="divisible by 8"):
        binarize(np.ones((1, 12), np.float32))


def test_order_rows_puts_missing_last_and_breaks_ties_by_index():
    scores, indices = order_rows(np.array([[0.5, 0.9, 0.5, 7.0]]), np.array([[4, 2, 1, -1]]))
    assert indices.tolist() == [[2, 1, 4, -1]] and scores[0, -1] == -np.inf


def test_exact_search_inner_product_is_exact_topk_and_l2_is_brute_force():
    rng = np.random.default_rng(3)
    documents = rng.standard_normal((300, 8)).astype(np.float32) * rng.uniform(0.1, 5, (300, 1)).astype(np.float32)
    queries = rng.standard_normal((20, 8)).astype(np.float32)
    for got, expected in zip(exact_search(queries, documents, 7, "inner_product"), exact_topk(queries, documents, 7),
                             strict=True):
        np.testing.assert_array_equal(got, expected)
    scores, indices = exact_search(queries, documents, 7, "l2")
    distances = ((queries[:, None, :].astype(np.float64) - documents[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(indices, np.argsort(distances, axis=1, kind="stable")[:, :7])
    np.testing.assert_allclose(scores, -np.take_along_axis(distances, indices, axis=1), rtol=1e-4, atol=1e-4)
