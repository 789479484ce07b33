"""Retrieval measures as values: ``"nDCG@10"`` is parsed once into a small immutable object."""

import re
from collections.abc import Sequence
from dataclasses import dataclass

MEASURE_NAMES: tuple[str, ...] = (
    "Recall", "Hit", "MRR", "MAP", "nDCG", "P", "CompleteEvidence", "Judged", "RPrec",
)
"""Canonical measure names, in the order used by :func:`default_measures`."""

_UNCUT_NAMES = frozenset({"RPrec"})  # never a cutoff: the depth is the query's R
_OPTIONALLY_CUT_NAMES = frozenset({"MRR"})  # "MRR" alone reads the whole run (uncut)
_CANONICAL_BY_LOWER = {name.lower(): name for name in MEASURE_NAMES}
_MEASURE_TEXT = re.compile(r"\s*(?P<name>[A-Za-z]+)(?:@(?P<cutoff>[0-9]+))?\s*")


@dataclass(frozen=True)
class Measure:
    """One retrieval measure and its cutoff; ``str(measure)`` is its canonical name in tables.

    ``Measure("nDCG", 10)`` prints as ``nDCG@10``; ``Measure("RPrec")`` prints as ``RPrec``.
    RPrec takes no cutoff (its depth is the query's number of relevant documents); MRR takes an
    optional one (``MRR`` alone is the reciprocal rank over the whole run, trec_eval's
    ``recip_rank``); every other measure needs a positive integer cutoff.
    """

    name: str
    cutoff: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MEASURE_NAMES:
            raise ValueError(
                f"unknown measure name {self.name!r}; allowed names: {', '.join(MEASURE_NAMES)}"
            )
        if self.name in _UNCUT_NAMES:
            if self.cutoff is not None:
                raise ValueError(
                    f"{self.name} takes no cutoff (got {self.cutoff!r}); write it as {self.name!r}"
                )
        elif self.cutoff is None and self.name in _OPTIONALLY_CUT_NAMES:
            return
        elif (
            isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff < 1
        ):
            raise ValueError(
                f"{self.name} needs a cutoff that is a positive integer (got {self.cutoff!r}), "
                f"e.g. {self.name}@10"
            )

    def __str__(self) -> str:
        return self.name if self.cutoff is None else f"{self.name}@{self.cutoff}"


def parse_measure(text: str) -> Measure:
    """Parse a canonical measure string such as ``"nDCG@10"``, ``"p@5"`` or ``"RPrec"``.

    Names are matched case-insensitively; the cutoff must be a positive integer written in
    decimal digits. Raises ``ValueError`` naming the string and what is allowed.
    """
    match = _MEASURE_TEXT.fullmatch(text)
    name = _CANONICAL_BY_LOWER.get(match["name"].lower()) if match else None
    if match is None or name is None:
        cut_names = ", ".join(n for n in MEASURE_NAMES if n not in _UNCUT_NAMES)
        raise ValueError(
            f"cannot parse measure {text!r}: expected NAME@k with NAME one of {cut_names} "
            f"(case-insensitive) and k a positive integer, or one of "
            f"{', '.join(sorted(_UNCUT_NAMES | _OPTIONALLY_CUT_NAMES))} without a cutoff"
        )
    cutoff = None if match["cutoff"] is None else int(match["cutoff"])
    try:
        return Measure(name, cutoff)
    except ValueError as error:
        raise ValueError(f"cannot parse measure {text!r}: {error}") from None


def default_measures(k_values: Sequence[int]) -> list[Measure]:
    """Recall, Hit, MRR, MAP, nDCG, P, CompleteEvidence and Judged at every distinct k
    (ascending), then RPrec and the uncut MRR."""
    if not k_values:
        raise ValueError("k_values is empty; give at least one cutoff, e.g. (1, 5, 10)")
    cutoffs = sorted(set(k_values))
    return [
        Measure(name, k) for name in MEASURE_NAMES if name not in _UNCUT_NAMES for k in cutoffs
    ] + [Measure("RPrec"), Measure("MRR")]
