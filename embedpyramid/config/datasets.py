"""Dataset entries (``datasets.yaml``): which loader reads which data, with its slices."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationError, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path


class DatasetEntry(Strict):
    """What every dataset entry declares, whatever its loader: query fields to slice by, whether
    queries are also documents (self-hits are dropped), and the resampling group column."""

    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None


class ChatterbotDataset(DatasetEntry):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents."""

    loader: Literal["chatterbot"]
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])

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


AnyDataset = ChatterbotDataset | BeirDataset
LOADERS: dict[str, type[AnyDataset]] = {"chatterbot": ChatterbotDataset, "beir": BeirDataset}


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
        datasets[name] = spec
    return datasets
