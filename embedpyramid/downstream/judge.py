"""The judge interface: given the query, the context and the answer, 1-5 grades on named
criteria and a short rationale.

A :class:`Judgement` always comes back, whatever happened: with ``grades`` for every criterion;
or with ``malformed`` set (the judge answered, but not with readable grades: the raw reply is
kept in ``response`` and the case is counted); or with ``skipped`` set (nothing to grade: no
relevant document for the qrels judge, an unreadable generator reply). Nothing is dropped
silently. :func:`parse_grades` reads the JSON reply of an LLM judge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.context import Context

GRADES = range(1, 6)
RATIONALE_CHARS = 500
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def judge_metric(criterion: str) -> str:
    """The per-query metric name of a criterion's grade, e.g. ``judge:relevance``."""
    return f"judge:{criterion}"


@dataclass(frozen=True)
class Judgement:
    query_id: str
    grades: Mapping[str, int] = field(default_factory=dict)
    rationale: str = ""
    malformed: str | None = None
    skipped: str | None = None
    response: str = ""


class Judge(Protocol):
    criteria: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        """What identifies the grades (kind, model, prompt version and hash, criteria); JSON-able,
        never holding a secret."""
        ...

    def judge(self, context: Context, answer: Answer) -> Judgement: ...


class MalformedGrades(ValueError):
    """A judge reply that holds no valid grades; the message says what was wrong."""


def parse_grades(text: str, criteria: Sequence[str]) -> tuple[dict[str, int], str]:
    """``(grades, rationale)`` from a reply holding one JSON object ``{"<criterion>": 1..5, ...,
    "rationale": "..."}``, possibly inside a Markdown code fence or surrounded by prose.

    A grade must be an integer 1-5 (``4`` or ``4.0``; not ``4.5``, ``"4"`` or ``true``); every
    criterion must be present. The rationale is optional and cut to 500 characters.
    """
    stripped = _FENCE.sub("", text.strip())
    match = _OBJECT.search(stripped)
    if match is None:
        raise MalformedGrades("no JSON object in the reply")
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError as error:
        raise MalformedGrades(f"the JSON object does not parse ({error.msg})") from None
    if not isinstance(value, dict):
        raise MalformedGrades("the reply's JSON is not an object")
    missing = [criterion for criterion in criteria if criterion not in value]
    if missing:
        raise MalformedGrades(f"no grade for {', '.join(missing)}")
    grades = {}
    for criterion in criteria:
        grade = value[criterion]
        integral = isinstance(grade, int | float) and not isinstance(grade, bool) and float(grade).is_integer()
        if not integral or int(grade) not in GRADES:
            raise MalformedGrades(f"{criterion} = {grade!r} is not an integer grade from 1 to 5")
        grades[criterion] = int(grade)
    rationale = value.get("rationale", "")
    return grades, (rationale if isinstance(rationale, str) else json.dumps(rationale))[:RATIONALE_CHARS]
