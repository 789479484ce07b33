"""Retrieval systems of pyramid level L5 (``systems.yaml``): BM25, fusion and second-stage rerank.

Each named system is one ``kind`` (its settings: :mod:`embedpyramid.config.system_kinds`):

- ``bm25``: lexical retrieval over the frozen corpus with ``bm25s`` (model-independent).
- ``rrf``: reciprocal rank fusion of two or more input runs.
- ``weighted``: weighted sum of per-query normalized scores of two or more input runs; the
  weight can be chosen on the dataset's dev split (``settings.dev_datasets``).
- ``cross-encoder``: the top ``top_n`` of a first stage rescored by a sentence-transformers
  ``CrossEncoder`` from an installed package, a local path or a hub repository (pinned to its commit).
- ``bi-encoder``: the top ``top_n`` of a first stage rescored by another model card's vectors.

An input or first stage is a reference: ``exact`` (the evaluated model's exact run),
``ann:<spec>`` or ``ann:<spec>:<param>=<value>`` (an L4 index of ``ann.yaml`` at one sweep
point), or the name of another system (systems chain; cycles are refused). A system is
*model-independent* when no reference in its chain reads the evaluated model (BM25, or a
cross-encoder over BM25): it is computed once per dataset.

Every system is content-addressed: :attr:`SystemsConfig.hashes` holds the sha256 of everything
that changes its run — its own settings, ``settings.depth`` where it applies, the dev splits a
weight sweep reads, the library versions it runs on, the card it reranks by, the L4 spec it
reads, and the hashes of the systems it takes as input — so changing one system's settings
changes the hash of that system and of the systems built on it, nothing else. (The latency
sample's size and seed change no run and are recorded, not hashed.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from embedpyramid.config.base import (
    SAFE_NAME,
    SAFE_NAME_HELP,
    ConfigError,
    Strict,
    format_validation,
    read_yaml,
    resolve_path,
)
from embedpyramid.config.models import HubSource, PackageSource, PathSource, ResolvedModel, package_version
from embedpyramid.config.system_kinds import (
    SYSTEM_KINDS,
    AnySystem,
    BiEncoderSystem,
    Bm25System,
    CrossEncoderSystem,
    RrfSystem,
    WeightedSystem,
)
from embedpyramid.hashing import sha256_json
from embedpyramid.hub import HubError, resolve_commit

if TYPE_CHECKING:
    from embedpyramid.config.ann import AnnConfig

EXACT = "exact"
"""The reference to the evaluated model's exact run (pyramid L2)."""
ANN_PREFIX = "ann:"
MODEL_INDEPENDENT = "none"
"""The ``model`` column of a model-independent system's rows (model keys always hold an '@')."""

_FORMAT_VERSION = 1
"""Bumped when a system's run changes for the same settings (a code change), so hashes move."""

_ANN_REFERENCE = re.compile(r"^ann:(?P<spec>[a-z0-9][a-z0-9._-]{0,63})(?::(?P<param>\w+)=(?P<value>[0-9]+))?$")


class SystemsSettings(Strict):
    """Settings shared by every system, recorded with the L5 results.

    ``depth``: documents kept per query in a BM25 or fused run, and the default candidate depth
    of each fusion input. ``latency_queries``: queries timed one at a time where a stage is run
    for all queries at once (fusion, bi-encoder rerank), drawn with ``seed``; BM25 and the
    cross-encoder handle one query per call anyway and are timed on every query.
    ``dev_datasets`` maps a dataset to its dev split, another configured dataset over the same
    corpus, on which weighted fusion chooses its weight.
    """

    depth: int = Field(100, ge=1)
    latency_queries: int = Field(200, ge=1)
    seed: int = 42
    dev_datasets: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class AnnReference:
    """A parsed ``ann:<spec>[:<param>=<value>]`` reference."""

    spec: str
    param: str | None
    value: int | None


def parse_ann_reference(reference: str) -> AnnReference | None:
    """The parts of an ``ann:`` reference, or None for any other reference."""
    if not reference.startswith(ANN_PREFIX):
        return None
    match = _ANN_REFERENCE.match(reference)
    if match is None:
        raise ValueError(f"reference {reference!r} must look like 'ann:<spec>' or 'ann:<spec>:<param>=<value>'")
    value = match["value"]
    return AnnReference(match["spec"], match["param"], None if value is None else int(value))


@dataclass(frozen=True)
class ModelLocation:
    """Where a cross-encoder loads from: a directory, or a hub repository id at the ``commit`` its
    revision pointed at when the config was loaded (:mod:`embedpyramid.hub`)."""

    location: str
    commit: str | None = None


