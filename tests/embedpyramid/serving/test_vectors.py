import numpy as np
import pytest

from embedpyramid.retrieval.search import order_rows
from embedpyramid.serving import symmetric_int8_index, truncate_and_normalize
from embedpyramid.serving.vectors import (
    GatheredRows,
    Preparation,
    binarize,
    gather_rows,
    int8_peak,
    pair_scores,
    prepared_vectors,
    vector_blocks,
    vector_shape,
)


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
    index = symmetric_int8_index(np.maximum(int8_peak(vectors[:200]), int8_peak(vectors[200:])), metric)
    index.add(vectors)
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


def test_a_table_is_read_in_blocks_and_gathered_by_row(stored):
    vectors = np.arange(20, dtype=np.float32).reshape(10, 2)
    table = stored(vectors, block_rows=4, row_group_rows=3)
    assert vector_shape(table) == (10, 2)
    assert [len(block) for block in vector_blocks(table)] == [4, 4, 2]
    np.testing.assert_array_equal(gather_rows(table, np.array([0, 3, 4, 9])), [[0, 1], [6, 7], [8, 9], [18, 19]])
    gathered = GatheredRows.of(table, [np.array([[9, -1, 3]]), np.array([[3, 0]])])
    np.testing.assert_array_equal(gathered.rows, [0, 3, 9])
    np.testing.assert_array_equal(gathered.positions(np.array([[9, -1, 3], [0, 0, 9]])), [[2, -1, 1], [0, 0, 2]])
    np.testing.assert_array_equal(gathered.vectors[gathered.positions(np.array([9]))], [[18, 19]])
    with pytest.raises(ValueError, match="document 4 was not gathered"):
        gathered.positions(np.array([3, 4]))


@pytest.mark.parametrize(("metric", "dimension"), [("cosine", None), ("cosine", 2), ("inner_product", 2), ("l2", 3)])
def test_the_preparation_is_decided_over_the_whole_table_and_applied_block_by_block(stored, metric, dimension):
    """The first block is unit, the second is not: deciding per block would re-normalize the first
    one only; decided over the table, the blocks prepare to the bits of the whole matrix."""
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((8, 4)).astype(np.float32)
    vectors[:4] /= np.linalg.norm(vectors[:4], axis=1, keepdims=True)
    table = stored(vectors, block_rows=4, row_group_rows=4)
    preparation = Preparation.of(vector_blocks(table), metric, dimension)
    assert not preparation.unit_input
    whole = prepared_vectors(vectors, metric, dimension)
    np.testing.assert_array_equal(np.concatenate([preparation(block) for block in vector_blocks(table)]), whole)
    np.testing.assert_array_equal(preparation(gather_rows(table, np.array([1, 6]))), whole[[1, 6]])
    unit_rows = vectors[:4]
    assert Preparation.of([unit_rows[:2], unit_rows[2:]], metric, dimension).unit_input


def test_without_a_cut_or_cosine_the_preparation_reads_no_block():
    def unreadable():
        raise AssertionError("a block was read")
        yield

    assert Preparation.of(unreadable(), "inner_product", None) == Preparation("inner_product", None, None, None)
    with pytest.raises(AssertionError, match="a block was read"):
        Preparation.of(unreadable(), "cosine", None)
