"""The HTTP generator: an OpenAI-compatible chat model answers from the numbered passages.

The prompt (:data:`SYSTEM_PROMPT`, :func:`user_message`) shows the passages as ``[1]`` .. ``[k]``
in rank order and asks for citations by number. Citations are read back from every bracketed
list of numbers in the reply (``[2]``, ``[1, 3]``): a number within 1..k cites that passage's
document id (first occurrence order, no repeats), any other is an invalid citation. The reply is
generated at temperature 0 and cached (:class:`~embedpyramid.downstream.chat.ChatEndpoint`),
keyed by the prompt version and the template's hash.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.chat import ChatEndpoint
from embedpyramid.downstream.context import Context
from embedpyramid.hashing import sha256_json

SYSTEM_PROMPT = (
    "You answer questions using only the numbered passages you are given. Cite every passage you use "
    "by its number in square brackets, e.g. [2]. If the passages do not answer the question, say so briefly."
)
_USER_TEMPLATE = "Question: {query}\n\nPassages:\n{passages}\n\nAnswer:"
_CITATION = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]")
_LOG = logging.getLogger(__name__)


def user_message(context: Context) -> str:
    passages = "\n".join(f"[{passage.rank}] {passage.text}" for passage in context.passages)
    return _USER_TEMPLATE.format(query=context.query, passages=passages)


def read_citations(text: str, doc_ids: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(valid doc ids, invalid markers)`` cited in ``text``, in order of first appearance."""
    valid: dict[str, None] = {}
    invalid: dict[str, None] = {}
    for group in _CITATION.finditer(text):
        for number in (int(n) for n in group.group(1).split(",")):
            if 1 <= number <= len(doc_ids):
                valid[doc_ids[number - 1]] = None
            else:
                invalid[f"[{number}]"] = None
    return tuple(valid), tuple(invalid)


class HttpGenerator:
    def __init__(self, endpoint: ChatEndpoint, *, max_tokens: int, prompt_version: str):
        self.endpoint, self.max_tokens = endpoint, max_tokens
        self.prompt = {"version": prompt_version, "template_sha256": sha256_json([SYSTEM_PROMPT, _USER_TEMPLATE])}

    def describe(self) -> dict[str, Any]:
        return {"kind": "http", **self.endpoint.describe(), "max_tokens": self.max_tokens, "prompt": self.prompt}

    def answer(self, context: Context) -> Answer:
        if not context.passages:
            return Answer(context.query_id, "")
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_message(context)}]
        reply = self.endpoint.complete(messages, max_tokens=self.max_tokens, prompt=self.prompt,
                                       context=f"generator, query {context.query_id}")
        if reply.content is None:
            _LOG.warning("generator: query %s: malformed reply recorded (%s)", context.query_id, reply.malformed)
            return Answer(context.query_id, "", malformed=reply.malformed)
        text = reply.content.strip()
        valid, invalid = read_citations(text, context.doc_ids)
        return Answer(context.query_id, text, valid, invalid)
