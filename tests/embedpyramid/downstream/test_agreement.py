import math

import polars as pl
import pytest

from embedpyramid.downstream import judge_agreement, weighted_kappa

# Contingency table [[2, 1, 0], [0, 2, 1], [0, 0, 4]] over grades 1..3.
JUDGE = [1, 1, 1, 2, 2, 2, 3, 3, 3, 3]
REFERENCE = [1, 1, 2, 2, 2, 3, 3, 3, 3, 3]


def test_weighted_kappa_by_hand():
    # Linear: observed disagreement sum |i-j| O = 2 / 10; expected from margins (3, 3, 4) x (2, 3, 5):
    # (1*3*3 + 2*3*5 + 1*3*2 + 1*3*5 + 2*4*2 + 1*4*3) / 100 = 0.88 -> kappa = 1 - 0.2 / 0.88.
    assert weighted_kappa(JUDGE, REFERENCE, "linear") == pytest.approx(1 - 0.2 / 0.88)
    # Quadratic: (1 + 1) / 10 against (9 + 60 + 6 + 15 + 32 + 12) / 100 = 1.34.
    assert weighted_kappa(JUDGE, REFERENCE, "quadratic") == pytest.approx(1 - 0.2 / 1.34)
    assert weighted_kappa(JUDGE, JUDGE) == pytest.approx(1.0)


def test_kappa_is_undefined_when_both_raters_never_vary_and_bad_grades_are_refused():
    assert math.isnan(weighted_kappa([3, 3], [3, 3]))
    with pytest.raises(ValueError, match="from 1 to 5"):
        weighted_kappa([0, 3], [1, 3])
    with pytest.raises(ValueError, match="same positive number"):
        weighted_kappa([1], [1, 2])


def test_judge_agreement_per_criterion_skips_rows_without_both_grades():
    rows = pl.DataFrame({
        "criterion": ["relevance"] * 11 + ["coverage"] * 2,
        "grade": [*JUDGE, None, 5, 1],
        "reference_grade": [*REFERENCE, 4, 5, 1],
    })
    table = judge_agreement(rows)
    assert table["criterion"].to_list() == ["relevance", "coverage"]
    assert table["n"].to_list() == [10, 2]
    assert table["kappa"].to_list() == pytest.approx([1 - 0.2 / 0.88, 1.0])
