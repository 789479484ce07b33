"""Pyramid L3 from a config folder: the published scores of each dataset, the reproduction checks
of one (model, dataset), the transfer analysis over every dataset, and their artefacts under
``<data>/transfer`` — what the level's assets call.

Which measure a dataset ranks models by (its confirmatory measure): ``confirmatory_metric`` of
its entry; otherwise, for a published-only dataset, the one measure its scores use; otherwise the
protocol's ``comparison.report_metric``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from embedpyramid.config import CORRELATION_METRICS, ConfigError, ProjectConfig, PublishedDataset, ResolvedModel
from embedpyramid.data import FrozenDataset
from embedpyramid.store import ArtifactStore, read_frame, read_table_metadata, write_parquet
from embedpyramid.transfer.analysis import TransferResult, TransferSettings, transfer_analysis
from embedpyramid.transfer.references import DatasetReferences, dataset_references
from embedpyramid.transfer.reproduction import ReproductionCheck, ReproductionContext, reproduce, reproduction_frame
from embedpyramid.transfer.scores import DatasetScores, PublishedScores, QueryMeanScores

TRANSFER_TABLES = ("rankings", "pairs", "flips")


def transfer_dir(store: ArtifactStore) -> Path:
    return store.root / "transfer"


def confirmatory_metric(config: ProjectConfig, dataset: str, references: DatasetReferences) -> str:
    spec = config.dataset(dataset)
    if spec.confirmatory_metric is not None:
        return spec.confirmatory_metric
    if isinstance(spec, PublishedDataset):
        metrics = sorted({score.metric for score in references.scores})
        if len(metrics) != 1:
            raise ConfigError(
                f"{config.directory / 'datasets.yaml'}: datasets.{dataset}: published scores for several measures "
                f"({', '.join(metrics)}); set confirmatory_metric to the one models are ranked by"
            )
        return metrics[0]
    return config.protocol.comparison.report_metric


def transfer_settings(config: ProjectConfig) -> TransferSettings:
    """The paired comparisons' resampling settings (``protocol.yaml``, ``comparison:``)."""
    comparison = config.protocol.comparison
    return TransferSettings(n_resamples=comparison.n_resamples, seed=comparison.seed,
                            confidence=comparison.confidence, tie_epsilon=comparison.tie_epsilon)


def query_groups(config: ProjectConfig, dataset: str, frozen: FrozenDataset) -> dict[str, str] | None:
    """query id → resampling group, when the dataset names a ``group_column``."""
    column = config.dataset(dataset).group_column
    if column is None:
        return None
    queries = read_frame(frozen.path("queries"), columns=["query_id", column])
    return dict(zip(queries["query_id"], queries[column].cast(pl.String), strict=True))


def reproduction_context(model: ResolvedModel, conventions: Mapping[str, object], corpus: pa.Table | None) -> ReproductionContext:
    """The card's prompts, the stored metric conventions, and how many documents carry a title."""
    titled = None if corpus is None else sum(1 for title in corpus.column("title").to_pylist() if title)
    return ReproductionContext(model.card.query_prompt, model.card.document_prompt, titled,
                               None if corpus is None else corpus.num_rows, conventions)


def reproduce_model(config: ProjectConfig, dataset: str, model: ResolvedModel, per_query: pl.DataFrame, *,
                    conventions: Mapping[str, object], corpus: pa.Table | None, system: str = "exact") -> list[ReproductionCheck]:
    """The reproduction checks of one (model, dataset): every published score of the card there.

    ``conventions`` are the ones stored with the metric table; ``corpus`` is the frozen corpus.
    """
    references = dataset_references(config, dataset).scores
    return reproduce(references, per_query, model=model.name, model_key=model.key,
                     context=reproduction_context(model, conventions, corpus), system=system)


def transfer_inputs(
    config: ProjectConfig, per_query: pl.DataFrame, *, groups: Mapping[str, Mapping[str, str]] | None = None,
    prepared: Mapping[str, DatasetScores] | None = None, system: str = "exact",
) -> tuple[list[DatasetScores], dict[str, str]]:
    """Each dataset's scores for the transfer analysis, and the datasets left out with the reason.

    On-disk datasets rank models by the mean of their per-query values; published-only ones by
    their published scores (cards mapped to their partition keys). ``prepared`` holds scores
    the caller built for datasets whose measure is not a mean over queries (STS correlations,
    :class:`~embedpyramid.transfer.scores.CorrelationScores`).
    """
    inputs: list[DatasetScores] = []
    skipped: dict[str, str] = {}
    evaluated = set(per_query.filter(pl.col("system") == system)["dataset"].unique().to_list())
    for name, spec in config.datasets.items():
        if prepared is not None and name in prepared:
            inputs.append(prepared[name])
            continue
        references = dataset_references(config, name)
        metric = confirmatory_metric(config, name, references)
        if isinstance(spec, PublishedDataset):
            scores = {s.model: s.value for s in references.scores if s.metric == metric}
            if not scores:
                skipped[name] = f"no published {metric} score"
                continue
            cards = sorted(scores)
            inputs.append(PublishedScores(name, metric, tuple(config.models[c].key for c in cards),
                                          np.array([scores[c] for c in cards], dtype=np.float64)))
        elif metric in CORRELATION_METRICS:
            skipped[name] = f"{metric} is computed over all items: pass its CorrelationScores as prepared"
        elif name not in evaluated:
            skipped[name] = "no per-query values yet (the dataset has not been evaluated)"
        else:
            inputs.append(QueryMeanScores.from_per_query(
                per_query, dataset=name, metric=metric, role=spec.role, system=system,
                groups=None if groups is None else groups.get(name)))
    return inputs, skipped


def analyse_transfer(
    config: ProjectConfig, per_query: pl.DataFrame, *, groups: Mapping[str, Mapping[str, str]] | None = None,
    prepared: Mapping[str, DatasetScores] | None = None, system: str = "exact",
) -> TransferResult:
    """The transfer analysis over every dataset of the config, under the protocol's resampling settings."""
    inputs, skipped = transfer_inputs(config, per_query, groups=groups, prepared=prepared, system=system)
    result = transfer_analysis(inputs, transfer_settings(config))
    return TransferResult(result.rankings, result.pairs, result.flips,
                          {**result.settings, "system": system, "skipped_datasets": skipped})


def write_transfer(result: TransferResult, directory: Path) -> Path:
    """``rankings``, ``pairs`` and ``flips`` Parquet tables, each carrying the settings."""
    metadata = {"embedpyramid": json.dumps(result.settings, sort_keys=True, default=str)}
    for name in TRANSFER_TABLES:
        table = getattr(result, name).to_arrow()
        write_parquet(table.replace_schema_metadata(metadata), directory / f"{name}.parquet")
    return directory


def read_transfer(directory: Path) -> TransferResult:
    tables = {name: read_frame(directory / f"{name}.parquet") for name in TRANSFER_TABLES}
    return TransferResult(**tables, settings=read_table_metadata(directory / "pairs.parquet"))


def write_reproduction(checks: list[ReproductionCheck], target: Path) -> Path:
    """Every reproduction check as one table (``REPRODUCTION_SCHEMA``)."""
    return write_parquet(reproduction_frame(checks).to_arrow(), target)
