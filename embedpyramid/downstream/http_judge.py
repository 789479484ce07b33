"""The HTTP judge: an OpenAI-compatible chat model grades each answer 1-5 on the configured
criteria and says why, at temperature 0.

The prompt (:data:`SYSTEM_TEMPLATE`, :func:`user_message`) defines every criterion, shows the
question, the numbered passages with their document ids, and the answer with its citations, and
asks for one JSON object ``{"<criterion>": <1-5>, ..., "rationale": "..."}``. Replies are cached
(:class:`~embedpyramid.downstream.chat.ChatEndpoint`) under a key that holds the prompt version
and the hash of the templates and criterion definitions. A reply without valid grades is a
*malformed* judgement: its text is kept (redacted), it is counted and logged, and the query gets
no grades for that model — never a made-up grade.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.chat import ChatEndpoint
from embedpyramid.downstream.context import Context
from embedpyramid.downstream.judge import Judgement, MalformedGrades, parse_grades
from embedpyramid.hashing import sha256_json

SYSTEM_TEMPLATE = (
    "You grade the answers of a retrieval-augmented question answering system. Grade each criterion "
    "with an integer from 1 (worst) to 5 (best):\n{criteria}\n"
    "Reply with one JSON object and nothing else: {{{fields}, \"rationale\": \"<one or two sentences>\"}}"
)
_USER_TEMPLATE = "Question: {query}\n\nPassages:\n{passages}\n\nAnswer: {answer}\n\nCited passages: {citations}"
RESPONSE_CHARS = 2000
_LOG = logging.getLogger(__name__)


def system_message(criteria: Sequence[str], descriptions: Mapping[str, str]) -> str:
    lines = "\n".join(f"- {criterion}: {descriptions[criterion]}" for criterion in criteria)
    fields = ", ".join(f'"{criterion}": <1-5>' for criterion in criteria)
    return SYSTEM_TEMPLATE.format(criteria=lines, fields=fields)


def user_message(context: Context, answer: Answer) -> str:
    passages = "\n".join(f"[{p.rank}] (document {p.doc_id}) {p.text}" for p in context.passages) or "(none)"
    cited = ", ".join([*answer.citations, *answer.invalid_citations]) or "(none)"
    return _USER_TEMPLATE.format(query=context.query, passages=passages, answer=answer.text or "(empty)",
                                 citations=cited)


class HttpJudge:
    def __init__(self, endpoint: ChatEndpoint, criteria: Sequence[str], descriptions: Mapping[str, str], *,
                 max_tokens: int, prompt_version: str):
        self.endpoint, self.criteria, self.max_tokens = endpoint, tuple(criteria), max_tokens
        self.system = system_message(self.criteria, descriptions)
        self.prompt = {"version": prompt_version, "template_sha256": sha256_json([self.system, _USER_TEMPLATE])}

    def describe(self) -> dict[str, Any]:
        return {"kind": "http", **self.endpoint.describe(), "criteria": list(self.criteria),
                "max_tokens": self.max_tokens, "prompt": self.prompt}

    def judge(self, context: Context, answer: Answer) -> Judgement:
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": user_message(context, answer)}]
        reply = self.endpoint.complete(messages, max_tokens=self.max_tokens, prompt=self.prompt,
                                       context=f"judge, query {context.query_id}")
        if reply.content is None:
            return self._malformed(context.query_id, reply.malformed or "no content", "")
        try:
            grades, rationale = parse_grades(reply.content, self.criteria)
        except MalformedGrades as error:
            return self._malformed(context.query_id, str(error), reply.content)
        return Judgement(context.query_id, grades, rationale, response=reply.content[:RESPONSE_CHARS])

    def _malformed(self, query_id: str, reason: str, response: str) -> Judgement:
        reason = self.endpoint.redact(reason)
        _LOG.warning("judge: query %s: malformed reply recorded (%s)", query_id, reason)
        return Judgement(query_id, malformed=reason, response=self.endpoint.redact(response)[:RESPONSE_CHARS])
