"""The cross-model summary of the L2 task families and of L1 pair sanity: every evaluated
(model, task dataset) gathered into one table per kind, the paired comparisons of the per-item
rows (the same :func:`~embedpyramid.stats.comparisons.compare_models` as retrieval: bootstrap CI,
d_z, sign-flip and t tests, Holm within the confirmatory family, verdicts), the whole-set
statistic comparisons of :func:`~embedpyramid.tasks.level.compare_task`, and the report sections.

The per-item metric of every family that has per-item rows is ``accuracy`` (pair
classification, classification, multi-label classification, bitext), or for reranking its
settings' ``primary_metric`` (a per-query retrieval measure): it is the confirmatory metric of a
task dataset, so each (dataset, system) gets a verdict. STS and clustering have no per-item mean (a correlation,
a clustering score): their verdict reads the paired statistic bootstrap of the primary statistic
(``spearman``, ``v_measure``) — its p-value, the percentile interval inverted
(:func:`~embedpyramid.stats.paired_statistic_bootstrap`), Holm-adjusted over every pair of the
task family (all its datasets, systems and splits) — and decides with the retrieval verdict's
words: ``better``/``worse`` at the adjusted p, otherwise "no detectable difference". The interval
quoted beside the adjusted p is the unadjusted one, and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from embedpyramid.config import DatasetEntry, ProjectConfig, RerankingSettings
from embedpyramid.config.comparison import comparison_settings
from embedpyramid.config.tasks import ITEM_UNITS
from embedpyramid.current_inputs import SummaryInputs, pair_sanity_asset_name, task_asset_name
from embedpyramid.data import open_frozen
from embedpyramid.geometry.paths import PAIR_SANITY_FILE, l1_dir
from embedpyramid.rendering.document import ReportSection
from embedpyramid.rendering.tables import comparison_summary
from embedpyramid.stats.comparisons import COMPARISON_SCHEMA, compare_models
from embedpyramid.stats.families import DECISIONS
from embedpyramid.stats.hsd_tables import HSD_PAIR_SCHEMA, HSD_SCHEMA, tukey_hsd_tables
from embedpyramid.stats.multiple import holm_adjust
from embedpyramid.stats.verdict import dataset_verdicts
from embedpyramid.store import PER_QUERY_SCHEMA, ArtifactStore, read_frame, read_json, write_json, write_parquet
from embedpyramid.tasks.common import STATISTIC_COMPARISON_SCHEMA, SUMMARY_SCHEMA, TaskResult
from embedpyramid.tasks.level import compare_task, read_task_result, task_groups, task_items, tasks_dir

TASK_SUMMARY_FOLDER, TASK_VERDICT_FILE = "tasks", "task_verdict.json"
"""The L2 task families' summary folder under the comparisons folder, and its verdicts file."""
PER_ITEM_METRIC = "accuracy"
"""The per-item metric of the families that have per-item rows, their confirmatory metric: but
reranking's, whose per-query measures are retrieval's (its settings' ``primary_metric``)."""


def per_item_metric(spec: DatasetEntry) -> str:
    """The confirmatory per-item metric of a task dataset (:data:`PER_ITEM_METRIC`)."""
    settings = spec.task_settings
    return settings.primary_metric if isinstance(settings, RerankingSettings) else PER_ITEM_METRIC
