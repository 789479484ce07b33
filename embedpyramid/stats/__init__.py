"""Paired statistics over per-query deltas: bootstrap intervals, sign-flip tests, Holm, W/T/L,
the compact letter display of pairwise decisions, and the paired bootstrap of a whole-set
statistic (a correlation, an AP, a clustering score)."""

from embedpyramid.stats.bootstrap import BootstrapResult, paired_bootstrap
from embedpyramid.stats.letters import compact_letter_display
from embedpyramid.stats.multiple import holm_adjust
from embedpyramid.stats.paired import win_tie_loss
from embedpyramid.stats.randomization import paired_sign_flip_test
from embedpyramid.stats.statistic import StatisticComparison, paired_statistic_bootstrap

__all__ = [
    "BootstrapResult",
    "StatisticComparison",
    "compact_letter_display",
    "holm_adjust",
    "paired_bootstrap",
    "paired_sign_flip_test",
    "paired_statistic_bootstrap",
    "win_tie_loss",
]
