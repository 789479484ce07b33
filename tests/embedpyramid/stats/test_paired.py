import numpy as np
import pytest

from embedpyramid.stats import win_tie_loss


def test_epsilon_decides_what_is_a_tie():
    deltas = np.array([0.5, 1e-12, -1e-12, -0.3, 0.0, 2e-9, 1e-9])
    wins, ties, losses = win_tie_loss(deltas, epsilon=1e-9)
    # |d| <= 1e-9 is a tie, the boundary included.
    assert (int(wins), int(ties), int(losses)) == (2, 4, 1)
    wins, ties, losses = win_tie_loss(deltas, epsilon=0.0)
    assert (int(wins), int(ties), int(losses)) == (4, 1, 2)


def test_counts_per_metric_column():
    deltas = np.array([[1.0, 0.0], [-1.0, 0.0], [2.0, -3.0]])
    wins, ties, losses = win_tie_loss(deltas)
    np.testing.assert_array_equal(wins, [2, 0])
    np.testing.assert_array_equal(ties, [0, 2])
    np.testing.assert_array_equal(losses, [1, 1])


def test_negative_epsilon_is_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        win_tie_loss([1.0], epsilon=-1.0)