PRIMARY_STATISTIC = {"sts": "spearman", "clustering": "v_measure"}
"""The statistic a family without per-item rows is judged by."""
PAIR_SANITY_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "task": pl.String(), "auc": pl.Float64(),
    "n_similar": pl.Int64(), "n_random": pl.Int64(), "similar_mean_cosine": pl.Float64(),
    "random_mean_cosine": pl.Float64(), "warning": pl.String(), "definition": pl.String(), "seed": pl.Int64(),
}
TASK_WARNINGS_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "task": pl.String(), "setting": pl.String(), "warning": pl.String(),
}
"""The warnings a task result's settings carry (every ``*_warning`` setting that is set: a pair
classification dev split too small to choose a threshold, a probe C still on its grid's edge)."""
TASK_CONVENTIONS = "task_conventions"
TASK_CONVENTIONS_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "system": pl.String(), "conventions": pl.String(),
}
"""The protocol each task number follows, one row per (dataset, model, system) of the summary;
``conventions`` is JSON (:func:`task_conventions`). Rows of ``results.duckdb``'s ``conventions``
view, beside the retrieval ones."""
TASK_CONVENTION_SETTINGS = ("protocol", "mteb_version", "similarity", "score", "main_score", "primary_metric")
"""The settings of a task result copied into its conventions (those it has)."""
TASK_TABLE_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "task_per_item": PER_QUERY_SCHEMA, "task_summary": SUMMARY_SCHEMA, "task_comparisons": COMPARISON_SCHEMA,
    "task_statistic_comparisons": STATISTIC_COMPARISON_SCHEMA, "pair_sanity": PAIR_SANITY_SCHEMA,
    "task_hsd": HSD_SCHEMA, "task_hsd_pairs": HSD_PAIR_SCHEMA, "task_warnings": TASK_WARNINGS_SCHEMA,
    TASK_CONVENTIONS: TASK_CONVENTIONS_SCHEMA,
}
"""The tables of the task summary, each also a view of ``results.duckdb`` under the same name but
``task_conventions``, whose rows join the ``conventions`` view."""
FAMILY_TITLES = {
    "sts": ("Semantic similarity (STS)", "Cosine of the two texts against the human score: Spearman (primary) and "
            "Pearson. A correlation is not a mean of per-pair values, so models are compared by a paired bootstrap "
            "of the correlation difference over pairs."),
    "pair_classification": ("Pair classification (duplicates)", "cosine >= threshold is a duplicate: average "
                            "precision (threshold-free), and F1/accuracy/precision/recall at the threshold chosen on "
                            "the dev split and applied unchanged to test (split says which). Per item: a test pair "
                            "classified correctly."),
    "classification": ("Classification on frozen embeddings", "kNN (cosine) and a logistic-regression probe (C by "
                       "inner CV on the training folds only), accuracy and macro-F1, mean ± sd over seeds of "
                       "repeated stratified k-fold CV. Per item: the share of seeds it is classified correctly."),
    "clustering": ("Clustering", "k-means with k = the number of gold classes, V-measure, ARI and AMI as mean ± sd "
                   "over the k-means seeds; compared by a paired bootstrap of the seed-mean statistic over items."),
    "bitext": ("Bitext mining", "Each source sentence's translation among all targets of its language pair: "
               "nearest neighbour, ratio margin and CSLS; accuracy, F1 and the hubness (k-occurrence skew) per "
               "language pair. Per item: a source matched to its translation."),
    "reranking": ("Reranking", "Each query's given candidates ranked by the card's similarity, scored per query "
                  "like retrieval (MAP, MRR, nDCG over the candidates); models are compared on the per-query values of "
                  "the primary measure with the paired statistics of retrieval."),
    "multilabel_classification": ("Multi-label classification", "MTEB's protocol: a kNN on undersampled training "
                                  "sets, subset accuracy (primary), LRAP, macro F1 and Hamming score, mean ± sd over "
                                  "experiments. Per item: the share of experiments that predict its label set "
                                  "exactly."),
}


@dataclass(frozen=True)
class TaskSummary:
    """The tables of :data:`TASK_TABLE_SCHEMAS`, the verdicts (dicts with a ``text``) and what
    could not be compared."""

    tables: dict[str, pl.DataFrame]
    verdicts: list[dict[str, Any]]
    skipped: list[str]

    def write(self, directory: Path) -> dict[str, Path]:
        paths = {name: write_parquet(frame.to_arrow(), directory / f"{name}.parquet")
                 for name, frame in self.tables.items()}
        paths["verdict"] = write_json(self.verdicts, directory / TASK_VERDICT_FILE)
        return paths


def tasks_summary_dir(store: ArtifactStore) -> Path:
    return store.comparisons_dir / TASK_SUMMARY_FOLDER


