import pytest

from embedpyramid.downstream import Answer, answer_metrics
from embedpyramid.downstream.answer_metrics import contains_gold, token_f1


def test_citation_and_context_metrics_by_hand():
    answer = Answer("q", "text", citations=("a", "x"), invalid_citations=("[9]",))
    values = answer_metrics(answer, ["a", "x", "b", "y", "z"], {"a", "b", "c", "d"}, None)
    assert values == {
        "answer:citation_precision": 1 / 3,  # a of (a, x, [9])
        "answer:citation_recall": 1 / 4,  # a of (a, b, c, d)
        "context:recall": 2 / 4,  # a, b in the context
    }


def test_an_uncited_answer_has_zero_citation_precision():
    values = answer_metrics(Answer("q", "text"), ["a"], {"a"}, None)
    assert values["answer:citation_precision"] == 0.0 and values["context:recall"] == 1.0
    with pytest.raises(ValueError, match="at least one relevant"):
        answer_metrics(Answer("q", "text"), ["a"], set(), None)


def test_gold_answer_containment_and_token_f1_use_squad_normalization():
    gold = ["The Eiffel Tower!", "in Paris"]
    assert contains_gold("It is the eiffel tower, of course.", gold) == 1.0
    assert contains_gold("Eiffel Towers", gold) == 0.0  # whole words only
    # answer "paris france" vs "in paris": 1 common token, precision 1/2, recall 1/2 -> F1 0.5;
    # vs "eiffel tower": none in common.
    assert token_f1("Paris, France.", gold) == 0.5
    values = answer_metrics(Answer("q", "It is the Eiffel Tower", ("a",)), ["a"], {"a"}, gold)
    assert values["answer:contains_gold"] == 1.0
    # "it is eiffel tower" vs "eiffel tower": precision 2/4, recall 2/2 -> F1 2/3
    assert values["answer:token_f1"] == pytest.approx(2 / 3)
