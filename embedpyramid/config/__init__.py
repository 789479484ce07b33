"""Typed, validated configuration: model eval cards, datasets and the evaluation protocol.

A config folder is self-contained: ``models.yaml``, ``datasets.yaml``, ``protocol.yaml`` and,
optionally, ``ann.yaml`` (the L4 index specs; without it L4 is not evaluated).
Relative paths inside it resolve against the folder, so a user keeps their own folder beside
the defaults. Every validation error names the file, the key and what is allowed.
"""

from embedpyramid.config.base import SAFE_NAME, SAFE_NAME_HELP, ConfigError
from embedpyramid.config.datasets import AnyDataset, BeirDataset, ChatterbotDataset, load_datasets
from embedpyramid.config.models import (
    ApiSettings,
    BedrockSource,
    HttpSource,
    HubSource,
    ModelCard,
    PackageSource,
    PathSource,
    ResolvedModel,
    RunSettings,
    Similarity,
    load_models,
    resolve_source,
)
from embedpyramid.config.project import ProjectConfig, load_config
from embedpyramid.config.protocol import ComparisonConfig, Protocol, SearchSettings, load_protocol

__all__ = [
    "SAFE_NAME",
    "SAFE_NAME_HELP",
    "AnyDataset",
    "ApiSettings",
    "BedrockSource",
    "BeirDataset",
    "ChatterbotDataset",
    "ComparisonConfig",
    "ConfigError",
    "HttpSource",
    "HubSource",
    "ModelCard",
    "PackageSource",
    "PathSource",
    "ProjectConfig",
    "Protocol",
    "ResolvedModel",
    "RunSettings",
    "SearchSettings",
    "Similarity",
    "load_config",
    "load_datasets",
    "load_models",
    "load_protocol",
    "resolve_source",
]