def summarize_tasks(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs) -> TaskSummary:
    """Gather every evaluated (card, task dataset) and L1 pair sanity result of the current cards
    that is current (``inputs`` lists those that are not: left out, and named in the verdicts),
    and compare each model with the baseline on every task dataset where both are evaluated."""
    comparison = config.protocol.comparison
    baseline = config.baseline.key
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in TASK_TABLE_SCHEMAS}
    verdicts: list[dict[str, Any]] = []
    skipped = []
    for dataset, spec in config.task_datasets.items():
        results = {model.key: read_task_result(directory) for model in config.models.values()
                   if ((directory := tasks_dir(store, dataset, model.key)) / "summary.parquet").is_file()
                   and inputs.admits(task_asset_name(spec.task), dataset, model.key)}
        if not results:
            continue
        parts["task_per_item"] += [result.per_item for result in results.values()]
        parts["task_summary"] += [result.summary for result in results.values()]
        for key, result in results.items():
            parts["task_warnings"].append(task_warnings(dataset, key, result))
            parts[TASK_CONVENTIONS].append(task_conventions(dataset, key, result))
        if baseline not in results or len(results) < 2:
            skipped.append(f"{dataset}: needs the baseline {baseline} and another evaluated model "
                           f"(evaluated: {', '.join(sorted(results))})")
            continue
        items = task_items(open_frozen(store.dataset_dir(dataset)), spec)
        per_item = pl.concat([result.per_item for result in results.values()])
        if per_item.height:
            metric = per_item_metric(spec)
            settings = comparison_settings(config, dataset).model_copy(
                update={"report_metric": metric, "length_buckets": ()})
            parts["task_comparisons"].append(compare_models(per_item, items, settings))
            hsd, hsd_pairs = tukey_hsd_tables(per_item, items, settings, metric)
            parts["task_hsd"].append(hsd)
            parts["task_hsd_pairs"].append(hsd_pairs)
        for key in sorted(results):
            if key != baseline:
                statistics = compare_task(spec.task, results[baseline].predictions, results[key].predictions,
                                          n_resamples=comparison.n_resamples, confidence=comparison.confidence,
                                          seed=comparison.seed, groups=task_groups(items, spec))
                parts["task_statistic_comparisons"].append(statistics)
    for dataset in [*config.datasets, *config.task_datasets]:
        task = config.task_datasets[dataset].task if dataset in config.task_datasets else "retrieval"
        asset = pair_sanity_asset_name(None if task == "retrieval" else task)
        for model in config.models.values():
            path = l1_dir(store, dataset, model.key) / PAIR_SANITY_FILE
            if path.is_file() and inputs.admits(asset, dataset, model.key):
                row = read_json(path)
                parts["pair_sanity"].append(pl.DataFrame(
                    [{**{column: row.get(column) for column in PAIR_SANITY_SCHEMA}, "dataset": dataset,
                      "model": model.key, "task": task}], schema=PAIR_SANITY_SCHEMA))
    tables = {name: pl.concat(frames, how="vertical_relaxed").cast(TASK_TABLE_SCHEMAS[name]) if frames
              else pl.DataFrame(schema=TASK_TABLE_SCHEMAS[name]) for name, frames in parts.items()}
    tasks = {name: spec.task for name, spec in config.task_datasets.items()}
    paired = dataset_verdicts(tables["task_comparisons"], tables["task_hsd"], power=comparison.power,
                              detectable_delta=comparison.detectable_delta, hsd_pairs=tables["task_hsd_pairs"],
                              units={name: ITEM_UNITS[task] for name, task in tasks.items()})
    for task, metric in PRIMARY_STATISTIC.items():
        family = tables["task_statistic_comparisons"].filter(
            pl.col("dataset").is_in([name for name, kind in tasks.items() if kind == task]))
        verdicts += statistic_verdicts(family, metric, task)
    # A task dataset has several systems (kNN and probe, nearest/margin/CSLS): say which one.
    paired_verdicts = []
    for verdict in paired:
        row = verdict.as_dict()
        label = f"[{tasks[verdict.dataset]}, {verdict.system}]"
        paired_verdicts.append({**row, "task": tasks[verdict.dataset], "text": f"{label} {row['text']}",
                                "line": f"{label} {row['line']}"})
    return TaskSummary(tables, inputs.annotate(paired_verdicts + verdicts, config.task_datasets,
                                                      tuple(sorted(task_asset_name(task) for task in set(tasks.values())))), skipped)


def task_warnings(dataset: str, model: str, result: TaskResult) -> pl.DataFrame:
    """The ``*_warning`` settings of one result that are set, one row each."""
    rows = [{"dataset": dataset, "model": model, "task": result.task, "setting": key, "warning": str(value)}
            for key, value in sorted(result.settings.items()) if key.endswith("_warning") and value]
    return pl.DataFrame(rows, schema=TASK_WARNINGS_SCHEMA)


