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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from embedpyramid.config import (
    CORRELATION_METRICS,
    ConfigError,
    ProjectConfig,
    PublishedDataset,
    ResolvedModel,
)
from embedpyramid.config.transfer import transfer_settings
from embedpyramid.current_inputs import SummaryInputs, task_asset_name
from embedpyramid.data import FrozenDataset, open_frozen
from embedpyramid.rendering.document import ReportSection
from embedpyramid.retrieval.level import PER_QUERY_SCHEMA, read_metrics_manifest
from embedpyramid.store import ArtifactStore, read_frame, read_table, read_table_metadata, write_parquet
from embedpyramid.tasks.level import read_task_result, tasks_dir
from embedpyramid.transfer.analysis import TransferResult, transfer_analysis
from embedpyramid.transfer.references import REFERENCE_SCHEMA, DatasetReferences, dataset_references
from embedpyramid.transfer.reproduction import ReproductionCheck, ReproductionContext, reproduce, reproduction_frame
from embedpyramid.transfer.scores import CorrelationScores, DatasetScores, PublishedScores, QueryMeanScores
from embedpyramid.transfer.task_reproduction import task_reproduction

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
    :class:`~embedpyramid.transfer.scores.CorrelationScores`), task datasets included.
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
    inputs += [scores for name, scores in (prepared or {}).items() if name not in config.datasets]
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


REPRODUCTION_FILE = "reproduction.parquet"
REFERENCES_FILE = "references.parquet"
STS_SPLIT = "test"
"""The split an STS dataset is ranked on when it has several (the only one otherwise)."""


def sts_scores(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs, *,
               system: str = "exact") -> tuple[dict[str, CorrelationScores], dict[str, str]]:
    """Each STS task dataset's correlation scores over the cards whose L2 STS result is on disk
    (``<data>/tasks/<dataset>/<card key>/``) and current (``inputs``), and the STS datasets left
    out with the reason.

    A dataset ranks models by its ``confirmatory_metric`` (Spearman by default, or Pearson),
    computed over its test split (its only split when it has one)."""
    prepared: dict[str, CorrelationScores] = {}
    skipped: dict[str, str] = {}
    for name, spec in config.task_datasets.items():
        if spec.task != "sts":
            continue
        metric = spec.confirmatory_metric or "Spearman"
        if metric not in CORRELATION_METRICS:
            skipped[name] = f"confirmatory_metric {metric} is not an STS correlation ({', '.join(CORRELATION_METRICS)})"
            continue
        frames = [read_task_result(directory).predictions.with_columns(pl.lit(model.key).alias("model"))
                  for model in config.models.values()
                  if ((directory := tasks_dir(store, name, model.key)) / "predictions.parquet").is_file()
                  and inputs.admits(task_asset_name("sts"), name, model.key)]
        if not frames:
            skipped[name] = "no STS results yet (the task_sts asset has not evaluated it)"
            continue
        predictions = pl.concat(frames)
        splits = sorted(predictions["split"].unique().to_list())
        split = STS_SPLIT if STS_SPLIT in splits else splits[0] if len(splits) == 1 else None
        if split is None:
            skipped[name] = f"splits {', '.join(splits)} and none is named {STS_SPLIT!r}: nothing to rank on"
            continue
        rows = predictions.filter(pl.col("split") == split)
        per_item = rows.select(pl.lit(name).alias("dataset"), "model", pl.lit(system).alias("system"),
                               pl.col("item_id").alias("query_id"), pl.lit("cosine").alias("metric"),
                               pl.col("score").alias("value"))
        gold = dict(zip(rows["item_id"].to_list(), rows["gold"].to_list(), strict=True))
        prepared[name] = CorrelationScores.from_per_item(per_item, gold, dataset=name, similarity="cosine",
                                                         metric=metric, role=spec.role, system=system)
    return prepared, skipped


