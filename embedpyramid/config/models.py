"""Model eval cards (``models.yaml``): everything that changes a vector is part of the card's hash."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata as importlib_metadata
from importlib.machinery import ModuleSpec, PathFinder
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path
from embedpyramid.hashing import sha256_json
from embedpyramid.hub import DEFAULT_REVISION, HubError, resolve_commit

HUB_ID = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*")
"""A hub repository id: ``name`` or ``org/name``."""


class PackageSource(Strict):
    """A model directory shipped inside an installed Python package (located, not imported)."""

    package: str
    path: str = "."


class PathSource(Strict):
    """A model directory on disk; relative paths resolve against the config folder."""

    path: str


class HubSource(Strict):
    """A hub repository id at a revision: a branch, a tag or a commit (default ``main``). The
    revision is resolved to its commit when the config is loaded, and the commit (not the name)
    is hashed into the card: a branch that moves is a new card. The files download into the
    Hugging Face cache when online; with ``HF_HUB_OFFLINE=1`` they are read from it
    (:mod:`embedpyramid.hub`)."""

    hub: str
    revision: str = DEFAULT_REVISION

    @field_validator("hub")
    @classmethod
    def _repo_id(cls, value: str) -> str:
        if not HUB_ID.fullmatch(value):
            raise ValueError(f"hub {value!r} is not a repository id: write it as 'org/name' (or 'name')")
        return value


class HttpSource(Strict):
    """An OpenAI-compatible embeddings endpoint (``POST url`` with ``{"model", "input"}``).

    ``url`` is the full endpoint, e.g. ``https://api.openai.com/v1/embeddings``; ``dimensions``
    is asked of the API (it changes the vectors, so it is hashed). Keys never go in the URL:
    they come from the environment variable named in ``api.key_env``.
    """

    url: str
    model: str
    dimensions: int | None = Field(None, ge=1)

    @field_validator("url")
    @classmethod
    def _plain_url(cls, value: str) -> str:
        if not re.match(r"https?://[^/@?#\s]+(/[^?#\s]*)?$", value):
            raise ValueError(
                f"url {value!r} must be an http(s) endpoint without credentials, query or fragment "
                "(e.g. https://api.openai.com/v1/embeddings); put the key in api.key_env"
            )
        return value


class BedrockSource(Strict):
    """An Amazon Bedrock embedding model called with Titan-style requests (``inputText``)."""

    bedrock: str
    region: str
    dimensions: int | None = Field(None, ge=1)


class RunSettings(Strict):
    """Settings that do not change a vector: recorded with each run, never hashed.

    ``shard_size`` texts are encoded and written at a time, so a killed encode resumes from
    its last finished shard; ``price_per_device_hour`` (optional) turns a local card's
    device-seconds into money in the efficiency table; ``latency_queries`` queries, each
    encoded alone ``latency_repeats`` times, give its batch-1 query latency. Left out,
    ``batch_size`` is sized for the device (:data:`DEFAULT_BATCH_SIZES`): 64 on the CPU, 256 on a
    GPU, whose kernels are busy only with larger batches.
    """

    batch_size: int = Field(64, ge=1)
    device: str = "cpu"
    threads: int | None = Field(None, ge=1)
    shard_size: int = Field(4096, ge=1)
    price_per_device_hour: float | None = Field(None, ge=0)
    latency_queries: int = Field(50, ge=1)
    latency_repeats: int = Field(3, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _batch_for_the_device(cls, value: Any) -> Any:
        if isinstance(value, dict) and "batch_size" not in value:
            device = str(value.get("device", "cpu")).split(":")[0]
            return {**value, "batch_size": DEFAULT_BATCH_SIZES.get(device, DEFAULT_BATCH_SIZES["cpu"])}
        return value


DEFAULT_BATCH_SIZES = {"cpu": 64, "cuda": 256}
"""A card's batch size when its ``run:`` names none, by device type."""


class ApiSettings(Strict):
    """How a remote card is called and what it costs: recorded, never hashed.

    ``key_env`` names the environment variable holding the API key (sent as a bearer token;
    never written anywhere); Bedrock uses boto3's own credential chain instead.
    """

    key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    requests_per_minute: float | None = Field(None, gt=0)
    price_per_million_tokens: float | None = Field(None, ge=0)
    max_attempts: int = Field(5, ge=1)
    timeout_seconds: float = Field(60.0, gt=0)


Similarity = Literal["inner_product", "cosine", "l2"]
REMOTE_BACKENDS = ("http", "bedrock")