def task_conventions(dataset: str, model: str, result: TaskResult) -> pl.DataFrame:
    """The protocol the numbers of one result follow — its task and the settings of
    :data:`TASK_CONVENTION_SETTINGS` it has (``mteb_version`` only under ``protocol: mteb``) — as
    JSON, once per system of its summary."""
    conventions = {"task": result.task, **{key: result.settings[key] for key in TASK_CONVENTION_SETTINGS
                                           if result.settings.get(key) is not None}}
    text = json.dumps(conventions, sort_keys=True, default=str)
    systems = result.summary["system"].unique(maintain_order=True).to_list()
    return pl.DataFrame({"dataset": [dataset] * len(systems), "model": [model] * len(systems), "system": systems,
                         "conventions": [text] * len(systems)}, schema=TASK_CONVENTIONS_SCHEMA)


def statistic_verdicts(statistics: pl.DataFrame, metric: str, task: str) -> list[dict[str, Any]]:
    """One verdict per model pair from the paired statistic bootstrap of ``metric``: the rows of
    ``metric`` in ``statistics`` (one task family) are one Holm family, and each pair's
    ``decision`` (``better``/``worse`` for model B against A, or ``not significant``) reads its
    adjusted p at ``1 - confidence``."""
    rows = statistics.filter(pl.col("metric") == metric)
    adjusted = holm_adjust(rows["p_value"].to_numpy()) if rows.height else []
    tests = "1 test" if rows.height == 1 else f"{rows.height} tests"
    unit = ITEM_UNITS[task]
    verdicts = []
    for row, p_adjusted in zip(rows.iter_rows(named=True), adjusted, strict=True):
        a, b, low, high = row["model_a"], row["model_b"], row["ci_low"], row["ci_high"]
        significant = p_adjusted <= 1.0 - row["confidence"]
        decision = DECISIONS[2] if not significant else DECISIONS[0] if row["delta"] > 0 else DECISIONS[1]
        outcome = {DECISIONS[0]: f"{b} is better than {a}", DECISIONS[1]: f"{a} is better than {b}"}.get(
            decision, "no detectable difference")
        p_text = "< 0.0001" if p_adjusted < 1e-4 else f"= {p_adjusted:.4f}"
        verdicts.append({
            "dataset": row["dataset"], "task": task, "unit": unit, "system": row["system"], "metric": metric,
            "model_a": a, "model_b": b,
            "delta": row["delta"], "ci_low": low, "ci_high": high, "p_value": row["p_value"],
            "p_adjusted": float(p_adjusted), "family_size": rows.height, "decision": decision,
            "text": (f"{row['dataset']} ({task}, {metric} over {row['n']:,} {unit}): {b} − {a} = {row['delta']:+.4f}, "
                     f"unadjusted {row['confidence']:.0%} CI [{low:+.4f}, {high:+.4f}] (paired bootstrap of the "
                     f"statistic, {row['n_resamples']:,} resamples), p (Holm over the {task} family, {tests}) "
                     f"{p_text} — {outcome}."),
            "line": (f"[{task}, {row['system']}] {row['dataset']} · {metric} over {row['n']:,} {unit}: {outcome} "
                     f"(Δ {row['delta']:+.4f} [{low:+.4f}, {high:+.4f}], p {p_text} (Holm))"),
        })
    return verdicts


def read_task_summary(directory: Path) -> TaskSummary | None:
    """The last task summary written to ``directory`` (None before one)."""
    if not (directory / TASK_VERDICT_FILE).is_file():
        return None
    # A summary written before a table existed reads it as empty (until the summary is rewritten).
    tables = {name: read_frame(path) if (path := directory / f"{name}.parquet").is_file() else pl.DataFrame(schema=schema)
              for name, schema in TASK_TABLE_SCHEMAS.items()}
    return TaskSummary(tables, read_json(directory / TASK_VERDICT_FILE), [])


def task_results_tables(store: ArtifactStore) -> dict[str, Path]:
    """The task tables ``results.duckdb`` exposes as views (none before the first task summary)."""
    directory = tasks_summary_dir(store)
    if not (directory / TASK_VERDICT_FILE).is_file():
        return {}
    return {name: path for name in TASK_TABLE_SCHEMAS
            if name != TASK_CONVENTIONS and (path := directory / f"{name}.parquet").is_file()}


def task_conventions_table(store: ArtifactStore) -> Path | None:
    """The ``task_conventions`` table of the last task summary, for the ``conventions`` view (None before one)."""
    path = tasks_summary_dir(store) / f"{TASK_CONVENTIONS}.parquet"
    return path if (tasks_summary_dir(store) / TASK_VERDICT_FILE).is_file() and path.is_file() else None


