"""Typed, validated configuration: model eval cards, datasets and the evaluation protocol.

A config folder is self-contained: ``models.yaml``, ``datasets.yaml``, ``protocol.yaml`` and,
optionally, ``ann.yaml`` (the L4 index specs; without it L4 is not evaluated).
Relative paths inside it resolve against the folder, so a user keeps their own folder beside
the defaults. Every validation error names the file, the key and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata as importlib_metadata
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from embedpyramid.compare import ComparisonSettings
from embedpyramid.hashing import sha256_json
from embedpyramid.metrics import Measure, MetricConventions, default_measures

if TYPE_CHECKING:
    from embedpyramid.ann import AnnConfig

SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SAFE_NAME_HELP = "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


class ConfigError(ValueError):
    """A configuration file is missing or invalid; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageSource(_Strict):
    """A model directory shipped inside an installed Python package (located, not imported)."""

    package: str
    path: str = "."


class PathSource(_Strict):
    """A model directory on disk; relative paths resolve against the config folder."""

    path: str


class HubSource(_Strict):
    """A hub model id pinned to a revision; loads only from the local cache (offline)."""

    hub: str
    revision: str


class RunSettings(_Strict):
    """Settings that do not change a vector: recorded with each run, never hashed."""

    batch_size: int = Field(64, ge=1)
    device: str = "cpu"
    threads: int | None = Field(None, ge=1)


