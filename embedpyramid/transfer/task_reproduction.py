"""Reproduce published numbers on the L2 task families: each published score of a task dataset
against the whole-set statistic its family computed under the protocol the number was published
with (STS Spearman, pair-classification max AP, classification accuracy, clustering V-measure,
bitext F1 — :data:`~embedpyramid.config.references.TASK_REFERENCE_METRICS`), pass/fail within the
tolerance as retrieval's check (:func:`~embedpyramid.transfer.reproduction.check_reproduction`),
the causes of a mismatch named with this run's values.

A score the family cannot check was refused when the config loaded; one whose model has no
current result, or whose split or language pair the result does not hold, is ``not measured``
with the reason — never a pass, never silent.
"""

from __future__ import annotations

import polars as pl

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.config.references import TASK_REFERENCE_METRICS
from embedpyramid.current_inputs import SummaryInputs, task_asset_name
from embedpyramid.store import ArtifactStore
from embedpyramid.tasks.common import ALL, TaskResult
from embedpyramid.tasks.level import read_task_result, tasks_dir
from embedpyramid.transfer.references import PublishedScore, dataset_references
from embedpyramid.transfer.reproduction import ReproductionCheck, TaskReproductionContext, check_reproduction

SPLIT_ALIASES = {"test": "all"}
"""A clustering is scored on every item: its one split (``all``) stands for MTEB's ``test``."""


def measured_statistic(result: TaskResult, task: str, protocol: str, reference: PublishedScore
                       ) -> tuple[float | None, int, str | None, str | None, str | None]:
    """``(value, n_items, split, subset, why_not)`` of the statistic ``reference`` names in a task
    result's summary; ``value`` is None with ``why_not`` when the summary does not hold it."""
    used = result.settings.get("protocol", "project")
    if used != protocol:
        return None, 0, None, None, f"the stored result was computed under protocol {used!r}, not {protocol!r}"
    system, metric = TASK_REFERENCE_METRICS[(task, protocol)][reference.metric]
    rows = result.summary.filter(pl.col("metric") == metric)
    if system:
        rows = rows.filter(pl.col("system") == system)
    elif rows["system"].n_unique() > 1:
        return None, 0, None, None, f"several systems report {metric}: {', '.join(rows['system'].unique().sort())}"
    subsets = sorted(rows["subset"].unique().to_list())
    subset = reference.subset or (ALL if ALL in subsets else subsets[0] if len(subsets) == 1 else None)
    if subset not in subsets:
        return None, 0, None, None, (f"give the subset (language pair) of the score; the result has "
                                     f"{', '.join(subsets) or 'none'}")
    rows = rows.filter(pl.col("subset") == subset)
    splits = sorted(rows["split"].unique().to_list())
    wanted = reference.split
    if wanted is not None and wanted not in splits:
        wanted = SPLIT_ALIASES.get(wanted, wanted)
    split = wanted or (splits[0] if len(splits) == 1 else "test" if "test" in splits else None)
    if split not in splits:
        return None, 0, None, subset, f"split {reference.split or 'unspecified'} not in the result's splits {splits}"
    row = rows.filter(pl.col("split") == split).row(0, named=True)
    return float(row["value"]), int(row["n_items"]), split, subset, None


def task_reproduction(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs) -> list[ReproductionCheck]:
    """Every published score of every task dataset, checked against each card's current L2
    result (``not measured`` where the card has none, or it is not current)."""
    checks = []
    for name, spec in config.task_datasets.items():
        references = dataset_references(config, name).scores
        if not references:
            continue
        settings = spec.task_settings
        assert settings is not None
        for model in config.models.values():
            mine = [reference for reference in references if reference.model == model.name]
            if not mine:
                continue
            directory = tasks_dir(store, name, model.key)
            current = (directory / "summary.parquet").is_file() and inputs.admits(task_asset_name(spec.task), name,
                                                                                  model.key)
            result = read_task_result(directory) if current else None
            for reference in mine:
                checks.append(_check(reference, result, spec.task, settings.protocol, model,
                                     settings.text_kind))
    return checks


def _check(reference: PublishedScore, result: TaskResult | None, task: str, protocol: str, model: ResolvedModel,
           text_kind: str) -> ReproductionCheck:
    prompt = model.card.query_prompt if text_kind == "query" else model.card.document_prompt
    if result is None:
        context = TaskReproductionContext(task, protocol, model.similarity, prompt, None, None, {})
        return check_reproduction(reference, None, model_key=model.key, n_items=0, context=context,
                                  why_not=f"no current task_{task} result for {model.key}: evaluate it")
    value, n_items, split, subset, why_not = measured_statistic(result, task, protocol, reference)
    context = TaskReproductionContext(task, protocol, str(result.settings.get("similarity", model.similarity)), prompt,
                                      split, subset, result.settings)
    return check_reproduction(reference, value, model_key=model.key, n_items=n_items, context=context, why_not=why_not)
