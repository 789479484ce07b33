import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from embedpyramid.transfer import (
    kendall_tau_b,
    mid_ranks,
    pairwise_agreement,
    pairwise_orders,
    same_winner,
    spearman_rho,
)

# Four models A, B, C, D; B and C tie on the public side, A and C on the own side.
PUBLIC = np.array([0.9, 0.7, 0.7, 0.5])
OWN = np.array([0.6, 0.8, 0.6, 0.4])


def test_kendall_tau_b_with_ties_by_hand():
    # Pairs (sign public, sign own): AB (+,-) discordant, AC (+,0), AD (+,+), BC (0,+), BD (+,+), CD (+,+).
    # n_c - n_d = 3 - 1 = 2; untied pairs: 5 on each side; tau_b = 2 / sqrt(5 * 5) = 0.4.
    tau = kendall_tau_b(pairwise_orders(PUBLIC), pairwise_orders(OWN))
    assert tau == pytest.approx(0.4, abs=1e-15)
    assert tau == pytest.approx(kendalltau(PUBLIC, OWN).statistic, abs=1e-15)


def test_spearman_of_mid_ranks_by_hand():
    # Mid-ranks (1 = best): public A 1, B 2.5, C 2.5, D 4; own B 1, A 2.5, C 2.5, D 4.
    assert mid_ranks(pairwise_orders(PUBLIC)).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert mid_ranks(pairwise_orders(OWN)).tolist() == [2.5, 1.0, 2.5, 4.0]
    # Centred: (-1.5, 0, 0, 1.5) and (0, -1.5, 0, 1.5): rho = 2.25 / 4.5 = 0.5.
    rho = spearman_rho(pairwise_orders(PUBLIC), pairwise_orders(OWN))
    assert rho == pytest.approx(0.5, abs=1e-15)
    assert rho == pytest.approx(spearmanr(PUBLIC, OWN).statistic, abs=1e-15)


def test_pairwise_agreement_and_same_winner_by_hand():
    # Same order for AD, BD, CD; different for AB (flip), AC (+ vs tie), BC (tie vs +): 3 of 6.
    assert pairwise_agreement(pairwise_orders(PUBLIC), pairwise_orders(OWN)) == 0.5
    assert same_winner(PUBLIC, OWN) == 0.0
    # Public top set {A, B}, own top set {A}: a uniform pick from each coincides half the time.
    assert same_winner(np.array([1.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])) == 0.5


def test_differences_within_tie_epsilon_are_ties():
    scores = np.array([0.5, 0.5 + 1e-12, 0.4])
    assert pairwise_orders(scores, tie_epsilon=1e-9)[0, 1] == 0
    assert pairwise_orders(scores, tie_epsilon=0.0)[0, 1] == -1
    assert mid_ranks(pairwise_orders(scores, tie_epsilon=1e-9)).tolist() == [1.5, 1.5, 3.0]


def test_all_tied_ranking_has_no_correlation():
    flat = pairwise_orders(np.array([0.3, 0.3, 0.3]))
    other = pairwise_orders(np.array([0.1, 0.2, 0.3]))
    assert np.isnan(kendall_tau_b(flat, other))
    assert np.isnan(spearman_rho(flat, other))


def test_vectorised_over_resamples_matches_scipy_row_by_row():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, size=(300, 5)).astype(float)
    y = rng.integers(0, 4, size=(300, 5)).astype(float)
    taus = kendall_tau_b(pairwise_orders(x), pairwise_orders(y))
    rhos = spearman_rho(pairwise_orders(x), pairwise_orders(y))
    for row in range(300):
        if np.ptp(x[row]) == 0 or np.ptp(y[row]) == 0:
            assert np.isnan(taus[row]) and np.isnan(rhos[row])
            continue
        assert taus[row] == pytest.approx(kendalltau(x[row], y[row]).statistic, abs=1e-12)
        assert rhos[row] == pytest.approx(spearmanr(x[row], y[row]).statistic, abs=1e-12)
