"""The kinds of L5 system ``systems.yaml`` declares, one settings model each: ``bm25`` (with its
tokenizer), ``rrf`` and ``weighted`` fusion, ``cross-encoder`` and ``bi-encoder`` rerank. What a
system's settings mean is here; how the file is read, checked and hashed is
:mod:`embedpyramid.config.systems`'.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from embedpyramid.config.base import Strict
from embedpyramid.config.measures import parse_measure
from embedpyramid.config.models import HubSource, PackageSource, PathSource

BM25S_STOPWORD_LISTS = frozenset({
    "english", "en", "english_plus", "en_plus", "german", "de", "dutch", "nl", "french", "fr", "spanish", "es",
    "portuguese", "pt", "italian", "it", "russian", "ru", "swedish", "sv", "norwegian", "no", "chinese", "zh",
    "turkish", "tr", "korean", "ko", "danish", "da",
})
"""The stopword list names ``bm25s`` accepts (``bm25s.tokenization._infer_stopwords``): validating a
config checks them here, without importing bm25s (and numpy, scipy) on every command; a test
holds the set to what the installed bm25s accepts."""


class Bm25Tokenizer(Strict):
    """How texts become BM25 terms, with ``bm25s.tokenize``: lowercase (``lower``), split with
    the regex ``token_pattern`` (bm25s's default keeps words of two or more word characters),
    drop ``stopwords`` (a bm25s list name such as ``en``, an explicit list, or null), then stem
    with the PyStemmer (Snowball) algorithm ``stemmer`` (null: no stemming)."""

    lower: bool = True
    token_pattern: str = r"(?u)\b\w\w+\b"
    stopwords: str | tuple[str, ...] | None = "en"
    stemmer: str | None = "english"

    @field_validator("token_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"token_pattern {value!r} is not a valid regular expression: {error}") from None
        return value

    @field_validator("stopwords")
    @classmethod
    def _known_stopwords(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if isinstance(value, str) and value not in BM25S_STOPWORD_LISTS:
            raise ValueError(
                f"stopwords {value!r} is not a bm25s stopword list; use a language code such as 'en', 'de', "
                "'fr', an explicit list of words, or null"
            )
        return value

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, value: str | None) -> str | None:
        if value is not None:
            import Stemmer

            algorithms = Stemmer.algorithms()
            if value not in algorithms:
                raise ValueError(f"stemmer {value!r} is not a PyStemmer algorithm; allowed: {', '.join(algorithms)}")
        return value


class Bm25System(Strict):
    """BM25 over the frozen corpus (``title + " " + text``); see :mod:`embedpyramid.systems.bm25`
    for the exact scoring formula of each ``method``. ``delta`` is used by bm25l and bm25+ only."""

    kind: Literal["bm25"]
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    delta: float = Field(0.5, ge=0)
    tokenizer: Bm25Tokenizer = Field(default_factory=Bm25Tokenizer)

    def references(self) -> tuple[str, ...]:
        return ()

    def identity(self) -> dict[str, Any]:
        identity = self.model_dump(mode="json")
        if self.method not in ("bm25l", "bm25+"):
            identity.pop("delta")
        return identity


class _FusionBase(Strict):
    inputs: tuple[str, ...] = Field(min_length=2)
    depth: int | None = Field(None, ge=1)

    @field_validator("inputs")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"inputs must be distinct, got {list(value)}")
        return value

    def references(self) -> tuple[str, ...]:
        return self.inputs

    def identity(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class RrfSystem(_FusionBase):
    """Reciprocal rank fusion: each input's top ``depth`` candidates (default ``settings.depth``)
    contribute ``1 / (k + rank)``."""

    kind: Literal["rrf"]
    k: float = Field(60, ge=0)


class WeightedSystem(_FusionBase):
    """Weighted score fusion after per-query ``minmax`` or ``zscore`` normalization.

    ``weights`` (one per input, non-negative, summing to 1; default equal) apply unless the
    dataset has a dev split (``settings.dev_datasets``) and ``sweep`` is given: then the first
    input's weight w (the second's 1 − w; two inputs only) is the sweep value with the best
    mean ``tune_metric`` on the dev split, and the test split is never looked at.
    """

    kind: Literal["weighted"]
    normalization: Literal["minmax", "zscore"] = "minmax"
    weights: tuple[float, ...] | None = None
    sweep: tuple[float, ...] | None = None
    tune_metric: str = "nDCG@10"

    @model_validator(mode="after")
    def _weights(self) -> WeightedSystem:
        if self.weights is not None:
            if len(self.weights) != len(self.inputs):
                raise ValueError(f"weights has {len(self.weights)} values for {len(self.inputs)} inputs; give one per input")
            if any(w < 0 for w in self.weights) or abs(sum(self.weights) - 1.0) > 1e-9:
                raise ValueError(f"weights must be non-negative and sum to 1, got {list(self.weights)}")
        if self.sweep is not None:
            if len(self.inputs) != 2:
                raise ValueError("sweep tunes the first input's weight w (the second gets 1 - w): it needs exactly two inputs")
            if not self.sweep or any(not 0.0 <= w <= 1.0 for w in self.sweep) or list(self.sweep) != sorted(set(self.sweep)):
                raise ValueError(f"sweep values must lie in [0, 1] and strictly increase, got {list(self.sweep)}")
        parse_measure(self.tune_metric)
        return self

    def fixed_weights(self) -> tuple[float, ...]:
        """The weights used without a dev split: ``weights``, or equal weights."""
        return self.weights if self.weights is not None else tuple(1.0 / len(self.inputs) for _ in self.inputs)


class _RerankBase(Strict):
    first_stage: str
    top_n: int = Field(100, ge=1)

    def references(self) -> tuple[str, ...]:
        return (self.first_stage,)


class CrossEncoderSystem(_RerankBase):
    """The first stage's top ``top_n`` rescored by a CrossEncoder on (query text, document text)
    pairs. ``max_length`` (tokens per pair) changes scores and is hashed; ``batch_size`` is not."""

    kind: Literal["cross-encoder"]
    source: PackageSource | PathSource | HubSource
    max_length: int | None = Field(None, ge=1)
    batch_size: int = Field(32, ge=1)

    def identity(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"batch_size"})


class BiEncoderSystem(_RerankBase):
    """The first stage's top ``top_n`` rescored by the inner product of another card's (``by``)
    query and document vectors. Not evaluated for the model it reranks by."""

    kind: Literal["bi-encoder"]
    by: str

    def identity(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


AnySystem = Bm25System | RrfSystem | WeightedSystem | CrossEncoderSystem | BiEncoderSystem
SYSTEM_KINDS: dict[str, type[AnySystem]] = {
    "bm25": Bm25System, "rrf": RrfSystem, "weighted": WeightedSystem, "cross-encoder": CrossEncoderSystem,
    "bi-encoder": BiEncoderSystem,
}
"""Each ``kind:`` of ``systems.yaml`` and the model that validates its settings."""