class ModelCard(Strict):
    """One model eval card: everything that changes a vector or a ranking is part of its hash.

    ``similarity`` is how the card's vectors are compared (exact search and every L4 index):
    ``inner_product``, ``cosine`` or ``l2``; by default cosine when the card normalizes, else
    the inner product.
    """

    backend: Literal["sentence-transformers", "model2vec", "entry-point", "http", "bedrock"]
    source: PackageSource | PathSource | HubSource | HttpSource | BedrockSource | None = None
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
    similarity: Similarity | None = None
    api: ApiSettings | None = None
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
        self._remote_needs()
        return self

    def _remote_needs(self) -> None:
        expected = {"http": HttpSource, "bedrock": BedrockSource}.get(self.backend)
        if expected is None:
            if self.api is not None:
                raise ValueError(f"api: settings are for backends {', '.join(REMOTE_BACKENDS)}, not {self.backend!r}")
            if isinstance(self.source, HttpSource | BedrockSource):
                raise ValueError(f"backend {self.backend!r} takes a package, path or hub source, not a remote endpoint")
            return
        if not isinstance(self.source, expected):
            shape = "{url: ..., model: ...}" if self.backend == "http" else "{bedrock: MODEL_ID, region: ...}"
            raise ValueError(f"backend {self.backend!r} needs source: {shape}")
        if self.pooling != "backend" or self.dtype != "float32" or self.max_tokens:
            raise ValueError(
                f"backend {self.backend!r} is a remote model that pools, truncates and picks its dtype itself: "
                "leave pooling='backend', dtype='float32' and max_tokens unset"
            )
        if self.backend == "bedrock" and self.api is not None and self.api.key_env is not None:
            raise ValueError("backend 'bedrock' signs requests with boto3's credential chain (AWS_PROFILE, "
                             "AWS_ACCESS_KEY_ID, a role): drop api.key_env")


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

    @property
    def similarity(self) -> Similarity:
        """How the card's vectors are compared: the card's ``similarity``, else cosine when it
        normalizes and the inner product when it does not."""
        return self.card.similarity or ("cosine" if self.card.normalize else "inner_product")

    @property
    def is_remote(self) -> bool:
        return self.card.backend in REMOTE_BACKENDS

    def hashed_fields(self) -> dict[str, Any]:
        fields = {name: getattr(self.card, name) for name in _VECTOR_FIELDS}
        fields["source"] = self.source_identity
        fields["similarity"] = self.similarity
        return fields

    def pass_fields(self) -> dict[str, Any]:
        """The hashed fields that make the forward pass: all but the dimension cut, the
        normalization and the similarity, which only post-process or compare its vectors."""
        return {name: value for name, value in self.hashed_fields().items()
                if name not in ("dimension", "normalize", "similarity")}

    def same_pass_hashes(self) -> list[str]:
        """The card hashes of the other cards whose raw tables hold this card's forward pass: the
        same card but for its normalization and similarity, uncut or cut to this card's dimension.
        The card's tables derive from such a raw table by its own cut and normalization
        (:func:`embedpyramid.encode.tables.same_pass_table`), so a dimension or normalization
        variant of an evaluated card encodes nothing."""
        fields = self.pass_fields()
        variants = (
            sha256_json({**fields, "dimension": dimension, "normalize": normalize, "similarity": similarity})
            for dimension in dict.fromkeys([None, self.card.dimension])
            for normalize in (True, False)
            for similarity in get_args(Similarity)
        )
        return [card_hash for card_hash in dict.fromkeys(variants) if card_hash != self.card_hash]


def resolve_source(directory: Path, name: str, card: ModelCard) -> tuple[Path | None, dict[str, Any]]:
    """Locate a card's model files or code without importing them; return (path, identity).

    The identity is hashed into the card. For an entry point it is the installed distribution's
    version when the module comes from an installed (non-editable) package, and otherwise the
    sha256 of its code: every ``.py`` file of its top-level package (or the single module file),
    so editing a local encoder gives the card a new key and its vectors are recomputed.
    """
    where = f"{directory / 'models.yaml'}: models.{name}.source"
    source = card.source
    if source is None:
        return None, _entry_point_identity(directory, name, card.entry_point or "")
    if isinstance(source, HttpSource | BedrockSource):
        return None, source.model_dump()
    if isinstance(source, PackageSource):
        spec = find_spec(source.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"{where}: package {source.package!r} is not installed; install it with pip "
                "(for the defaults: pip install -e .)"
            )
        path = (Path(next(iter(spec.submodule_search_locations))) / source.path).resolve()
        identity = {"package": source.package, "path": source.path, "version": package_version(source.package)}
    elif isinstance(source, PathSource):
        path = resolve_path(directory, source.path)
        identity = {"path": str(path)}
    else:
        try:
            return None, {"hub": source.hub, "commit": resolve_commit(source.hub, source.revision, where=where)}
        except HubError as error:
            raise ConfigError(str(error)) from None
    if not path.exists():
        raise ConfigError(f"{where}: model path {path} does not exist; point it at a model directory")
    return path, identity


