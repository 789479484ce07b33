"""Dataset entries (``datasets.yaml``): which loader reads which data, with its slices, and which
L2 task evaluates it (``task:``, with the task's settings in a block of the same name)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path
from embedpyramid.config.tasks import (
    SETTINGS_BY_TASK,
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    PairClassificationSettings,
    StsSettings,
    Task,
    TaskSettings,
)


class DatasetEntry(Strict):
    """What every dataset entry declares, whatever its loader: query (or item) fields to slice
    by, whether queries are also documents (self-hits are dropped), the resampling group column,
    and the L2 task that evaluates it with, optionally, that task's settings block."""

    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None
    task: Task = "retrieval"
    sts: StsSettings | None = None
    pair_classification: PairClassificationSettings | None = None
    classification: ClassificationSettings | None = None
    clustering: ClusteringSettings | None = None
    bitext: BitextSettings | None = None

    @model_validator(mode="after")
    def _settings_match_task(self) -> DatasetEntry:
        for task in SETTINGS_BY_TASK:
            if task != self.task and getattr(self, task) is not None:
                raise ValueError(
                    f"settings block '{task}' belongs to task {task!r}, but this entry's task is {self.task!r}; "
                    f"set task: {task} or rename the block to '{self.task}'"
                )
        if self.drop_self_hits and self.task != "retrieval":
            raise ValueError(f"drop_self_hits applies to retrieval only, not to task {self.task!r}")
        return self

    @property
    def task_settings(self) -> TaskSettings | None:
        """The settings of the entry's task family (its defaults when no block is given);
        ``None`` for retrieval, whose settings are the protocol's."""
        if self.task == "retrieval":
            return None
        return getattr(self, self.task) or SETTINGS_BY_TASK[self.task]()


class ChatterbotDataset(DatasetEntry):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents
    (retrieval); the distinct questions labelled by category (classification, clustering); or
    question pairs that share an answer against seeded negatives (pair classification)."""

    loader: Literal["chatterbot"]
    task: Literal["retrieval", "classification", "clustering", "pair_classification"] = "retrieval"
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])


class BeirDataset(DatasetEntry):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    loader: Literal["beir"]
    task: Literal["retrieval"] = "retrieval"
    path: str
    split: str = "test"


class LeeDataset(DatasetEntry):
    """gensim's Lee corpus: 50 news documents, human similarity of every pair (STS)."""

    loader: Literal["gensim-lee"]
    task: Literal["sts"] = "sts"


class StsFileDataset(DatasetEntry):
    """STS pairs from a file: the STS Benchmark csv (``stsb``, tab-separated) or a plain
    ``sentence1, sentence2, score`` file (``tsv`` or ``jsonl``); ``split`` only names it."""

    loader: Literal["sts-file"]
    task: Literal["sts"] = "sts"
    path: str
    format: Literal["stsb", "tsv", "jsonl"]
    split: str = "test"


class NewsgroupsDataset(DatasetEntry):
    """gensim's ``mini_newsgroup`` sample: 200 posts of alt.atheism and sci.space, labelled by
    newsgroup. ``remove`` strips parts of each post as scikit-learn's ``fetch_20newsgroups``
    does; the headers name the newsgroup, so keeping them leaks the label."""

    loader: Literal["gensim-newsgroups"]
    task: Literal["classification", "clustering"] = "classification"
    remove: list[Literal["headers", "footers", "quotes"]] = Field(default_factory=lambda: ["headers", "footers", "quotes"])


class DjangoBitextDataset(DatasetEntry):
    """Human translations of Django's UI strings (its ``.mo`` catalogues): English to each of
    ``languages``; strings of at least ``min_words`` words once placeholders are stripped."""

    loader: Literal["django-bitext"]
    task: Literal["bitext"] = "bitext"
    languages: list[str] = Field(default_factory=lambda: ["de", "fr", "es", "ja", "ko"], min_length=1)
    min_words: int = Field(4, ge=1)


AnyDataset = ChatterbotDataset | BeirDataset | LeeDataset | StsFileDataset | NewsgroupsDataset | DjangoBitextDataset
DatasetSpec = Annotated[AnyDataset, Field(discriminator="loader")]


def load_datasets(directory: Path) -> dict[str, AnyDataset]:
    path = directory / "datasets.yaml"
    datasets: dict[str, AnyDataset] = {}
    for name, raw in named_section(path, read_yaml(path), "datasets").items():
        try:
            spec = _DatasetAdapter.model_validate({"spec": raw}).spec
        except ValidationError as error:
            raise format_validation(path, f"datasets.{name}", error) from None
        if isinstance(spec, BeirDataset) and not resolve_path(directory, spec.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.path: folder {resolve_path(directory, spec.path)} does not exist; "
                "point it at a BEIR folder with corpus.jsonl, queries.jsonl and qrels/"
            )
        if isinstance(spec, StsFileDataset) and not resolve_path(directory, spec.path).is_file():
            raise ConfigError(
                f"{path}: datasets.{name}.path: file {resolve_path(directory, spec.path)} does not exist; "
                f"point it at a {spec.format} file of sentence pairs with scores"
            )
        datasets[name] = spec
    return datasets


class _DatasetAdapter(BaseModel):
    spec: DatasetSpec
