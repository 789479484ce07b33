import math

import numpy as np
import pytest

from embedpyramid.retrieval.metrics.ndcg import graded_gain, ndcg_at_k

LOG2_3 = math.log2(3)  # rank-2 discount is 1/log2(3) = 0.63093; rank 3: 1/log2(4) = 0.5


def test_graded_gain() -> None:
    grades = np.array([-2, 0, 1, 3])
    # linear: max(g, 0) -> 0, 0, 1, 3; exponential: 2^max(g, 0) - 1 -> 0, 0, 1, 7
    np.testing.assert_array_equal(graded_gain(grades, "linear"), [0.0, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(graded_gain(grades, "exponential"), [0.0, 0.0, 1.0, 7.0])


def test_ndcg_at_k() -> None:
    gains = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])
    ideal = np.array([[2.0, 1.0, 1.0], [3.0, 0.0, 0.0]])
    # q0 @2: DCG = 2/log2(3) = 1.26186; IDCG = 2 + 1/log2(3) = 2.63093 -> 0.47963
    # q0 @3: DCG = 2/log2(3) + 1/2 = 1.76186; IDCG = 2 + 1/log2(3) + 1/2 = 3.13093 -> 0.56273
    # q1 is its own ideal ranking -> 1 at every k
    np.testing.assert_allclose(ndcg_at_k(gains, ideal, 2), [(2 / LOG2_3) / (2 + 1 / LOG2_3), 1.0])
    np.testing.assert_allclose(
        ndcg_at_k(gains, ideal, 3), [(2 / LOG2_3 + 0.5) / (2 + 1 / LOG2_3 + 0.5), 1.0]
    )


def test_cutoff_beyond_the_retrieved_depth() -> None:
    # one retrieved gain 1 at rank 1, ideal [1, 1]: DCG@10 = 1, IDCG@10 = 1 + 1/log2(3) -> 0.61315
    assert ndcg_at_k(np.array([[1.0]]), np.array([[1.0, 1.0]]), 10) == pytest.approx(
        [1 / (1 + 1 / LOG2_3)]
    )


def test_empty_ranking_scores_zero() -> None:
    np.testing.assert_array_equal(ndcg_at_k(np.zeros((2, 0)), np.ones((2, 5)), 5), [0.0, 0.0])