@dataclass(frozen=True)
class SystemsConfig:
    """The validated ``systems.yaml``: settings, systems by name (file order), their hashes, and
    where each cross-encoder loads from."""

    settings: SystemsSettings
    systems: dict[str, AnySystem]
    hashes: dict[str, str]
    cross_encoders: dict[str, ModelLocation]

    def system(self, name: str) -> AnySystem:
        try:
            return self.systems[name]
        except KeyError:
            raise KeyError(f"no system {name!r}; known: {', '.join(self.systems)}") from None

    def model_independent(self, name: str) -> bool:
        """True when no reference in the system's chain reads the evaluated model."""
        return all(
            reference in self.systems and self.model_independent(reference)
            for reference in self.system(name).references()
        )

    def applies_to(self, name: str, model_name: str) -> bool:
        """Whether the system is evaluated for a model card (a bi-encoder rerank skips the card it
        reranks by; a model-independent system is evaluated once, for no card)."""
        if self.model_independent(name):
            return False
        spec = self.system(name)
        return not (isinstance(spec, BiEncoderSystem) and spec.by == model_name)

    def upstream_systems(self, name: str) -> list[str]:
        """The systems a system reads, directly or through others, in evaluation order."""
        ordered: list[str] = []
        for reference in self.system(name).references():
            if reference in self.systems:
                ordered += [n for n in [*self.upstream_systems(reference), reference] if n not in ordered]
        return ordered

    def candidate_depth(self, name: str) -> int | None:
        """Documents a system reads from each input per query (None for BM25, which reads none)."""
        spec = self.system(name)
        if isinstance(spec, Bm25System):
            return None
        if isinstance(spec, RrfSystem | WeightedSystem):
            return spec.depth or self.settings.depth
        return spec.top_n

    def ann_references(self) -> dict[str, int]:
        """Every ``ann:`` reference with the depth to search it at: the deepest candidate depth of
        the systems reading it."""
        depths: dict[str, int] = {}
        for name, spec in self.systems.items():
            for reference in spec.references():
                if reference.startswith(ANN_PREFIX):
                    depths[reference] = max(depths.get(reference, 0), self.candidate_depth(name) or 0)
        return depths

    def model_label(self, name: str, model_key: str | None) -> str:
        """The ``model`` column of a system's rows: the model key, or :data:`MODEL_INDEPENDENT`."""
        if self.model_independent(name):
            return MODEL_INDEPENDENT
        if model_key is None:
            raise ValueError(f"system {name!r} reads the evaluated model's run: give the model key")
        return model_key


def load_systems_config(
    path: str | Path,
    models: Mapping[str, ResolvedModel],
    datasets: Mapping[str, object],
    ann: AnnConfig | None = None,
) -> SystemsConfig:
    """Read and validate ``systems.yaml`` against the other files of its config folder (the cards
    a bi-encoder reranks by, the L4 specs an ``ann:`` reference names, the datasets of
    ``settings.dev_datasets``); a ConfigError names the file, the key and what is allowed."""
    path = Path(path)
    data = read_yaml(path, "systems.yaml holds the L5 settings and systems")
    if set(data) - {"settings", "systems"}:
        raise ConfigError(f"{path}: the top level must be a mapping with keys 'settings' and 'systems'")
    try:
        settings = SystemsSettings.model_validate(data.get("settings") or {})
    except ValidationError as error:
        raise format_validation(path, "settings", error) from None
    for dataset, dev in settings.dev_datasets.items():
        for key, name in ((dataset, dataset), (f"{dataset}: {dev}", dev)):
            if name not in datasets:
                raise ConfigError(
                    f"{path}: settings.dev_datasets.{key}: {name!r} is not a dataset of datasets.yaml; "
                    f"allowed: {', '.join(datasets)}"
                )
        if dataset == dev:
            raise ConfigError(f"{path}: settings.dev_datasets.{dataset}: a dataset cannot be its own dev split")
    raw_systems = data.get("systems")
    if not isinstance(raw_systems, dict) or not raw_systems:
        raise ConfigError(f"{path}: needs a non-empty mapping under 'systems:'")
    systems: dict[str, AnySystem] = {}
    for name, raw in raw_systems.items():
        if not isinstance(name, str) or not SAFE_NAME.match(name) or name == EXACT:
            raise ConfigError(f"{path}: systems.{name}: names must be {SAFE_NAME_HELP}, and not {EXACT!r}")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: systems.{name}: must be a mapping, e.g. {{kind: bm25}}")
        if raw.get("kind") not in SYSTEM_KINDS:
            raise ConfigError(f"{path}: systems.{name}.kind: {raw.get('kind')!r} is not a kind; allowed: {', '.join(SYSTEM_KINDS)}")
        try:
            systems[name] = SYSTEM_KINDS[raw["kind"]].model_validate(raw)
        except ValidationError as error:
            raise format_validation(path, f"systems.{name}", error) from None
    for name, spec in systems.items():
        _check_references(path, name, spec, systems, models, ann)
    _check_acyclic(path, systems)
    cross_encoders = {
        name: _cross_encoder_location(path, name, spec.source)
        for name, spec in systems.items() if isinstance(spec, CrossEncoderSystem)
    }
    hashes: dict[str, str] = {}
    for name in systems:
        _hash_system(name, systems, settings, models, ann, cross_encoders, hashes)
    return SystemsConfig(settings, systems, hashes, cross_encoders)