def partition_reproduction(config: ProjectConfig, dataset: str, model: ResolvedModel, per_query: pl.DataFrame, *,
                           conventions: Mapping[str, object], frozen: FrozenDataset | None,
                           system: str = "exact") -> list[ReproductionCheck]:
    """The reproduction checks of one (model, dataset) partition; the frozen corpus (for the
    titles a mismatch message names) is read only when the card has a published score there."""
    if not any(score.model == model.name for score in dataset_references(config, dataset).scores):
        return []
    corpus = None if frozen is None else read_table(frozen.path("corpus"), columns=["title"])
    return reproduce_model(config, dataset, model, per_query, conventions=conventions, corpus=corpus, system=system)


def check_summary(checks: list[ReproductionCheck]) -> tuple[bool, str]:
    """(passed, one line) of a partition's checks: passed when every published score is reproduced."""
    if not checks:
        return True, "no published score for this model on this dataset: nothing to reproduce"
    counts = {status: sum(c.status == status for c in checks) for status in ("pass", "fail", "not measured")}
    line = f"{counts['pass']} of {len(checks)} published scores reproduced"
    line += "".join(f", {n} {status}" for status, n in counts.items() if status != "pass" and n)
    return counts["pass"] == len(checks), line


@dataclass(frozen=True, eq=False)
class TransferLevel:
    """Everything L3 writes: the transfer analysis, every reproduction check, every published score."""

    transfer: TransferResult
    reproduction: list[ReproductionCheck]
    references: pl.DataFrame


def evaluate_transfer(config: ProjectConfig, store: ArtifactStore, metrics_paths: Mapping[tuple[str, str], Path], *,
                      inputs: SummaryInputs, system: str = "exact") -> TransferLevel:
    """L3 over every evaluated partition: ``metrics_paths`` maps (dataset, card key) to the stored
    per-query metric table of each evaluated, current (model, dataset) of the current cards;
    ``inputs`` names the STS task results that are not current (left out).

    Every published score of a dataset on disk is checked (``not measured`` where its card is not
    evaluated there yet); published-only datasets stand in for their benchmark in the transfer
    analysis, and STS task datasets take part through their L2 results (:func:`sts_scores`)."""
    frames = [read_frame(path).filter(pl.col("system") == system) for path in metrics_paths.values()]
    per_query = pl.concat(frames) if frames else pl.DataFrame(schema=PER_QUERY_SCHEMA)
    conventions = {key: read_metrics_manifest(path)["conventions"] for key, path in metrics_paths.items()}
    evaluated = {dataset for dataset, _ in metrics_paths}
    frozen = {name: open_frozen(store.dataset_dir(name)) for name in config.datasets if name in evaluated}
    groups = {name: found for name, data in frozen.items() if (found := query_groups(config, name, data)) is not None}
    checks = [check for name in config.datasets_with_data() for model in config.models.values()
              for check in partition_reproduction(config, name, model, per_query, frozen=frozen.get(name), system=system,
                                                  conventions=conventions.get((name, model.key), {}))]
    checks += task_reproduction(config, store, inputs)
    prepared, skipped = sts_scores(config, store, inputs, system=system)
    result = analyse_transfer(config, per_query, groups=groups, prepared=prepared, system=system)
    settings = {**result.settings, "skipped_datasets": {**result.settings["skipped_datasets"], **skipped}}
    references = pl.concat([dataset_references(config, name).frame() for name in [*config.datasets, *config.task_datasets]]
                           or [pl.DataFrame(schema=REFERENCE_SCHEMA)])
    return TransferLevel(TransferResult(result.rankings, result.pairs, result.flips, settings), checks, references)


def write_level(level: TransferLevel, directory: Path) -> Path:
    """The transfer tables, ``reproduction.parquet`` and ``references.parquet`` under ``directory``."""
    write_transfer(level.transfer, directory)
    write_reproduction(level.reproduction, directory / REPRODUCTION_FILE)
    write_parquet(level.references.to_arrow(), directory / REFERENCES_FILE)
    return directory


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.2f}, {high:.2f}]"