def _entry_point_identity(directory: Path, name: str, entry_point: str) -> dict[str, Any]:
    module = entry_point.split(":")[0]
    top_name = module.split(".")[0]
    top = _find_module(top_name)
    if top is None or _find_module(module) is None:
        raise ConfigError(
            f"{directory / 'models.yaml'}: models.{name}.entry_point: module {module!r} is not on the Python "
            "path; install its package or add its folder to PYTHONPATH"
        )
    if top.submodule_search_locations:
        roots = [Path(location).resolve() for location in top.submodule_search_locations]
        files = sorted({file.resolve() for root in roots for file in root.rglob("*.py") if "__pycache__" not in file.parts})
    else:
        roots = files = [Path(top.origin).resolve()] if top.origin and Path(top.origin).is_file() else []
    version = _installed_version(top_name, roots)
    if version is not None:
        return {"entry_point": entry_point, "version": version}
    digest = hashlib.sha256()
    for file in files:
        relative = next((file.relative_to(root) for root in roots if file.is_relative_to(root)), Path(file.name))
        content = file.read_bytes()
        digest.update(f"{relative.as_posix()}\0{len(content)}\0".encode())
        digest.update(content)
    return {"entry_point": entry_point, "source_sha256": digest.hexdigest()}


def _find_module(dotted: str) -> ModuleSpec | None:
    """The spec of a module, found without importing it or its parent packages."""
    parts = dotted.split(".")
    try:
        spec = find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    for depth in range(2, len(parts) + 1):
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = PathFinder.find_spec(".".join(parts[:depth]), list(spec.submodule_search_locations))
    return spec


def _installed_version(top: str, roots: list[Path]) -> str | None:
    """The version of the installed distribution the module lives in; None for code elsewhere
    (a local folder, an editable install, a local module shadowing an installed package)."""
    def candidates() -> Iterator[str]:
        # The distributions of _distributions first; the scan of every distribution that
        # provides the name (a namespace package has several) only when none of them holds it.
        named = _distributions(top)
        yield from named
        yield from (other for other in _package_distributions().get(top, []) if other not in named)

    for distribution in candidates():
        location = Path(str(importlib_metadata.distribution(distribution).locate_file(""))).resolve()
        if roots and all(root.is_relative_to(location) for root in roots):
            return importlib_metadata.version(distribution)
    return None


@cache
def _package_distributions() -> dict[str, list[str]]:
    return importlib_metadata.packages_distributions()


def _top_level_names(distribution: importlib_metadata.Distribution) -> set[str]:
    """The top-level names a distribution installs: its ``top_level.txt``, else the first part
    of each file it records (as :func:`importlib.metadata.packages_distributions` infers them)."""
    declared = (distribution.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    return {file.parts[0] if len(file.parts) > 1 else file.name.split(".")[0] for file in distribution.files or ()}


@cache
def _distributions(top: str) -> tuple[str, ...]:
    """The installed distributions that provide the top-level package ``top``: the one named like
    it, when it installs that name (one metadata read); else every distribution's records scanned
    (``packages_distributions``, which reads the records of every installed distribution)."""
    try:
        named = importlib_metadata.distribution(top)
    except importlib_metadata.PackageNotFoundError:
        named = None
    if named is not None and top in _top_level_names(named):
        return (named.metadata["Name"],)
    return tuple(_package_distributions().get(top, []))


def package_version(package: str) -> str | None:
    """The version of the installed distribution that provides the (dotted) ``package``, if any."""
    distributions = _distributions(package.split(".")[0])
    return importlib_metadata.version(distributions[0]) if distributions else None


def load_models(directory: Path) -> dict[str, ResolvedModel]:
    path = directory / "models.yaml"
    models: dict[str, ResolvedModel] = {}
    for name, raw in named_section(path, read_yaml(path), "models").items():
        try:
            card = ModelCard.model_validate(raw)
        except ValidationError as error:
            raise format_validation(path, f"models.{name}", error) from None
        source_path, identity = resolve_source(directory, name, card)
        partial = ResolvedModel(name, card, source_path, identity, card_hash="")
        models[name] = ResolvedModel(name, card, source_path, identity, sha256_json(partial.hashed_fields()))
    return models
