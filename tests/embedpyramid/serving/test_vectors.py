import numpy as np
import pytest

from embedpyramid.retrieval.search import order_rows
from embedpyramid.serving import symmetric_int8_index, truncate_and_normalize
from embedpyramid.serving.vectors import binarize, pair_scores, prepared_vectors


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


@pytest.mark.parametrize("metric", ["inner_product", "l2"])
def test_int8_codes_use_a_symmetric_range_per_dimension_and_faiss_scores_the_reconstruction(metric):
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((500, 48)).astype(np.float32) * rng.uniform(0.01, 3.0, 48).astype(np.float32)
    vectors[:, 5] = 0.0
    index = symmetric_int8_index(vectors, metric)
    assert index.code_size == 48 and index.ntotal == 500
    reconstructed = index.reconstruct_n(0, 500)
    peak = np.abs(vectors).max(axis=0)
    assert (np.abs(reconstructed - vectors) <= np.where(peak > 0, peak, 1.0) / 255 * (1 + 1e-4)).all()
    assert (reconstructed[:, 5] == 0).all()  # zero stays zero
    queries = rng.standard_normal((7, 48)).astype(np.float32)
    distances, labels = index.search(queries, 500)
    expected = pair_scores(queries, reconstructed, labels, metric)
    np.testing.assert_allclose(-distances if metric == "l2" else distances, expected, rtol=1e-4, atol=1e-3)


def test_binarize_packs_sign_bits():
    codes = binarize(np.array([[1, -1, 0, 2, -3, 4, 5, -6, 0.5, 0, 0, 0, 0, 0, 0, -1]], np.float32))
    assert codes.tolist() == [[0b10010110, 0b10000000]]
    with pytest.raises(ValueError, match="divisible by 8"):
        binarize(np.ones((1, 12), np.float32))


def test_order_rows_puts_missing_last_and_breaks_ties_by_index():
    scores, indices = order_rows(np.array([[0.5, 0.9, 0.5, 7.0]]), np.array([[4, 2, 1, -1]]))
    assert indices.tolist() == [[2, 1, 4, -1]] and scores[0, -1] == -np.inf


def test_prepared_vectors_cut_renormalizes_unit_vectors_only_and_cosine_normalizes():
    unit_rows = np.array([[0.6, 0.8, 0.0], [0.0, 0.6, 0.8]], np.float32)
    raw = np.array([[3.0, 4.0, 12.0], [0.0, 2.0, 0.0]], np.float32)
    np.testing.assert_allclose(prepared_vectors(unit_rows, "inner_product", 2), [[0.6, 0.8], [0.0, 1.0]])
    np.testing.assert_array_equal(prepared_vectors(raw, "l2", 2), [[3.0, 4.0], [0.0, 2.0]])
    np.testing.assert_allclose(prepared_vectors(raw, "cosine", 2), [[0.6, 0.8], [0.0, 1.0]])
    assert prepared_vectors(unit_rows, "cosine", None) is not None
    np.testing.assert_array_equal(prepared_vectors(unit_rows, "cosine", None), unit_rows)  # unit already: untouched
