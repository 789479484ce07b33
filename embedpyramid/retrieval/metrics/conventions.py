"""The metric conventions: every choice that changes a number is a setting recorded beside it."""

from dataclasses import asdict, dataclass
from typing import Literal

GAIN_KINDS: tuple[str, ...] = ("linear", "exponential")
TIE_RULES: tuple[str, ...] = ("expected", "trec_eval", "doc_id")


@dataclass(frozen=True)
class MetricConventions:
    """How qrels and runs are turned into metric values (DESIGN.md, "Metric conventions").

    - ``gain``: nDCG gain of a judged grade g > 0: ``"linear"`` = g (trec_eval), ``"exponential"``
      = 2^g - 1. Grades <= 0 and unjudged documents have gain 0.
    - ``relevance_threshold``: binary measures (Recall, Hit, MRR, MAP, P, RPrec) count a
      document relevant when its grade is >= this (trec_eval ``-l``). A query is evaluated only
      when it has at least one such qrel; nDCG gains do not depend on the threshold.
    - ``drop_self_hits``: drop run rows whose doc_id equals the query_id before cutting (for
      datasets where queries are also documents).
    - ``ties``: how documents with equal scores are ordered. ``"expected"``: every measure is
      its expected value over all orderings of the tied documents (McSherry & Najork, ECIR
      2008), so renaming documents never changes a number and a constant scorer scores what a
      random ranking would; ``"trec_eval"``: trec_eval's order, score descending then doc_id
      descending; ``"doc_id"``: score descending then doc_id ascending.

    Negative grades are judged non-relevant, as in trec_eval: gain 0, never relevant, but
    judged (they count for Judged@k).
    """

    gain: Literal["linear", "exponential"] = "linear"
    relevance_threshold: int = 1
    drop_self_hits: bool = False
    ties: Literal["expected", "trec_eval", "doc_id"] = "expected"

    def __post_init__(self) -> None:
        if self.gain not in GAIN_KINDS:
            raise ValueError(
                f"unknown gain {self.gain!r}; allowed values: {', '.join(GAIN_KINDS)}"
            )
        threshold = self.relevance_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(
                f"relevance_threshold must be an integer >= 1 (got {threshold!r}); "
                "unjudged documents are non-relevant, so a threshold below 1 would treat "
                "judged non-relevant documents differently from unjudged ones"
            )
        if self.ties not in TIE_RULES:
            raise ValueError(f"unknown ties rule {self.ties!r}; allowed values: {', '.join(TIE_RULES)}")
        if not isinstance(self.drop_self_hits, bool):
            raise ValueError(
                f"drop_self_hits must be True or False (got {self.drop_self_hits!r})"
            )

    def as_dict(self) -> dict[str, str | int | bool]:
        """Plain JSON-able dict, recorded in the manifest of every metric table."""
        return asdict(self)
