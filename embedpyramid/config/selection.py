"""Which cards and datasets a command evaluates: ``--models`` and ``--datasets`` read against a config."""

from __future__ import annotations

from collections.abc import Sequence

from embedpyramid.config import ConfigError, ProjectConfig, ResolvedModel


def select_models(config: ProjectConfig, requested: Sequence[str] | None) -> list[ResolvedModel]:
    """Cards by name or by key (``minilm-l6`` or ``minilm-l6@2935d10``); all when none requested."""
    if not requested:
        return list(config.models.values())
    by_key = {model.key: model for model in config.models.values()}
    unknown = [item for item in requested if item not in config.models and item not in by_key]
    if unknown:
        cards = ", ".join(f"{model.name} ({model.key})" for model in config.models.values())
        raise ConfigError(f"unknown models {unknown}; {config.directory / 'models.yaml'} defines: {cards}")
    return [config.models[item] if item in config.models else by_key[item] for item in dict.fromkeys(requested)]


def select_datasets(config: ProjectConfig, requested: Sequence[str] | None) -> list[str]:
    """The requested datasets (all by default), retrieval and task datasets, that have data to
    evaluate: a ``published`` entry has only published scores, which the transfer analysis reads."""
    with_data = [*config.datasets_with_data(), *config.task_datasets]
    if not requested:
        return with_data
    known = [*config.datasets, *config.task_datasets]
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise ConfigError(f"unknown datasets {unknown}; {config.directory / 'datasets.yaml'} defines: "
                          f"{', '.join(known)}")
    published = [name for name in requested if name not in with_data]
    if published:
        raise ConfigError(f"datasets {published} are published scores only (loader: published), nothing to evaluate; "
                          f"datasets with data: {', '.join(with_data) or 'none'}")
    return list(dict.fromkeys(requested))
