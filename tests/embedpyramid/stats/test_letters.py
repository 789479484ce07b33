import itertools

import pytest

from embedpyramid.stats.letters import compact_letter_display


def test_no_significant_pair_puts_every_model_in_one_group():
    assert compact_letter_display(["a", "b", "c"], []) == {"a": "a", "b": "a", "c": "a"}


def test_every_pair_significant_gives_each_model_its_own_letter():
    models = ["m1", "m2", "m3"]
    assert compact_letter_display(models, itertools.combinations(models, 2)) == {"m1": "a", "m2": "b", "m3": "c"}


def test_non_transitive_overlap_gives_the_middle_model_two_letters():
    # best > middle > worst; only best vs worst is significant.
    assert compact_letter_display(["best", "middle", "worst"], [("worst", "best")]) == {
        "best": "a", "middle": "ab", "worst": "b"}


def test_textbook_example_four_treatments():
    # Piepho (2004), the pattern of four treatments where A≠C, A≠D, B≠D: groups {A,B}, {B,C}, {C,D}.
    letters = compact_letter_display(["A", "B", "C", "D"], [("A", "C"), ("A", "D"), ("B", "D")])
    assert letters == {"A": "a", "B": "ab", "C": "bc", "D": "c"}


def test_letters_encode_exactly_the_non_significant_pairs():
    models = [f"m{i}" for i in range(6)]
    significant = {("m0", "m3"), ("m0", "m4"), ("m0", "m5"), ("m1", "m5"), ("m2", "m5"), ("m1", "m4")}
    letters = compact_letter_display(models, significant)
    for first, second in itertools.combinations(models, 2):
        share = bool(set(letters[first]) & set(letters[second]))
        assert share == ((first, second) not in significant), (first, second, letters)


def test_bad_pairs_are_refused():
    with pytest.raises(ValueError, match="not in"):
        compact_letter_display(["a", "b"], [("a", "z")])
    with pytest.raises(ValueError, match="itself"):
        compact_letter_display(["a", "b"], [("a", "a")])
