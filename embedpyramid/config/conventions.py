"""The metric conventions: every choice that changes a number is a setting recorded beside it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Literal

GAIN_KINDS: tuple[str, ...] = ("linear", "exponential")
TIE_RULES: tuple[str, ...] = ("expected", "trec_eval", "doc_id")
QUERY_SETS: tuple[str, ...] = ("with_positive", "with_qrels")
PROTOCOLS: tuple[str, ...] = ("project", "mteb")
_RECORDED_WHEN_SET = ("queries", "top_k", "protocol", "mteb_version", "skip_first_result")


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

    - ``queries``: which queries are averaged. ``"with_positive"``: those with a qrel at or above
      the threshold (the others are excluded and listed); ``"with_qrels"``: every query with any
      qrel row, so a query whose qrels are all grade <= 0 scores 0 on every measure but Judged@k
      (what pytrec_eval, and so MTEB, averages over).
    - ``top_k``: when set, each query's run is first cut to its ``top_k`` documents by score
      descending then doc_id descending, *before* self-hits are dropped: MTEB searches its
      ``top_k`` (the largest of the task's ``k_values``) and only then drops the identical ids,
      so a query that retrieves itself keeps ``top_k - 1`` documents.
    - ``protocol``: ``"project"`` (the settings above, freely chosen) or ``"mteb"``: the bundle
      that reproduces MTEB's ``RetrievalEvaluator.evaluate`` (``mteb_version``, see
      :meth:`mteb`): linear gain, threshold 1, trec_eval's tie order, every query with qrels,
      the run cut at ``top_k``, self-hits dropped as the task's ``ignore_identical_ids`` says.
    - ``skip_first_result``: after the cut and the self-hits, each query's best-scored document
      is dropped (MTEB's task attribute of that name; ties for the first place go by doc_id
      descending here, by MTEB's result order there). Only under ``protocol: mteb``.

    Negative grades are judged non-relevant, as in trec_eval: gain 0, never relevant, but
    judged (they count for Judged@k). :meth:`as_dict` records ``queries``, ``top_k``,
    ``protocol`` and ``mteb_version`` only where they differ from their defaults, so the
    project's default conventions are recorded as they always were.
    """

    gain: Literal["linear", "exponential"] = "linear"
    relevance_threshold: int = 1
    drop_self_hits: bool = False
    ties: Literal["expected", "trec_eval", "doc_id"] = "expected"
    queries: Literal["with_positive", "with_qrels"] = "with_positive"
    top_k: int | None = None
    protocol: Literal["project", "mteb"] = "project"
    mteb_version: str | None = None
    skip_first_result: bool = False

    @classmethod
    def mteb(cls, *, drop_self_hits: bool, top_k: int, mteb_version: str,
             skip_first_result: bool = False) -> MetricConventions:
        """MTEB's conventions (``AbsTaskRetrieval`` and ``calculate_retrieval_scores`` of
        ``mteb_version``): pytrec_eval's measures (linear-gain ``ndcg_cut``, relevance level 1,
        ties by doc id descending) over every query that has qrels, the run cut at ``top_k``
        before ``ignore_identical_ids`` (``drop_self_hits``) drops self-hits, and then, where the
        task sets ``skip_first_result``, each query's first result."""
        return cls(gain="linear", relevance_threshold=1, drop_self_hits=drop_self_hits, ties="trec_eval",
                   queries="with_qrels", top_k=top_k, protocol="mteb", mteb_version=mteb_version,
                   skip_first_result=skip_first_result)

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
        if self.queries not in QUERY_SETS:
            raise ValueError(f"unknown queries rule {self.queries!r}; allowed values: {', '.join(QUERY_SETS)}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int)
                                       or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None (got {self.top_k!r})")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; allowed values: {', '.join(PROTOCOLS)}")
        if (self.protocol == "mteb") != (self.mteb_version is not None):
            raise ValueError("mteb_version names the mteb release of protocol 'mteb'; set both or neither")
        if self.skip_first_result and self.protocol != "mteb":
            raise ValueError("skip_first_result is MTEB's task attribute: it needs protocol 'mteb'")
        if self.protocol == "mteb":
            mteb = {"gain": "linear", "relevance_threshold": 1, "ties": "trec_eval", "queries": "with_qrels"}
            wrong = {name: getattr(self, name) for name, value in mteb.items() if getattr(self, name) != value}
            if wrong or self.top_k is None:
                raise ValueError(f"protocol 'mteb' fixes {mteb} and needs MTEB's top_k; got {wrong or 'top_k=None'}")

    def as_dict(self) -> dict[str, str | int | bool | None]:
        """Plain JSON-able dict, recorded in the manifest of every metric table; the MTEB-era
        settings (``queries``, ``top_k``, ``protocol``, ``mteb_version``) only when set."""
        defaults = {field.name: field.default for field in fields(self)}
        return {key: value for key, value in asdict(self).items()
                if key not in _RECORDED_WHEN_SET or value != defaults[key]}
