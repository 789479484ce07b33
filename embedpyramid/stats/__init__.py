"""Paired statistics over per-query deltas: bootstrap intervals, sign-flip tests, Holm, W/T/L,
and the compact letter display of pairwise decisions."""

from embedpyramid.stats.bootstrap import BootstrapResult, paired_bootstrap
from embedpyramid.stats.letters import compact_letter_display
from embedpyramid.stats.multiple import holm_adjust
from embedpyramid.stats.paired import win_tie_loss
from embedpyramid.stats.randomization import paired_sign_flip_test

__all__ = [
    "BootstrapResult",
    "compact_letter_display",
    "holm_adjust",
    "paired_bootstrap",
    "paired_sign_flip_test",
    "win_tie_loss",
]
