import pytest

from embedpyramid.downstream import MalformedGrades, parse_grades

CRITERIA = ["relevance", "coverage"]


@pytest.mark.parametrize("reply", [
    '{"relevance": 4, "coverage": 2, "rationale": "ok"}',
    '```json\n{"relevance": 4, "coverage": 2.0, "rationale": "ok"}\n```',
    'Here are the grades: {"relevance": 4, "coverage": 2, "rationale": "ok"} Thanks.',
])
def test_grades_are_read_from_plain_fenced_or_wrapped_json(reply):
    assert parse_grades(reply, CRITERIA) == ({"relevance": 4, "coverage": 2}, "ok")


@pytest.mark.parametrize(("reply", "reason"), [
    ("I would say four.", "no JSON object"),
    ('{"relevance": 4, "coverage": }', "does not parse"),
    ('{"relevance": 4}', "no grade for coverage"),
    ('{"relevance": 4.5, "coverage": 2}', "relevance = 4.5 is not an integer grade"),
    ('{"relevance": "4", "coverage": 2}', "relevance = '4'"),
    ('{"relevance": true, "coverage": 2}', "relevance = True"),
    ('{"relevance": 6, "coverage": 0}', "relevance = 6"),
])
def test_replies_without_valid_grades_say_what_is_wrong(reply, reason):
    with pytest.raises(MalformedGrades, match=reason):
        parse_grades(reply, CRITERIA)


def test_a_missing_rationale_is_empty_and_a_long_one_is_cut():
    assert parse_grades('{"relevance": 1, "coverage": 1}', CRITERIA)[1] == ""
    assert len(parse_grades('{"relevance": 1, "coverage": 1, "rationale": "' + "x" * 900 + '"}', CRITERIA)[1]) == 500