def pair_verdict(pair: Mapping[str, Any]) -> str:
    """One sentence a reader can act on: does the public ranking hold on the own data?"""
    where = (f"{pair['public_dataset']} (public, {pair['public_metric']}) vs {pair['own_dataset']} "
             f"(own, {pair['own_metric']}), {pair['n_models']} models")
    if pair["pairwise_agreement"] is None:
        return f"{where}: {pair['note']}."
    same = set(pair["public_winner"]) == set(pair["own_winner"])
    flips = pair["n_flips"]
    holds = ("the public ranking holds" if same and not flips else
             "the public winner also wins on your data, but the order below it changes" if same else
             "the public ranking does not hold: a different model wins on your data")
    winner = (f"public winner {', '.join(pair['public_winner'])}, own winner {', '.join(pair['own_winner'])} "
              f"(same winner in {pair['p_same_winner']:.1%} of resamples)")
    if pair["informative"] and pair["kendall_tau_b"] is not None:
        ci_level = f"{pair['confidence']:.0%}"
        correlation = (f"Kendall τ_b {pair['kendall_tau_b']:+.2f}{_ci(pair['tau_b_ci_low'], pair['tau_b_ci_high'])}, "
                       f"Spearman ρ {pair['spearman']:+.2f}{_ci(pair['spearman_ci_low'], pair['spearman_ci_high'])} "
                       f"({ci_level} bootstrap intervals)")
    else:
        correlation = f"pairwise agreement {pair['pairwise_agreement']:.0%}"
    note = f" Note: {pair['note']}." if pair["note"] else ""
    return f"{where}: {holds} — {winner}; {correlation}; {flips} flipped model pair(s).{note}"


def transfer_verdicts(result: TransferResult) -> list[str]:
    """One verdict per public × own pair, or why there is none."""
    if result.pairs.height:
        return [pair_verdict(pair) for pair in result.pairs.iter_rows(named=True)]
    roles = dict(zip(result.rankings["dataset"].to_list(), result.rankings["role"].to_list(), strict=True))
    skipped = "; ".join(f"{name}: {why}" for name, why in result.settings.get("skipped_datasets", {}).items())
    have = ", ".join(f"{name} ({role})" for name, role in roles.items()) or "none"
    return [f"No public × own pair of ranked datasets, so no transfer verdict: ranked datasets {have}"
            + (f"; left out: {skipped}" if skipped else "") + "."]


def report_sections(directory: Path) -> list[ReportSection]:
    """The "Reproduction" and "Transfer" sections of the report, from the stored L3 tables."""
    if not (directory / "pairs.parquet").is_file():
        return []
    return [_reproduction_section(read_frame(directory / REPRODUCTION_FILE), read_frame(directory / REFERENCES_FILE)),
            _transfer_section(read_transfer(directory))]


