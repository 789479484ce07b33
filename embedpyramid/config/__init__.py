"""Typed, validated configuration: model eval cards, datasets (with their published scores) and the
evaluation protocol.

A config folder is self-contained: ``models.yaml``, ``datasets.yaml``, ``protocol.yaml`` and,
optionally, ``ann.yaml`` (the L4 index specs; without it L4 is not evaluated) and ``judge.yaml``
(the L6 generator, judge and grade analysis; without it L6 is not evaluated).
Relative paths inside it resolve against the folder, so a user keeps their own folder beside
the defaults. Every validation error names the file, the key and what is allowed.
"""

from embedpyramid.config.base import SAFE_NAME, SAFE_NAME_HELP, ConfigError
from embedpyramid.config.datasets import (
    AnyDataset,
    BeirDataset,
    ChatterbotDataset,
    PublishedDataset,
    SquadDataset,
    has_data,
    load_datasets,
)
from embedpyramid.config.judge import (
    CRITERION_DESCRIPTIONS,
    AnalysisConfig,
    DownstreamConfig,
    EndpointConfig,
    GeneratorConfig,
    JudgeConfig,
    PowerConfig,
    load_downstream_config,
)
from embedpyramid.config.models import (
    HubSource,
    ModelCard,
    PackageSource,
    PathSource,
    ResolvedModel,
    RunSettings,
    load_models,
    resolve_source,
)
from embedpyramid.config.project import ProjectConfig, load_config
from embedpyramid.config.protocol import ComparisonConfig, Protocol, SearchSettings, load_protocol
from embedpyramid.config.references import (
    CORRELATION_METRICS,
    MtebResultsImport,
    ReferenceScore,
    canonical_metric,
)

__all__ = [
    "CORRELATION_METRICS",
    "CRITERION_DESCRIPTIONS",
    "SAFE_NAME",
    "SAFE_NAME_HELP",
    "AnalysisConfig",
    "AnyDataset",
    "BeirDataset",
    "ChatterbotDataset",
    "ComparisonConfig",
    "ConfigError",
    "DownstreamConfig",
    "EndpointConfig",
    "GeneratorConfig",
    "HubSource",
    "JudgeConfig",
    "ModelCard",
    "MtebResultsImport",
    "PackageSource",
    "PathSource",
    "PowerConfig",
    "ProjectConfig",
    "Protocol",
    "PublishedDataset",
    "ReferenceScore",
    "ResolvedModel",
    "RunSettings",
    "SearchSettings",
    "SquadDataset",
    "canonical_metric",
    "has_data",
    "load_config",
    "load_datasets",
    "load_downstream_config",
    "load_models",
    "load_protocol",
    "resolve_source",
]
