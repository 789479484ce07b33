"""Dataset entries (``datasets.yaml``): which loader reads which data, with its slices, its role in
the transfer analysis (``public`` benchmark or the user's ``own`` data) and its published scores."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path
from embedpyramid.config.references import MtebResultsImport, ReferenceScore, canonical_metric


class DatasetEntry(Strict):
    """What every dataset entry declares, whatever its loader: query fields to slice by, whether
    queries are also documents (self-hits are dropped), the resampling group column, its role in
    the transfer analysis, the measure models are ranked by there (default: the protocol's
    ``report_metric``), published scores (typed under ``reference`` or imported from MTEB result
    files under ``mteb_results``), and where the gold answers of L6 come from
    (``relevant-documents``: the documents are answers, so each relevant document's text is a gold
    answer; ``null``: the dataset has none)."""

    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None
    role: Literal["public", "own"] = "own"
    confirmatory_metric: str | None = None
    reference: list[ReferenceScore] = Field(default_factory=list)
    mteb_results: MtebResultsImport | None = None

    @field_validator("confirmatory_metric")
    @classmethod
    def _known_metric(cls, value: str | None) -> str | None:
        return None if value is None else canonical_metric(value)

    @field_validator("reference")
    @classmethod
    def _one_reference_per_model_and_metric(cls, value: list[ReferenceScore]) -> list[ReferenceScore]:
        seen: set[tuple[str, str]] = set()
        for reference in value:
            key = (reference.model, reference.metric)
            if key in seen:
                raise ValueError(f"two references for model {reference.model!r} and {reference.metric}; keep one")
            seen.add(key)
        return value
    gold_answers: Literal["relevant-documents"] | None = None


class ChatterbotDataset(DatasetEntry):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents."""

    loader: Literal["chatterbot"]
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])
    gold_answers: Literal["relevant-documents"] | None = "relevant-documents"

    QUERY_FIELDS: ClassVar[tuple[str, ...]] = ("category",)
    """The query fields this loader produces besides ``query_id`` and ``text``."""

    @model_validator(mode="after")
    def _fields_exist(self) -> ChatterbotDataset:
        wanted = [*self.slices, *([self.group_column] if self.group_column else [])]
        missing = [column for column in wanted if column not in self.QUERY_FIELDS]
        if missing:
            raise ValueError(
                f"slice/group columns {missing} are not query fields of the chatterbot loader; "
                f"fields that exist: {', '.join(self.QUERY_FIELDS)}"
            )
        return self


class BeirDataset(DatasetEntry):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    loader: Literal["beir"]
    path: str
    split: str = "test"


class SquadDataset(DatasetEntry):
    """A SQuAD / KorQuAD JSON file: distinct context paragraphs are the corpus, each answerable
    question is a query, and the paragraph holding its answer is relevant. ``include_title``
    stores the article title as the document title (encoded as title + " " + text)."""

    loader: Literal["squad"]
    path: str
    include_title: bool = False


class PublishedDataset(DatasetEntry):
    """A public benchmark that is not on disk: only its published scores, which stand in for it in
    the transfer analysis. There is nothing to freeze, encode or search."""

    loader: Literal["published"]
    role: Literal["public"] = "public"

    @model_validator(mode="after")
    def _has_scores(self) -> PublishedDataset:
        if not self.reference and self.mteb_results is None:
            raise ValueError("a published dataset needs published scores: give reference: [...] or mteb_results: {...}")
        return self


AnyDataset = ChatterbotDataset | BeirDataset | SquadDataset | PublishedDataset
LOADERS: dict[str, type[AnyDataset]] = {
    "chatterbot": ChatterbotDataset, "beir": BeirDataset, "squad": SquadDataset, "published": PublishedDataset,
}


def load_datasets(directory: Path) -> dict[str, AnyDataset]:
    path = directory / "datasets.yaml"
    datasets: dict[str, AnyDataset] = {}
    for name, raw in named_section(path, read_yaml(path), "datasets").items():
        loader = raw.get("loader") if isinstance(raw, dict) else None
        if not isinstance(loader, str) or loader not in LOADERS:
            given = "is missing" if loader is None else f"{loader!r} is not a loader"
            raise ConfigError(
                f"{path}: datasets.{name}.loader {given}; allowed: {', '.join(map(repr, LOADERS))}"
            )
        try:
            spec = LOADERS[loader].model_validate(raw)
        except ValidationError as error:
            raise format_validation(path, f"datasets.{name}", error) from None
        if isinstance(spec, BeirDataset) and not resolve_path(directory, spec.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.path: folder {resolve_path(directory, spec.path)} does not exist; "
                "point it at a BEIR folder with corpus.jsonl, queries.jsonl and qrels/"
            )
        if isinstance(spec, SquadDataset) and not resolve_path(directory, spec.path).is_file():
            raise ConfigError(
                f"{path}: datasets.{name}.path: file {resolve_path(directory, spec.path)} does not exist; "
                "point it at a SQuAD or KorQuAD JSON file"
            )
        if spec.mteb_results is not None and not resolve_path(directory, spec.mteb_results.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.mteb_results.path: folder {resolve_path(directory, spec.mteb_results.path)} "
                "does not exist; point it at a folder in the embeddings-benchmark/results layout"
            )
        datasets[name] = spec
    return datasets


def check_reference_models(path: Path, datasets: dict[str, AnyDataset], model_names: list[str]) -> None:
    """Every published score must name a card of ``models.yaml``: a typo would otherwise leave a
    reference that nothing can reproduce."""
    for name, spec in datasets.items():
        named = [(f"reference[{i}].model", r.model) for i, r in enumerate(spec.reference)]
        if spec.mteb_results is not None:
            named += [(f"mteb_results.models.{card}", card) for card in spec.mteb_results.models]
        for key, card in named:
            if card not in model_names:
                raise ConfigError(
                    f"{path}: datasets.{name}.{key}: {card!r} is not a card in models.yaml; allowed: {', '.join(model_names)}"
                )


def has_data(spec: AnyDataset) -> bool:
    """Whether a dataset has tables to freeze (a ``published`` entry has only published scores)."""
    return not isinstance(spec, PublishedDataset)
