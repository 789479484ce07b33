"""Paired statistics over per-query deltas: bootstrap intervals, sign-flip and t tests, effect
sizes, Holm and Benjamini–Hochberg adjustments, W/T/L, power, the randomized Tukey HSD and the
compact letter display of pairwise decisions, and the paired bootstrap of a whole-set statistic
(a correlation, an AP, a clustering score)."""

from embedpyramid.stats.bootstrap import INTERVAL_METHODS, BootstrapResult, paired_bootstrap
from embedpyramid.stats.effect_size import cohens_dz
from embedpyramid.stats.hsd import TukeyHSD, randomized_tukey_hsd
from embedpyramid.stats.letters import compact_letter_display
from embedpyramid.stats.multiple import benjamini_hochberg_adjust, holm_adjust
from embedpyramid.stats.paired import win_tie_loss
from embedpyramid.stats.power import minimum_detectable_effect, paired_power, queries_needed
from embedpyramid.stats.randomization import paired_sign_flip_test, sign_flip_mc_error
from embedpyramid.stats.statistic import StatisticComparison, paired_statistic_bootstrap
from embedpyramid.stats.t_test import TTestResult, paired_t_test

__all__ = [
    "INTERVAL_METHODS",
    "BootstrapResult",
    "StatisticComparison",
    "TTestResult",
    "TukeyHSD",
    "benjamini_hochberg_adjust",
    "cohens_dz",
    "compact_letter_display",
    "holm_adjust",
    "minimum_detectable_effect",
    "paired_bootstrap",
    "paired_power",
    "paired_sign_flip_test",
    "paired_statistic_bootstrap",
    "paired_t_test",
    "queries_needed",
    "randomized_tukey_hsd",
    "sign_flip_mc_error",
    "win_tie_loss",
]
