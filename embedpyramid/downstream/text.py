"""Word tokens, sentences and answer normalization shared by the extractive generator and the
answer metrics, so that both read text the same way.

- words: maximal runs of Unicode word characters, lowercased (``\\w+``);
- sentences: a passage split after ``.``, ``!`` or ``?`` followed by white space, and at line
  breaks; empty pieces are dropped;
- answer normalization (SQuAD v1.1 evaluation script, Rajpurkar et al. 2016): lowercase, drop
  punctuation, drop the articles a/an/the, collapse white space.
"""

from __future__ import annotations

import re
import string

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def word_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def sentences(text: str) -> list[str]:
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def normalize_answer(text: str) -> str:
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())
