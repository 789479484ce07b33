"""Reproduce published numbers on the L2 task families: each published score of a task dataset
against the whole-set statistic its family computed under the protocol the number was published
with (STS Spearman, pair-classification max AP, classification accuracy, clustering V-measure,
bitext F1, reranking MAP@1000, multi-label accuracy —
:data:`~embedpyramid.config.references.TASK_REFERENCE_METRICS`), pass/fail as retrieval's check
(:func:`~embedpyramid.transfer.reproduction.check_reproduction`): within the tolerance for a
deterministic protocol, within the stated multiple of the spread the result measured over its
seeds for a stochastic one; the causes of a mismatch named with this run's values.

A score the family cannot check was refused when the config loaded; one whose model has no
current result, or whose split or language pair the result does not hold, is ``not measured``
with the reason — never a pass, never silent.
"""

from __future__ import annotations

import polars as pl

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.config.references import TASK_REFERENCE_METRICS
from embedpyramid.current_inputs import SummaryInputs, task_asset_name
from embedpyramid.data import open_frozen
from embedpyramid.store import ArtifactStore
from embedpyramid.tasks.common import ALL, TaskResult
from embedpyramid.tasks.level import read_task_result, tasks_dir
from embedpyramid.transfer.references import PublishedScore, dataset_references
from embedpyramid.transfer.reproduction import Noise, ReproductionCheck, TaskReproductionContext, check_reproduction

SPLIT_ALIASES = {"test": "all"}
"""A clustering is scored on every item: its one split (``all``) stands for MTEB's ``test``."""


def measured_statistic(result: TaskResult, task: str, protocol: str, reference: PublishedScore,
                       read_subset: str | None = None
                       ) -> tuple[float | None, int, str | None, str | None, str | None, Noise | None]:
    """``(value, n_items, split, subset, why_not, noise)`` of the statistic ``reference`` names in a
    task result's summary; ``value`` is None with ``why_not`` when the summary does not hold it.
    ``noise`` is the spread the result measured for that statistic over its seeds (stochastic
    protocols). A family that reads one subset (``read_subset``, from the frozen dataset) scores
    it as a whole (``all``): a reference naming another subset is not measured."""
    used = result.settings.get("protocol", "project")
    if used != protocol:
        return None, 0, None, None, f"the stored result was computed under protocol {used!r}, not {protocol!r}", None
    system, metric = TASK_REFERENCE_METRICS[(task, protocol)][reference.metric]
    rows = result.summary.filter(pl.col("metric") == metric)
    if system:
        rows = rows.filter(pl.col("system") == system)
    elif rows["system"].n_unique() > 1:
        return (None, 0, None, None, f"several systems report {metric}: {', '.join(rows['system'].unique().sort())}",
                None)
    subsets = sorted(rows["subset"].unique().to_list())
    subset = reference.subset or (ALL if ALL in subsets else subsets[0] if len(subsets) == 1 else None)
    if subset not in subsets and subsets == [ALL] and subset is not None:
        if read_subset != subset:
            return None, 0, None, None, (f"the score is for subset {subset!r} but the dataset reads subset "
                                         f"{read_subset!r}; point an entry at subset {subset!r}"), None
        subset = ALL
    if subset not in subsets:
        return None, 0, None, None, (f"give the subset (language pair) of the score; the result has "
                                     f"{', '.join(subsets) or 'none'}"), None
    rows = rows.filter(pl.col("subset") == subset)
    splits = sorted(rows["split"].unique().to_list())
    wanted = reference.split
    if wanted is not None and wanted not in splits:
        wanted = SPLIT_ALIASES.get(wanted, wanted)
    split = wanted or (splits[0] if len(splits) == 1 else "test" if "test" in splits else None)
    if split not in splits:
        return (None, 0, None, subset, f"split {reference.split or 'unspecified'} not in the result's splits {splits}",
                None)
    row = rows.filter(pl.col("split") == split).row(0, named=True)
    return float(row["value"]), int(row["n_items"]), split, subset, None, recorded_noise(result, metric)


def recorded_noise(result: TaskResult, metric: str) -> Noise | None:
    """The spread of ``metric`` over seeds that a stochastic result recorded (``settings["noise"]``),
    or None (a deterministic family, or no noise runs)."""
    noise = result.settings.get("noise") or {}
    spread = (noise.get("spread") or {}).get(metric)
    if spread is None:
        return None
    over = ("runs of the protocol" if result.settings.get("protocol") == "mteb" else
            "seeds (the standard error of their mean)")
    return Noise(float(spread), len(noise.get("seeds", [])), over)


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
            read_subset = _read_subset(store, name) if current else None
            for reference in mine:
                checks.append(_check(reference, result, spec.task, settings.protocol, model,
                                     settings.text_kind, read_subset))
    return checks


def _read_subset(store: ArtifactStore, dataset: str) -> str | None:
    """The subset a frozen task dataset was read from (an MTEB entry's; None for the others)."""
    directory = store.dataset_dir(dataset)
    if not (directory / "manifest.json").is_file():
        return None
    return open_frozen(directory).manifest.get("source", {}).get("subset")


def _check(reference: PublishedScore, result: TaskResult | None, task: str, protocol: str, model: ResolvedModel,
           text_kind: str, read_subset: str | None) -> ReproductionCheck:
    prompt = model.card.query_prompt if text_kind == "query" else model.card.document_prompt
    if result is None:
        context = TaskReproductionContext(task, protocol, model.similarity, prompt, None, None, {})
        return check_reproduction(reference, None, model_key=model.key, n_items=0, context=context,
                                  why_not=f"no current task_{task} result for {model.key}: evaluate it")
    value, n_items, split, subset, why_not, noise = measured_statistic(result, task, protocol, reference, read_subset)
    context = TaskReproductionContext(task, protocol, str(result.settings.get("similarity", model.similarity)), prompt,
                                      split, subset, result.settings)
    return check_reproduction(reference, value, model_key=model.key, n_items=n_items, context=context, why_not=why_not,
                              noise=noise)
