"""Dataset entries (``datasets.yaml``): which loader reads which data, with its slices."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationError

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path


class DatasetEntry(Strict):
    """What every dataset entry declares, whatever its loader: query fields to slice by, whether
    queries are also documents (self-hits are dropped), the resampling group column, and what
    to do with empty texts: ``keep`` (encoded as the empty string and listed in the manifest),
    ``drop`` (removed with the qrels that name them, all listed) or ``error``."""

    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None
    empty_texts: Literal["keep", "drop", "error"] = "keep"


class ChatterbotDataset(DatasetEntry):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents."""

    loader: Literal["chatterbot"]
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])


class BeirDataset(DatasetEntry):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    loader: Literal["beir"]
    path: str
    split: str = "test"


AnyDataset = ChatterbotDataset | BeirDataset
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
        datasets[name] = spec
    return datasets


class _DatasetAdapter(BaseModel):
    spec: DatasetSpec
