"""Answer and citation metrics that need no judge, per query.

With ``R`` the query's documents judged relevant (grade >= the relevance threshold), ``C`` the
context's documents and ``S`` the answer's citations (valid and invalid ones):

- ``answer:citation_precision`` = |S ∩ R| / |S|, and 0 when the answer cites nothing (an
  uncited answer is unsupported); an invalid citation (naming no passage of the context) is
  never relevant;
- ``answer:citation_recall`` = |S ∩ R| / |R|;
- ``context:recall`` = |C ∩ R| / |R|, the ceiling of citation recall (with the context being
  the run's top-k, it equals the run's Recall@k);
- where the query has gold answers ``G`` (see :mod:`embedpyramid.data.gold_answers`):
  ``answer:contains_gold`` = 1 when some normalized gold answer occurs in the normalized answer
  (SQuAD normalization, :func:`~embedpyramid.downstream.text.normalize_answer`), else 0; and
  ``answer:token_f1`` = max over G of the SQuAD token F1 between answer and gold answer
  (Rajpurkar et al. 2016).

As for the retrieval metrics, queries without a relevant document are excluded (and counted by
the caller); citation metrics are in the spirit of ALCE (Gao et al. 2023, "Enabling Large
Language Models to Generate Text with Citations"), with the qrels standing in for entailment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from embedpyramid.downstream.answers import Answer
from embedpyramid.downstream.text import normalize_answer

CITATION_PRECISION = "answer:citation_precision"
CITATION_RECALL = "answer:citation_recall"
CONTEXT_RECALL = "context:recall"
CONTAINS_GOLD = "answer:contains_gold"
TOKEN_F1 = "answer:token_f1"


def citation_precision(cited: Sequence[str], relevant: Collection[str]) -> float:
    return sum(doc_id in relevant for doc_id in cited) / len(cited) if cited else 0.0


def set_recall(found: Collection[str], relevant: Collection[str]) -> float:
    if not relevant:
        raise ValueError("recall needs at least one relevant document")
    return len(set(found) & set(relevant)) / len(set(relevant))


def contains_gold(answer: str, gold_answers: Sequence[str]) -> float:
    normalized = f" {normalize_answer(answer)} "
    return float(any(gold and f" {gold} " in normalized for gold in map(normalize_answer, gold_answers)))


def token_f1(answer: str, gold_answers: Sequence[str]) -> float:
    predicted = normalize_answer(answer).split()
    best = 0.0
    for gold in gold_answers:
        reference = normalize_answer(gold).split()
        common = sum((Counter(predicted) & Counter(reference)).values())
        if common:
            precision, recall = common / len(predicted), common / len(reference)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def answer_metrics(
    answer: Answer, context_doc_ids: Sequence[str], relevant: Collection[str], gold_answers: Sequence[str] | None
) -> dict[str, float]:
    """Every metric of one answered query (``relevant`` non-empty; ``gold_answers`` None when the
    dataset has none for this query)."""
    cited = [*answer.citations, *answer.invalid_citations]
    values = {
        CITATION_PRECISION: citation_precision(cited, relevant),
        CITATION_RECALL: set_recall(answer.citations, relevant),
        CONTEXT_RECALL: set_recall(context_doc_ids, relevant),
    }
    if gold_answers:
        values[CONTAINS_GOLD] = contains_gold(answer.text, gold_answers)
        values[TOKEN_F1] = token_f1(answer.text, gold_answers)
    return values