def _with_sd(summary: pl.DataFrame) -> pl.DataFrame:
    shown = pl.when(pl.col("sd").is_null()).then(pl.col("value").round(4).cast(pl.String)).otherwise(
        pl.format("{} ± {}", pl.col("value").round(4), pl.col("sd").round(4)))
    return summary.select("dataset", "model", "system", "subset", "split", "metric", shown.alias("value ± sd"),
                          "n_seeds", "n_items")


def task_report_sections(config: ProjectConfig, summary: TaskSummary | None) -> list[ReportSection]:
    """L1 pair sanity (the bottom of the pyramid), then one section per evaluated task family:
    what was measured, the warnings its results carry (:data:`TASK_WARNINGS_SCHEMA`), each model's
    summary (± sd over seeds), the paired verdicts with CIs."""
    if summary is None:
        return []
    sections = []
    sanity = summary.tables["pair_sanity"]
    if sanity.height:
        warned = sanity.filter(pl.col("warning").is_not_null())
        warning = (" WARNING: " + "; ".join(f"{r['model']} on {r['dataset']}: AUC {r['auc']:.3f}"
                                             for r in warned.iter_rows(named=True))
                   + " — near 0.5, so the cosines there are not meaningful.") if warned.height else (
            " Every model separates known-similar from random pairs clearly (no AUC within the warning margin of 0.5).")
        sections.append(ReportSection(
            title="L1 pair sanity: known-similar vs random pairs",
            intro=("For every dataset with pairs or qrels, the AUC of the cosines of known-similar pairs (relevant "
                   "qrels, positive pairs, translations, the top quarter of STS scores) against as many seeded random "
                   "pairs from the same pools: 1 is perfect separation, 0.5 none." + warning),
            tables=(("Pair sanity per model and dataset", sanity.select(
                "dataset", "task", "model", pl.col("auc").round(4), "n_similar", pl.col("similar_mean_cosine").round(4),
                pl.col("random_mean_cosine").round(4), "seed", "warning", "definition")),),
        ))
    task_summary = summary.tables["task_summary"]
    evaluated = set(task_summary["dataset"])
    for family, (title, what) in FAMILY_TITLES.items():
        datasets = [name for name in config.family_datasets(family) if name in evaluated]
        if not datasets:
            continue
        rows = task_summary.filter(pl.col("dataset").is_in(datasets))
        verdicts = [v["text"] for v in summary.verdicts if v["dataset"] in datasets]
        tables: list[tuple[str, pl.DataFrame]] = [("Summary per model (value ± sd over seeds where stochastic)",
                                                   _with_sd(rows))]
        warned = summary.tables["task_warnings"].filter(pl.col("dataset").is_in(datasets))
        warning = ""
        if warned.height:
            tables.append(("Warnings recorded with the numbers", warned.select("dataset", "model", "setting", "warning")))
            warning = " WARNING: " + "; ".join(f"{r['model']} on {r['dataset']}: {r['warning']}"
                                               for r in warned.iter_rows(named=True)) + "."
        statistics = summary.tables["task_statistic_comparisons"].filter(pl.col("dataset").is_in(datasets))
        if statistics.height:
            tables.append(("Paired bootstrap of each whole-set statistic (b − a, same resampled items; unadjusted "
                           "intervals and p-values — the verdicts Holm-adjust the primary statistic's)",
                           statistics.select("dataset", "system", "subset", "split", "metric", "model_a", "model_b",
                                             "n", pl.col("value_a").round(4), pl.col("value_b").round(4),
                                             pl.col("delta").round(4), pl.col("ci_low").round(4),
                                             pl.col("ci_high").round(4), "p_value", "resampling")))
        compared = summary.tables["task_comparisons"].filter(pl.col("dataset").is_in(datasets))
        if compared.height:
            tables.append(("Paired comparisons of the per-item values (Holm within the confirmatory family)",
                           comparison_summary(compared)))
        pending = "No model pair compared yet (needs the baseline and another evaluated model)."
        intro = what + warning + " " + (" ".join(verdicts) if verdicts else pending)
        sections.append(ReportSection(title=f"L2 {title}: {', '.join(datasets)}", intro=intro, tables=tuple(tables)))
    return sections
