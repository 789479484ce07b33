"""Pyramid L6 settings (``judge.yaml``): contexts, the generator, the judge and the grade analysis.

Everything downstream of retrieval is held fixed across models — context depth, generator,
judge, criteria, prompts — so that a difference in the answers is a difference made by the
embedding. The file is optional: a config folder without it does not evaluate L6.

HTTP endpoints (an OpenAI-compatible ``/chat/completions`` service) are named by environment
variables, never written here: the base URL, the model name and the API key each come from the
variable the endpoint block names, so a config folder can be shared without a secret in it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, read_yaml
from embedpyramid.config.systems import EXACT, SystemsConfig

CRITERION_DESCRIPTIONS: dict[str, str] = {
    "relevance": "Does the answer address the question that was asked, with correct content supported by the passages?",
    "ranking": "Are the passages that answer the question placed first in the context, ahead of irrelevant ones?",
    "coverage": "Does the context hold everything needed to answer the question completely?",
}
"""The criteria every judge knows, with the definition the HTTP judge is given; the qrels judge
derives exactly these three from the relevance judgements."""

_CRITERION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EndpointConfig(Strict):
    """An OpenAI-compatible chat endpoint: the environment variables holding its base URL
    (``.../v1``), model name and API key, and how patiently to call it."""

    url_env: str = "EMBEDPYRAMID_LLM_URL"
    model_env: str = "EMBEDPYRAMID_LLM_MODEL"
    key_env: str = "EMBEDPYRAMID_LLM_KEY"
    attempts: int = Field(5, ge=1)
    backoff_seconds: float = Field(1.0, ge=0)
    max_backoff_seconds: float = Field(30.0, ge=0)
    timeout_seconds: float = Field(60.0, gt=0)
    requests_per_minute: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _variable_names(self) -> EndpointConfig:
        for field in ("url_env", "model_env", "key_env"):
            if not _ENV_NAME.match(getattr(self, field)):
                raise ValueError(f"{field} must name an environment variable (letters, digits, '_'), "
                                 f"got {getattr(self, field)!r}; put the value itself in the environment")
        return self


class GeneratorConfig(Strict):
    """``extractive``: the best sentence of the context by a fixed lexical rule, citing its passage
    (offline); ``http``: an OpenAI-compatible chat model at temperature 0 citing passages as [n]."""

    kind: Literal["extractive", "http"] = "extractive"
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig)
    max_tokens: int = Field(256, ge=1)
    prompt_version: str = Field("answer-v1", min_length=1)


class JudgeConfig(Strict):
    """``qrels``: grades derived from the relevance judgements (offline, documented mapping);
    ``http``: an OpenAI-compatible chat model at temperature 0 returning JSON grades.

    ``criteria`` are graded 1-5; a criterion outside relevance/ranking/coverage needs a
    definition under ``descriptions`` (and an HTTP judge: the qrels only define the three).
    """

    kind: Literal["qrels", "http"] = "qrels"
    criteria: list[str] = Field(default_factory=lambda: list(CRITERION_DESCRIPTIONS))
    descriptions: dict[str, str] = Field(default_factory=dict)
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig)
    max_tokens: int = Field(300, ge=1)
    prompt_version: str = Field("judge-v1", min_length=1)

    @model_validator(mode="after")
    def _criteria_defined(self) -> JudgeConfig:
        if not self.criteria or len(set(self.criteria)) != len(self.criteria):
            raise ValueError(f"criteria must be a non-empty list of distinct names; got {self.criteria}")
        for name in self.criteria:
            if not _CRITERION_NAME.match(name):
                raise ValueError(f"criterion {name!r}: names are lowercase letters, digits or '_', "
                                 "starting with a letter (they become metric names judge:<name>)")
            if name not in CRITERION_DESCRIPTIONS and name not in self.descriptions:
                raise ValueError(f"criterion {name!r} needs a definition under descriptions: "
                                 f"(built in: {', '.join(CRITERION_DESCRIPTIONS)})")
        if self.kind == "qrels":
            unknown = [name for name in self.criteria if name not in CRITERION_DESCRIPTIONS]
            if unknown:
                raise ValueError(f"the qrels judge grades only {', '.join(CRITERION_DESCRIPTIONS)}; "
                                 f"{unknown} need kind: http")
        return self

    def description(self, criterion: str) -> str:
        return self.descriptions.get(criterion) or CRITERION_DESCRIPTIONS[criterion]


class PowerConfig(Strict):
    """The simulation-based power analysis: queries needed to detect ``difference`` grade points
    between two models with probability ``target`` at the analysis' alpha."""

    difference: float = Field(0.25, gt=0)
    target: float = Field(0.8, gt=0, lt=1)
    n_simulations: int = Field(2000, ge=100)
    max_queries: int = Field(20_000, ge=2)


class AnalysisConfig(Strict):
    """How grades are modelled: ``alpha`` for every test, a model x criterion ``interaction``
    term, the covariance of the Wald tests (``cluster``: sandwich clustered on the query, as
    every query is graded under every model; ``model``: the fitted model's own), and the seed
    of every simulation."""

    alpha: float = Field(0.05, gt=0, lt=1)
    confidence: float = Field(0.95, gt=0, lt=1)
    interaction: bool = False
    covariance: Literal["cluster", "model"] = "cluster"
    power: PowerConfig = Field(default_factory=PowerConfig)
    seed: int = 42


class DownstreamConfig(Strict):
    """The whole of ``judge.yaml``."""

    k: int = Field(5, ge=1)
    systems: list[str] = Field(default_factory=lambda: ["exact"])
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)

    @model_validator(mode="after")
    def _systems_named(self) -> DownstreamConfig:
        if not self.systems or len(set(self.systems)) != len(self.systems):
            raise ValueError(f"systems must be a non-empty list of distinct retrieval systems; got {self.systems}")
        return self


def load_downstream_config(path: Path, systems: SystemsConfig | None = None) -> DownstreamConfig:
    """Read and validate ``judge.yaml`` against the L5 systems of its folder (``systems``: the
    validated ``systems.yaml``, None without one); a ConfigError names the file, the key and
    what is allowed.

    A system answered from must be ``exact`` or a system of systems.yaml that runs per model: a
    model-independent one (BM25, or a rerank of BM25) is one run for every model, so it can
    tell no model apart.
    """
    data = read_yaml(path, "judge.yaml holds the L6 generator, judge and analysis settings")
    try:
        config = DownstreamConfig.model_validate(data)
    except ValidationError as error:
        raise format_validation(path, "", error) from None
    per_model = [name for name in (systems.systems if systems else {}) if not systems.model_independent(name)]
    allowed = ", ".join([EXACT, *per_model])
    for index, name in enumerate(config.systems):
        if name == EXACT or name in per_model:
            continue
        if systems is not None and name in systems.systems:
            raise ConfigError(f"{path}: systems.{index}: {name!r} is computed once per dataset, not per model "
                              f"(no input reads the evaluated model), so its answers cannot compare models; "
                              f"allowed: {allowed}")
        where = "a system of systems.yaml" if systems is not None else "a system (this folder has no systems.yaml)"
        raise ConfigError(f"{path}: systems.{index}: {name!r} is not {where}; allowed: {allowed}")
    return config

