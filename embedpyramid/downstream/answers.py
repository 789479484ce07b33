"""Answers with citations, and the interface every generator implements.

A generator turns a :class:`~embedpyramid.downstream.context.Context` into an :class:`Answer`:
the text and the passages it cites, by document id. A citation that names no passage of the
context is kept apart in ``invalid_citations`` (it counts against citation precision); a reply
that could not be read at all is recorded with ``malformed`` set, never dropped, and gets no
answer metrics or grades.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from embedpyramid.downstream.context import Context


@dataclass(frozen=True)
class Answer:
    query_id: str
    text: str
    citations: tuple[str, ...] = ()
    invalid_citations: tuple[str, ...] = ()
    malformed: str | None = None


class Generator(Protocol):
    def describe(self) -> dict[str, Any]:
        """What identifies the generator's answers (kind, model, prompt version and hash); JSON-able,
        recorded beside the numbers, never holding a secret."""
        ...

    def answer(self, context: Context) -> Answer: ...
