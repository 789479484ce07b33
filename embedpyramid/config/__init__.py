"""Typed, validated configuration: model eval cards, datasets (their loader, L2 task and published
scores), the evaluation protocol and the L4 index specs. The settings that only a computation
resolves live beside them and are imported by name: one dataset's paired comparisons
(:mod:`embedpyramid.config.comparison`) and the L3 transfer analysis
(:mod:`embedpyramid.config.transfer`).

A config folder is self-contained: ``models.yaml``, ``datasets.yaml``, ``protocol.yaml`` and,
optionally, ``ann.yaml`` (the L4 index specs), ``systems.yaml`` (the L5 systems) and
``judge.yaml`` (the L6 generator, judge and grade analysis); a level whose file is absent is not
evaluated. Relative paths inside it resolve against the folder, so a user keeps their own folder
beside the defaults. Every validation error names the file, the key and what is allowed.
"""

from embedpyramid.config.ann import (
    AnnConfig,
    AnnSettings,
    IndexSpec,
    Sweep,
    load_ann_config,
)
from embedpyramid.config.base import (
    SAFE_NAME,
    SAFE_NAME_HELP,
    ConfigError,
)
from embedpyramid.config.conventions import TIE_RULES, MetricConventions
from embedpyramid.config.datasets import (
    AnyDataset,
    BeirDataset,
    ChatterbotDataset,
    DatasetEntry,
    DjangoBitextDataset,
    LeeDataset,
    MtebDataset,
    NewsgroupsDataset,
    PublishedDataset,
    SquadDataset,
    StsFileDataset,
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
from embedpyramid.config.measures import Measure, default_measures, parse_measure
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
from embedpyramid.config.project import (
    ProjectConfig,
    load_config,
)
from embedpyramid.config.protocol import (
    ComparisonConfig,
    Protocol,
    SearchSettings,
    load_protocol,
)
from embedpyramid.config.references import (
    CORRELATION_METRICS,
    MtebResultsImport,
    ReferenceScore,
    canonical_metric,
)
from embedpyramid.config.tasks import (
    TASK_FAMILIES,
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    MultilabelClassificationSettings,
    PairClassificationSettings,
    RerankingSettings,
    StsSettings,
    Task,
    TaskSettings,
)

__all__ = [
    "CORRELATION_METRICS",
    "CRITERION_DESCRIPTIONS",
    "SAFE_NAME",
    "SAFE_NAME_HELP",
    "TASK_FAMILIES",
    "TIE_RULES",
    "AnalysisConfig",
    "AnnConfig",
    "AnnSettings",
    "AnyDataset",
    "ApiSettings",
    "BedrockSource",
    "BeirDataset",
    "BitextSettings",
    "ChatterbotDataset",
    "ClassificationSettings",
    "ClusteringSettings",
    "ComparisonConfig",
    "ConfigError",
    "DatasetEntry",
    "DjangoBitextDataset",
    "DownstreamConfig",
    "EndpointConfig",
    "GeneratorConfig",
    "HttpSource",
    "HubSource",
    "IndexSpec",
    "JudgeConfig",
    "Measure",
    "MetricConventions",
    "LeeDataset",
    "ModelCard",
    "MtebDataset",
    "MultilabelClassificationSettings",
    "MtebResultsImport",
    "NewsgroupsDataset",
    "PackageSource",
    "PairClassificationSettings",
    "RerankingSettings",
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
    "StsFileDataset",
    "StsSettings",
    "Sweep",
    "Task",
    "TaskSettings",
    "canonical_metric",
    "default_measures",
    "has_data",
    "Similarity",
    "load_ann_config",
    "load_config",
    "load_datasets",
    "load_downstream_config",
    "load_models",
    "load_protocol",
    "parse_measure",
    "resolve_source",
]
