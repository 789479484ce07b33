"""Win / tie / loss counts of paired per-query deltas.

With ``d_i = value_b(i) - value_a(i)`` and a tolerance ``epsilon >= 0``: a win (for model B)
is ``d_i > epsilon``, a tie ``|d_i| <= epsilon``, a loss ``d_i < -epsilon``. The tolerance keeps
floating-point noise (two models that rank identically but sum scores differently) from being
counted as a difference.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from embedpyramid.stats.units import delta_matrix


def win_tie_loss(
    deltas: ArrayLike, epsilon: float = 1e-9
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts ``(wins, ties, losses)`` per metric column, each of shape ``deltas.shape[1:]``."""
    if not epsilon >= 0.0:
        raise ValueError(f"epsilon must be a non-negative number; got {epsilon}")
    matrix, output_shape = delta_matrix(deltas)
    wins = np.count_nonzero(matrix > epsilon, axis=0)
    losses = np.count_nonzero(matrix < -epsilon, axis=0)
    ties = matrix.shape[0] - wins - losses
    return wins.reshape(output_shape), ties.reshape(output_shape), losses.reshape(output_shape)