class ModelCard(_Strict):
    """One model eval card: everything that changes a vector is part of its hash."""

    backend: Literal["sentence-transformers", "model2vec", "entry-point"]
    source: PackageSource | PathSource | HubSource | None = None
    entry_point: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    query_prompt: str = ""
    document_prompt: str = ""
    pooling: Literal["backend", "mean", "cls", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"] = "backend"
    normalize: bool = True
    dimension: int | None = Field(None, ge=1)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    max_tokens: int | None = Field(None, ge=1)
    truncation_side: Literal["right", "left"] = "right"
    run: RunSettings = Field(default_factory=RunSettings)

    @field_validator("entry_point")
    @classmethod
    def _entry_point_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:[\w.]+", value):
            raise ValueError(f"entry_point {value!r} must look like 'module:callable'")
        return value

    @model_validator(mode="after")
    def _backend_needs(self) -> ModelCard:
        if self.backend == "entry-point":
            if self.entry_point is None:
                raise ValueError("backend 'entry-point' needs entry_point: 'module:callable'")
            if self.source is not None:
                raise ValueError("backend 'entry-point' takes entry_point and options, not source")
            if self.pooling not in ("backend",) or self.dtype != "float32" or self.max_tokens:
                raise ValueError(
                    "backend 'entry-point' fixes its own pooling, dtype and max tokens: "
                    "leave pooling='backend', dtype='float32' and max_tokens unset"
                )
        else:
            if self.source is None:
                raise ValueError(f"backend {self.backend!r} needs a source: package, path or hub")
            if self.entry_point is not None:
                raise ValueError(f"entry_point is only for backend 'entry-point', not {self.backend!r}")
        if self.backend == "model2vec" and (self.pooling != "backend" or self.dtype != "float32"):
            raise ValueError("backend 'model2vec' is a static model: leave pooling='backend' and dtype='float32'")
        return self


class ChatterbotDataset(_Strict):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents."""

    loader: Literal["chatterbot"]
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])
    drop_self_hits: bool = False
    group_column: str | None = None


class BeirDataset(_Strict):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    loader: Literal["beir"]
    path: str
    split: str = "test"
    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None


DatasetSpec = Annotated[ChatterbotDataset | BeirDataset, Field(discriminator="loader")]


class SearchSettings(_Strict):
    doc_block_size: int = Field(16384, ge=1)
    query_block_size: int = Field(1024, ge=1)


class ComparisonConfig(_Strict):
    """Paired comparisons against a baseline card: resampling, tests, slices and the report."""

    baseline: str | None = None
    all_pairs: bool = False
    n_resamples: int = Field(10_000, ge=1)
    n_permutations: int = Field(100_000, ge=1)
    seed: int = 42
    confidence: float = Field(0.95, gt=0, lt=1)
    tie_epsilon: float = Field(1e-9, ge=0)
    min_slice_n: int = Field(20, ge=1)
    worst_n: int = Field(10, ge=1)
    length_buckets: list[int] = Field(default_factory=lambda: [4, 8, 16])
    report_metric: str = "nDCG@10"


class Protocol(_Strict):
    """The evaluation protocol: cutoffs, retrieval depth, metric conventions, search blocking,
    and the paired comparisons."""

    k_values: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 100])
    depth: int = Field(100, ge=1)
    gain: Literal["linear", "exponential"] = "linear"
    relevance_threshold: int = Field(1, ge=1)
    search: SearchSettings = Field(default_factory=SearchSettings)
    comparison: ComparisonConfig = Field(default_factory=ComparisonConfig)

    @model_validator(mode="after")
    def _depth_covers_k(self) -> Protocol:
        if not self.k_values or any(k < 1 for k in self.k_values):
            raise ValueError("k_values must be a non-empty list of positive integers")
        if self.depth < max(self.k_values):
            raise ValueError(f"depth {self.depth} must be at least the largest k ({max(self.k_values)})")
        allowed = [str(m) for m in self.measures()]
        if self.comparison.report_metric not in allowed:
            raise ValueError(f"comparison.report_metric {self.comparison.report_metric!r} is not measured; "
                             f"allowed: {', '.join(allowed)}")
        return self

    def measures(self) -> list[Measure]:
        return default_measures(sorted(set(self.k_values)))

    def conventions(self, dataset: ChatterbotDataset | BeirDataset) -> MetricConventions:
        return MetricConventions(
            gain=self.gain,
            relevance_threshold=self.relevance_threshold,
            drop_self_hits=dataset.drop_self_hits,
        )


_VECTOR_FIELDS = (
    "backend", "entry_point", "options", "query_prompt", "document_prompt", "pooling",
    "normalize", "dimension", "dtype", "max_tokens", "truncation_side",
)


@dataclass(frozen=True)
class ResolvedModel:
    """A validated card with its name, resolved source and content hash."""

    name: str
    card: ModelCard
    source_path: Path | None
    source_identity: dict[str, Any]
    card_hash: str

    @property
    def key(self) -> str:
        """The filesystem-safe partition key, e.g. ``minilm-l6@3f2a1c9``."""
        return f"{self.name}@{self.card_hash[:7]}"

    def hashed_fields(self) -> dict[str, Any]:
        fields = {name: getattr(self.card, name) for name in _VECTOR_FIELDS}
        fields["source"] = self.source_identity
        return fields


@dataclass(frozen=True)
class ProjectConfig:
    directory: Path
    models: dict[str, ResolvedModel]
    datasets: dict[str, ChatterbotDataset | BeirDataset]
    protocol: Protocol
    ann: AnnConfig | None = None

    @property
    def baseline(self) -> ResolvedModel:
        """The card every other model is compared with: ``comparison.baseline``, else the first card."""
        return self.models[self.protocol.comparison.baseline or next(iter(self.models))]

    def comparison_settings(self, dataset: str) -> ComparisonSettings:
        """The paired-comparison settings for one dataset (its slices and resampling groups)."""
        spec, comparison = self.dataset(dataset), self.protocol.comparison
        return ComparisonSettings(
            baseline=self.baseline.key, all_pairs=comparison.all_pairs, n_resamples=comparison.n_resamples,
            n_permutations=comparison.n_permutations, seed=comparison.seed, confidence=comparison.confidence,
            tie_epsilon=comparison.tie_epsilon, min_slice_n=comparison.min_slice_n, worst_n=comparison.worst_n,
            group_column=spec.group_column, slice_columns=tuple(spec.slices),
            length_buckets=tuple(comparison.length_buckets),
        )

    def model_by_key(self, key: str) -> ResolvedModel:
        for model in self.models.values():
            if model.key == key:
                return model
        known = ", ".join(m.key for m in self.models.values())
        raise ConfigError(
            f"model partition {key!r} is not a card in {self.directory / 'models.yaml'} "
            f"(current cards: {known}); it was registered by an older card and is no longer evaluated"
        )

    def dataset(self, name: str) -> ChatterbotDataset | BeirDataset:
        try:
            return self.datasets[name]
        except KeyError:
            raise ConfigError(
                f"dataset {name!r} is not in {self.directory / 'datasets.yaml'} "
                f"(known: {', '.join(self.datasets)})"
            ) from None

    def beir_path(self, spec: BeirDataset) -> Path:
        return _resolve(self.directory, spec.path)


def _resolve(base: Path, path: str) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def _read_yaml(
    path: Path, missing_hint: str = "a config folder needs models.yaml, datasets.yaml and protocol.yaml"
) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping)."""
    if not path.is_file():
        raise ConfigError(f"{path}: file not found; {missing_hint}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def _format_validation(path: Path, prefix: str, error: ValidationError) -> ConfigError:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "") or "(top level)"
        lines.append(f"  {location}: {item['msg']}")
    return ConfigError(f"{path}: invalid configuration\n" + "\n".join(lines))


def _section(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    section = data.get(key)
    if not isinstance(section, dict) or not section:
        raise ConfigError(f"{path}: needs a non-empty mapping under '{key}:'")
    for name in section:
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise ConfigError(f"{path}: {key}.{name}: names must be {SAFE_NAME_HELP}")
    return section


def resolve_source(directory: Path, name: str, card: ModelCard) -> tuple[Path | None, dict[str, Any]]:
    """Locate a card's model files without importing the package; return (path, identity)."""
    where = f"{directory / 'models.yaml'}: models.{name}.source"
    source = card.source
    if source is None:
        module = card.entry_point.split(":")[0] if card.entry_point else ""
        return None, {"entry_point": card.entry_point, "version": _distribution_version(module)}
    if isinstance(source, PackageSource):
        spec = find_spec(source.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"{where}: package {source.package!r} is not installed; install it with pip "
                "(for the defaults: pip install -e .)"
            )
        path = (Path(next(iter(spec.submodule_search_locations))) / source.path).resolve()
        identity = {"package": source.package, "path": source.path, "version": _distribution_version(source.package)}
    elif isinstance(source, PathSource):
        path = _resolve(directory, source.path)
        identity = {"path": str(path)}
    else:
        return None, {"hub": source.hub, "revision": source.revision}
    if not path.exists():
        raise ConfigError(f"{where}: model path {path} does not exist; point it at a model directory")
    return path, identity


@cache
def _distribution_version(module: str) -> str | None:
    top = module.split(".")[0]
    for distribution in importlib_metadata.packages_distributions().get(top, []):
        return importlib_metadata.version(distribution)
    return None


def load_models(directory: Path) -> dict[str, ResolvedModel]:
    path = directory / "models.yaml"
    models: dict[str, ResolvedModel] = {}
    for name, raw in _section(path, _read_yaml(path), "models").items():
        try:
            card = ModelCard.model_validate(raw)
        except ValidationError as error:
            raise _format_validation(path, f"models.{name}", error) from None
        source_path, identity = resolve_source(directory, name, card)
        partial = ResolvedModel(name, card, source_path, identity, card_hash="")
        models[name] = ResolvedModel(name, card, source_path, identity, sha256_json(partial.hashed_fields()))
    return models


def load_datasets(directory: Path) -> dict[str, ChatterbotDataset | BeirDataset]:
    path = directory / "datasets.yaml"
    datasets: dict[str, ChatterbotDataset | BeirDataset] = {}
    for name, raw in _section(path, _read_yaml(path), "datasets").items():
        try:
            spec = _DatasetAdapter.model_validate({"spec": raw}).spec
        except ValidationError as error:
            raise _format_validation(path, f"datasets.{name}", error) from None
        if isinstance(spec, BeirDataset) and not _resolve(directory, spec.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.path: folder {_resolve(directory, spec.path)} does not exist; "
                "point it at a BEIR folder with corpus.jsonl, queries.jsonl and qrels/"
            )
        datasets[name] = spec
    return datasets


class _DatasetAdapter(BaseModel):
    spec: DatasetSpec


def load_protocol(directory: Path) -> Protocol:
    path = directory / "protocol.yaml"
    try:
        return Protocol.model_validate(_read_yaml(path))
    except ValidationError as error:
        raise _format_validation(path, "", error) from None


def load_config(directory: str | Path) -> ProjectConfig:
    """Load and validate a config folder; raise ConfigError naming the file and the key."""
    folder = Path(directory).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"config folder {folder} does not exist")
    models, protocol = load_models(folder), load_protocol(folder)
    baseline = protocol.comparison.baseline
    if baseline is not None and baseline not in models:
        raise ConfigError(
            f"{folder / 'protocol.yaml'}: comparison.baseline {baseline!r} is not a card in models.yaml; "
            f"allowed: {', '.join(models)}"
        )
    # embedpyramid.ann builds on this module's validation helpers, hence the late import.
    from embedpyramid.ann import load_ann_config

    ann = load_ann_config(folder / "ann.yaml") if (folder / "ann.yaml").is_file() else None
    return ProjectConfig(folder, models, load_datasets(folder), protocol, ann)