def _cross_encoder_location(path: Path, name: str, source: PackageSource | PathSource | HubSource) -> ModelLocation:
    """Locate a cross-encoder without importing or loading it; a missing one is a ConfigError."""
    where = f"{path}: systems.{name}.source"
    if isinstance(source, HubSource):
        try:
            return ModelLocation(source.hub, resolve_commit(source.hub, source.revision, where=where))
        except HubError as error:
            raise ConfigError(str(error)) from None
    if isinstance(source, PackageSource):
        spec = find_spec(source.package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"{where}: package {source.package!r} is not installed; install it with pip")
        directory = (Path(next(iter(spec.submodule_search_locations))) / source.path).resolve()
    else:
        directory = resolve_path(path.parent, source.path)
    if not directory.is_dir():
        raise ConfigError(f"{where}: model directory {directory} does not exist; point it at a CrossEncoder folder")
    return ModelLocation(str(directory))


def _check_references(
    path: Path, name: str, spec: AnySystem, systems: Mapping[str, AnySystem], models: Mapping[str, ResolvedModel],
    ann: AnnConfig | None,
) -> None:
    where = f"{path}: systems.{name}"
    allowed = f"'{EXACT}', 'ann:<spec>[:<param>=<value>]' or another system ({', '.join(systems)})"
    for reference in spec.references():
        if reference == EXACT or reference in systems:
            if reference == name:
                raise ConfigError(f"{where}: a system cannot take itself as input")
            continue
        try:
            parsed = parse_ann_reference(reference)
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
        if parsed is None:
            raise ConfigError(f"{where}: unknown input {reference!r}; allowed: {allowed}")
        if ann is None:
            raise ConfigError(f"{where}: input {reference!r} needs the L4 index specs of ann.yaml, which this folder lacks")
        _check_ann_reference(where, reference, parsed, ann)
    if isinstance(spec, BiEncoderSystem) and spec.by not in models:
        raise ConfigError(f"{where}.by: {spec.by!r} is not a card of models.yaml; allowed: {', '.join(models)}")


def _check_ann_reference(where: str, reference: str, parsed: AnnReference, ann: AnnConfig) -> None:
    known = [s.name for s in ann.specs]
    if parsed.spec not in known:
        raise ConfigError(f"{where}: input {reference!r} names no index spec of ann.yaml; known: {', '.join(known)}")
    sweep = ann.spec(parsed.spec).sweep
    if sweep is None and parsed.param is not None:
        raise ConfigError(f"{where}: index spec {parsed.spec!r} has no sweep; write 'ann:{parsed.spec}'")
    if sweep is not None and (parsed.param != sweep.param or parsed.value not in sweep.values):
        points = ", ".join(f"'ann:{parsed.spec}:{sweep.param}={v}'" for v in sweep.values)
        raise ConfigError(f"{where}: input {reference!r} is not a sweep point of {parsed.spec!r}; allowed: {points}")


def _check_acyclic(path: Path, systems: Mapping[str, AnySystem]) -> None:
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = " -> ".join([*trail[trail.index(name):], name])
            raise ConfigError(f"{path}: systems form a cycle ({cycle}); a system's inputs must not lead back to it")
        state[name] = "visiting"
        for reference in systems[name].references():
            if reference in systems:
                visit(reference, [*trail, name])
        state[name] = "done"

    for name in systems:
        visit(name, [])


def _hash_system(
    name: str, systems: Mapping[str, AnySystem], settings: SystemsSettings, models: Mapping[str, ResolvedModel],
    ann: AnnConfig | None, cross_encoders: Mapping[str, ModelLocation], hashes: dict[str, str],
) -> str:
    if name in hashes:
        return hashes[name]
    spec = systems[name]
    inputs: dict[str, Any] = {}
    for reference in spec.references():
        if reference in systems:
            inputs[reference] = _hash_system(reference, systems, settings, models, ann, cross_encoders, hashes)
        elif (parsed := parse_ann_reference(reference)) is not None and ann is not None:
            index = ann.spec(parsed.spec)
            inputs[reference] = {"index": index.identity(), "seed": index.seed, "k": ann.settings.k}
        else:
            inputs[reference] = reference
    identity: dict[str, Any] = {"system": spec.identity(), "inputs": inputs, "format": _FORMAT_VERSION}
    if isinstance(spec, Bm25System | RrfSystem | WeightedSystem):
        identity["output_depth"] = settings.depth
    if isinstance(spec, WeightedSystem) and spec.sweep is not None:
        identity["dev_datasets"] = settings.dev_datasets
    if isinstance(spec, Bm25System):
        identity["libraries"] = {"bm25s": _version("bm25s"), "PyStemmer": _version("PyStemmer")}
    if isinstance(spec, CrossEncoderSystem):
        identity["libraries"] = {"sentence-transformers": _version("sentence-transformers")}
        if isinstance(spec.source, PackageSource):
            identity["libraries"][spec.source.package] = package_version(spec.source.package)
        if cross_encoders[name].commit is not None:
            identity["commit"] = cross_encoders[name].commit
    if isinstance(spec, BiEncoderSystem):
        identity["by_card"] = models[spec.by].card_hash
    hashes[name] = sha256_json(identity)
    return hashes[name]


def _version(distribution: str) -> str | None:
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return None