def _reproduction_section(checks: pl.DataFrame, references: pl.DataFrame) -> ReportSection:
    standing_in = references.join(checks.select("dataset", "model", "metric"), on=["dataset", "model", "metric"],
                                  how="anti")
    tables: list[tuple[str, pl.DataFrame]] = []
    if checks.is_empty() and references.is_empty():
        intro = ("No dataset in datasets.yaml carries a published score (`reference:` or `mteb_results:`), so no "
                 "number of this pipeline has been checked against a published one. None could be verified for the "
                 "installed models on data that installs offline (docs/levels/l3-transfer.md, \"What installs offline\"): point a `beir` "
                 "or `squad` entry at a downloaded benchmark and add its published scores to reproduce them before "
                 "trusting the other numbers.")
    else:
        counts = checks.group_by("status").len().sort("status").rows()
        intro = ("Each published score against this run's mean over the dataset's evaluated queries (a task "
                 "dataset: its family's whole-set statistic). The rule column says how it passes: `tolerance` (a "
                 "deterministic protocol) when |measured − published| ≤ the stated tolerance; `noise` (a protocol "
                 "that draws at random: classification's training samples, clustering's k-means starts and draws) "
                 "when it is within the stated multiple of the spread this run measured over its seeds (the bound "
                 "is in the tolerance column, the spread beside it). `not measured` when the card is not evaluated "
                 "there or the protocol lacks the measure. A failure names the usual causes with this run's values "
                 "(document text = title + \" \" + text, the card's prompts, the relevance threshold, self-hits, "
                 "ties). "
                 + (f"{checks.height} checks: " + ", ".join(f"{n} {status}" for status, n in counts) + "."
                    if checks.height else "No published score belongs to a dataset on disk."))
        if checks.height:
            tables.append(("Reproduction checks", checks.select(
                "dataset", "model_key", "metric", "published", "measured", "difference", "rule", "tolerance",
                "spread", "spread_multiple", "noise_runs", "status", "n_items", "source")))
            failed = checks.filter(pl.col("status") != "pass")
            if failed.height:
                tables.append(("What to look at", failed.select("dataset", "model_key", "metric", "message")))
    if standing_in.height:
        intro += (" Published scores of datasets not on disk stand in for their benchmark in the transfer analysis; "
                  "they cannot be reproduced here.")
        tables.append(("Published scores standing in for a benchmark", standing_in))
    return ReportSection(title="Reproduction", intro=intro, tables=tuple(tables))


def _transfer_section(result: TransferResult) -> ReportSection:
    settings = result.settings
    skipped = settings.get("skipped_datasets", {})
    intro = (
        "Does the public ranking of the models hold on your data? Each dataset ranks the models on its confirmatory "
        "measure; for every public × own pair, Kendall's τ_b and Spearman's ρ between the two rankings with "
        f"{settings['confidence']:.0%} percentile bootstrap intervals ({settings['n_resamples']:,} resamples of each "
        "dataset's queries or items, drawn within the dataset, seeded from the base seed "
        f"{settings['seed']} and the dataset name), the share of resamples in which the public winner is also the own "
        "winner, and every model pair whose order flips. " + " ".join(transfer_verdicts(result))
        + ("" if not skipped else " Left out: " + "; ".join(f"{name}: {why}" for name, why in skipped.items()) + ".")
    )
    tables: list[tuple[str, pl.DataFrame]] = []
    if result.rankings.height:
        tables.append(("Rankings per dataset", result.rankings.select(
            "dataset", "role", "metric", "source", "model", "score", "rank", "n_items", "resampling")))
    if result.pairs.height:
        tables.append(("Public × own pairs", result.pairs.select(
            "public_dataset", "own_dataset", "n_models", "kendall_tau_b", "tau_b_ci_low", "tau_b_ci_high", "spearman",
            "spearman_ci_low", "spearman_ci_high", "pairwise_agreement", "p_same_winner", "n_flips", "note")))
    if result.flips.height:
        tables.append(("Model pairs on both sides", result.flips))
    return ReportSection(title="Transfer", intro=intro, tables=tuple(tables))


TRANSFER_VIEWS = {"transfer_rankings": "rankings.parquet", "transfer_pairs": "pairs.parquet",
                  "transfer_flips": "flips.parquet", "reproduction": REPRODUCTION_FILE, "references": REFERENCES_FILE}
"""The L3 tables of ``results.duckdb``, by view name (``references`` is an SQL keyword: quote it)."""


def transfer_views(store: ArtifactStore) -> dict[str, Path]:
    """The L3 tables ``results.duckdb`` exposes, by view name, once the transfer analysis wrote them."""
    directory = transfer_dir(store)
    return {view: directory / name for view, name in TRANSFER_VIEWS.items() if (directory / name).is_file()}
