"""Index specs of pyramid level L4, read from ``configs/ann.yaml``: which serving approximations
to evaluate, and the settings every spec shares.

An :class:`IndexSpec` names one serving approximation: a FAISS factory string (``kind:
faiss``), sign-binarized codes searched by Hamming distance and rescored with the float vectors
(``kind: binary``), or 8-bit codes of the stored vectors over a symmetric range per
dimension, searched by FAISS's scalar quantizer (``kind: int8``); any of them may first cut the vectors to their leading ``dimension``
coordinates (Matryoshka truncation; unit vectors are re-normalized after the cut, as the card's
own ``dimension`` would). A spec's search-time ``sweep`` lists the values of one parameter
(``efSearch`` for HNSW, ``nprobe`` for IVF, ``rescore`` candidates for binary).

A spec takes its metric from the model card (:func:`embedpyramid.serving.specs.resolve_metric`),
so one ann.yaml serves every card. Stochastic specs (IVF/PQ k-means, HNSW level draws) are built
``seeds`` times. How a spec is resolved, seeded and addressed on disk is
:mod:`embedpyramid.serving.specs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from embedpyramid.config.base import SAFE_NAME, SAFE_NAME_HELP, ConfigError, Strict, format_validation, read_yaml
from embedpyramid.config.measures import Measure, parse_measure
from embedpyramid.config.models import Similarity

SpecKind = Literal["faiss", "binary", "int8"]

NLIST_PLACEHOLDER = "{n}"
STOCHASTIC_MARKERS = ("IVF", "PQ", "HNSW", "RQ", "LSQ")
"""Factory components trained by seeded k-means or built with seeded level draws."""


class Sweep(Strict):
    """One search-time parameter and the values it takes; written ``{efSearch: [16, 32]}``."""

    param: Literal["efSearch", "nprobe", "rescore"]
    values: tuple[int, ...] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _increasing_positive(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if any(v < 1 for v in values) or list(values) != sorted(set(values)):
            raise ValueError(f"sweep values must be positive and strictly increasing, got {list(values)}")
        return values


class IndexSpec(Strict):
    """One index of level L4. ``metric`` (default: the card's similarity) is resolved per card
    by :func:`resolve_metric`. ``seed`` feeds IVF/PQ k-means and HNSW level draws (see
    :func:`embedpyramid.serving.index.build_index`); it defaults to ``settings.seed``, and a
    stochastic spec is built with ``seeds`` consecutive seeds from it (default
    ``settings.seeds``)."""

    name: str
    kind: SpecKind = "faiss"
    factory: str | None = None
    metric: Similarity | None = None
    dimension: int | None = Field(None, ge=1)
    sweep: Sweep | None = None
    seed: int
    seeds: int | None = Field(None, ge=1)

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep_mapping(cls, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1 and not {"param", "values"} & value.keys():
            ((param, values),) = value.items()
            return {"param": param, "values": values}
        if isinstance(value, dict) and not {"param", "values"} <= value.keys():
            raise ValueError(
                f"sweep must map one parameter to its values, e.g. {{efSearch: [16, 32, 64]}}; got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> IndexSpec:
        if self.kind == "faiss":
            if not self.factory:
                raise ValueError("kind 'faiss' needs a factory string, e.g. 'HNSW32' or 'IVF{n},Flat'")
            if self.factory.count(NLIST_PLACEHOLDER) != self.factory.count(f"IVF{NLIST_PLACEHOLDER}"):
                raise ValueError(f"factory {self.factory!r}: '{{n}}' is only allowed as the IVF list count, 'IVF{{n}}'")
        elif self.factory is not None:
            raise ValueError(f"kind {self.kind!r} takes no factory (got {self.factory!r})")
        allowed = self.allowed_sweep_params()
        if self.sweep is not None and self.sweep.param not in allowed:
            raise ValueError(
                f"sweep parameter {self.sweep.param!r} does not apply to {self.describe()}; "
                f"allowed: {', '.join(allowed) or 'none (drop sweep:)'}"
            )
        if self.kind == "binary" and self.sweep is None:
            raise ValueError("kind 'binary' needs sweep: {rescore: [...]}, the float-rescored candidates per query")
        return self

    @property
    def stochastic(self) -> bool:
        """Whether building it draws random numbers (k-means training, HNSW levels)."""
        return self.kind == "faiss" and any(marker in (self.factory or "") for marker in STOCHASTIC_MARKERS)

    def allowed_sweep_params(self) -> tuple[str, ...]:
        if self.kind == "binary":
            return ("rescore",)
        factory = self.factory or ""
        return tuple(p for p, marker in (("efSearch", "HNSW"), ("nprobe", "IVF")) if marker in factory)

    def describe(self) -> str:
        return f"spec {self.name!r} ({self.kind} {self.factory or ''}".rstrip() + ")"

    def cut_beyond(self, dimension: int) -> str | None:
        """Why this spec does not apply to vectors of ``dimension`` (None when it does): a cut to
        as many coordinates as the vectors have, or more, is no Matryoshka cut (the uncut spec
        measures the same index, or there is nothing to cut to)."""
        if self.dimension is None or self.dimension < dimension:
            return None
        return (f"{self.describe()} cuts to {self.dimension} dimensions, but the card's vectors have {dimension}: "
                "skipped (a cut must keep fewer dimensions than the vectors have)")

    def identity(self) -> dict[str, Any]:
        """What determines the built index: everything but the label, the sweep and the seeds."""
        return {"kind": self.kind, "factory": self.factory, "metric": self.metric, "dimension": self.dimension}


class AnnSettings(Strict):
    """Settings shared by every spec; recorded with the L4 results.

    ``k`` is both the ANN search depth and the cutoff of ANN recall@k; every relevance measure
    is computed on that top-k, so cutoffs above ``k`` (and RPrec) are refused. QPS is measured
    at ``batch_size`` queries per call, the fastest of ``timing_repeats`` passes; latency at
    batch 1 over ``latency_queries`` queries drawn with ``seed``. A stochastic spec is built
    with ``seeds`` seeds and its recall and delta reported as mean ± sd over them.
    """

    k: int = Field(10, ge=1)
    measures: tuple[str, ...] = ("nDCG@10", "Recall@10", "MRR@10", "MAP@10", "P@10", "Hit@10")
    delta_metric: str = "nDCG@10"
    batch_size: int = Field(256, ge=1)
    latency_queries: int = Field(200, ge=1)
    timing_repeats: int = Field(3, ge=1)
    recall_targets: tuple[float, ...] = (0.9, 0.95, 0.99)
    threads: int = Field(1, ge=1)
    seed: int = 42
    seeds: int = Field(3, ge=1)

    @model_validator(mode="after")
    def _measures_within_k(self) -> AnnSettings:
        for text in self.measures:
            measure = parse_measure(text)
            if measure.cutoff is None or measure.cutoff > self.k:
                raise ValueError(
                    f"measure {text!r} reads past the ANN depth k={self.k}; allowed: measures with a cutoff <= k"
                )
        if self.delta_metric not in self.measures:
            raise ValueError(f"delta_metric {self.delta_metric!r} is not measured; allowed: {', '.join(self.measures)}")
        if not self.recall_targets or any(not 0.0 < t <= 1.0 for t in self.recall_targets):
            raise ValueError(f"recall_targets must be in (0, 1], got {list(self.recall_targets)}")
        return self

    def measure_objects(self) -> list[Measure]:
        return [parse_measure(text) for text in self.measures]


class AnnConfig(Strict):
    settings: AnnSettings
    specs: tuple[IndexSpec, ...]

    def spec(self, name: str) -> IndexSpec:
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(f"no index spec {name!r}; known: {', '.join(s.name for s in self.specs)}")


def load_ann_config(path: str | Path) -> AnnConfig:
    """Read and validate ``ann.yaml``; a ConfigError names the file, the key and what is allowed."""
    path = Path(path)
    data = read_yaml(path, "ann.yaml holds the L4 settings and index specs")
    if set(data) - {"settings", "indexes"}:
        raise ConfigError(f"{path}: the top level must be a mapping with keys 'settings' and 'indexes'")
    try:
        settings = AnnSettings.model_validate(data.get("settings") or {})
    except ValidationError as error:
        raise format_validation(path, "settings", error) from None
    indexes = data.get("indexes")
    if not isinstance(indexes, dict) or not indexes:
        raise ConfigError(f"{path}: needs a non-empty mapping under 'indexes:'")
    specs = []
    for name, raw in indexes.items():
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise ConfigError(f"{path}: indexes.{name}: names must be {SAFE_NAME_HELP}")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: indexes.{name}: must be a mapping, e.g. {{factory: HNSW32}}")
        try:
            spec = IndexSpec.model_validate({"seed": settings.seed, **raw, "name": name})
        except ValidationError as error:
            raise format_validation(path, f"indexes.{name}", error) from None
        if spec.kind == "binary" and spec.sweep is not None and min(spec.sweep.values) < settings.k:
            raise ConfigError(
                f"{path}: indexes.{name}.sweep: rescore values must be at least settings.k={settings.k} "
                f"(the candidates rescored per query), got {list(spec.sweep.values)}"
            )
        specs.append(spec)
    return AnnConfig(settings=settings, specs=tuple(specs))
