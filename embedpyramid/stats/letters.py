"""Compact letter display: groups of models that a set of pairwise tests cannot tell apart.

Given the models in display order (best first) and the pairs whose difference is significant,
assign letters so that two models share a letter exactly when their difference is *not*
significant — the "a / ab / b" notation of post-hoc tables. Computed with Piepho's
insert-and-absorb algorithm (Piepho 2004, "An algorithm for a letter-based representation of
all-pairwise comparisons", J. Comput. Graph. Stat. 13(2)):

1. start with one column holding every model;
2. for each significant pair (i, j), every column holding both is split in two: one without i,
   one without j;
3. after each split, drop columns that are contained in another column (absorb).

The columns left are the maximal sets of mutually indistinguishable models. Letters are given
to the columns in the order of their first (best-ranked) member, so the best model gets ``a``.
When non-significance is not transitive (A ~ B, B ~ C, A ≠ C) a model carries several letters
(``ab``), which is the point of the display.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence


def compact_letter_display(models: Sequence[str], significant: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Letters per model: models sharing a letter are not significantly different.

    ``models`` fixes the display order (e.g. by mean, best first; the first model's group gets
    ``a``). ``significant`` holds the unordered pairs whose difference is significant; a pair
    naming a model not in ``models`` is an error. With more groups than 26 letters, letters
    continue as ``A``..``Z``, then ``a1``, ``b1``, ...
    """
    order = {model: index for index, model in enumerate(models)}
    if len(order) != len(models):
        raise ValueError(f"models must be distinct; got {list(models)}")
    columns: list[frozenset[str]] = [frozenset(models)] if models else []
    for first, second in significant:
        unknown = [m for m in (first, second) if m not in order]
        if unknown:
            raise ValueError(f"pair ({first!r}, {second!r}) names models not in {list(models)}: {unknown}")
        if first == second:
            raise ValueError(f"a model cannot differ from itself: ({first!r}, {second!r})")
        split: list[frozenset[str]] = []
        for column in columns:
            if first in column and second in column:
                split += [column - {first}, column - {second}]
            else:
                split.append(column)
        columns = _absorb(split)
    ranked = sorted(columns, key=lambda column: sorted(order[m] for m in column))
    letters = {model: "" for model in models}
    for index, column in enumerate(ranked):
        for model in column:
            letters[model] += _letter(index)
    return letters


def _absorb(columns: list[frozenset[str]]) -> list[frozenset[str]]:
    """Drop empty columns, duplicates and columns contained in another column."""
    unique = list(dict.fromkeys(column for column in columns if column))
    return [column for column in unique if not any(column < other for other in unique)]


def _letter(index: int) -> str:
    alphabet = string.ascii_lowercase + string.ascii_uppercase
    cycle, position = divmod(index, len(alphabet))
    return alphabet[position] + (str(cycle) if cycle else "")
