"""Pyramid L6 over a data folder: answer one (model, dataset) partition, gather every partition's
answers into the paired per-query table, compare models on it, analyse the grades per (dataset,
system) and write the report section.

Layout under the data folder: each partition's artefacts under
``downstream/<dataset>/<model key>/<system>/`` (:func:`~embedpyramid.downstream.level.write_downstream`);
the cross-model tables under ``grades/``: ``answers``, ``judgements``, ``per_query`` (the judge and
answer metrics kept by :func:`~embedpyramid.downstream.level.paired_coverage`), ``dropped``,
``agreement`` and ``grade_<table>`` for each table of
:class:`~embedpyramid.downstream.analysis.GradeAnalysis`, each with ``dataset`` and ``system``
columns; the plots under ``grades/<dataset>/<system>/``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from embedpyramid.config import ConfigError, ProjectConfig, ResolvedModel
from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.current_inputs import DOWNSTREAM_ANSWERS, SummaryInputs
from embedpyramid.data import FrozenDataset, dataset_gold_answers
from embedpyramid.downstream.analysis import GradeAnalysis, analyse_grades
from embedpyramid.downstream.judge import GRADES, judge_metric
from embedpyramid.downstream.level import (
    DownstreamResult,
    Progress,
    build_generator,
    build_judge,
    downstream_directory,
    evaluate_downstream,
    paired_coverage,
    read_downstream,
    write_downstream,
)
from embedpyramid.downstream.likelihood_ratio import VERDICT_TEST
from embedpyramid.rendering.document import Figure, ReportSection
from embedpyramid.stats.comparisons import COMPARISON_SCHEMA, compare_models
from embedpyramid.store import ArtifactStore, StorePath, read_frame, read_json, write_json, write_parquet, write_text

EXACT = "exact"
GRADES_DIR = "grades"
ANALYSIS_TABLES = ("descriptive", "fits", "omnibus", "pairwise", "letters", "power", "power_curve")
"""The tables of :meth:`GradeAnalysis.tables`, stored as ``grade_<name>``."""
PLOT_CAPTIONS = {"grades_box": "grade per query (mean over criteria), by model",
                 "grades_bar": "mean grade by model with its confidence interval and letter groups",
                 "grades_heatmap": "mean grade by model and criterion"}
LABELS = ("dataset", "model", "system")
METRIC_RANGE = (0.0, float(max(GRADES)))
"""Every L6 per-query value lies here: answer and context metrics in [0, 1], grades in 1-5."""


def run_path(store: ArtifactStore, dataset: str, model_key: str, system: str) -> StorePath:
    """The run a system's answers are built from: the exact top-k, or an L5 system's run."""
    if system == EXACT:
        return store.run_dir(dataset, model_key) / f"{EXACT}.parquet"
    # Imported here: the L5 module loads BM25, rerankers and the search kernels (torch), which the
    # exact run and the grade analysis do not need.
    from embedpyramid.systems.level import systems_dir

    return systems_dir(store, dataset, model_key, system) / "run.parquet"


def answer_partition(config: ProjectConfig, store: ArtifactStore, model: ResolvedModel, dataset: str,
                     frozen: FrozenDataset, *, progress: Progress | None = None) -> dict[str, DownstreamResult]:
    """Answer, measure and grade every query of one (model, dataset) for each system of
    ``judge.yaml``, and write each system's artefacts; HTTP replies are cached under
    ``cache/chat/``."""
    settings = config.downstream
    if settings is None:
        raise ConfigError(f"{config.directory / 'judge.yaml'}: missing; L6 runs only with a judge.yaml")
    spec = config.dataset(dataset)
    conventions = config.protocol.conventions(spec)
    corpus, queries, qrels = (read_frame(frozen.path(table)) for table in ("corpus", "queries", "qrels"))
    gold = dataset_gold_answers(spec, corpus.to_arrow(), qrels.to_arrow(), conventions.relevance_threshold)
    cache = store.root / "cache" / "chat"
    generator = build_generator(settings.generator, corpus, cache_dir=cache)
    judge = build_judge(settings.judge, qrels, settings.k, conventions, cache_dir=cache)
    results = {}
    for system in settings.systems:
        path = run_path(store, dataset, model.key, system)
        if not path.is_file():
            raise ConfigError(f"{config.directory / 'judge.yaml'}: systems: {system!r} has no run for {model.key} on "
                              f"{dataset} ({path}); evaluate that system first or remove it from systems")
        result = evaluate_downstream(
            read_frame(path), queries, corpus, qrels, None if gold is None else pl.from_arrow(gold),
            generator=generator, judge=judge, dataset=dataset, model=model.key, system=system, k=settings.k,
            conventions=conventions, progress=progress)
        write_downstream(result, downstream_directory(store.root, dataset, model.key, system))
        results[system] = result
    return results


def mean_grades(result: DownstreamResult) -> dict[str, float]:
    """Mean of each ``judge:<criterion>`` metric over the graded queries."""
    grades = result.per_query.filter(pl.col("metric").str.starts_with(judge_metric("")))
    return dict(grades.group_by("metric", maintain_order=True).agg(pl.col("value").mean()).iter_rows())


@dataclass(frozen=True)
class DownstreamTables:
    """Every evaluated partition of the current cards, gathered: ``answers`` and ``judgements``
    labelled with dataset, model and system; ``per_query`` the metric rows every model of a
    (dataset, system) has for the same queries; ``dropped`` what that left out
    (``dataset, system, metric, dropped_queries``); ``agreement`` the judge's weighted kappa
    against the qrels judge per partition and criterion (empty for the qrels judge)."""

    answers: pl.DataFrame
    judgements: pl.DataFrame
    per_query: pl.DataFrame
    dropped: pl.DataFrame
    agreement: pl.DataFrame

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"answers": self.answers, "judgements": self.judgements, "per_query": self.per_query,
                "dropped": self.dropped, "agreement": self.agreement}


def _labelled(frame: pl.DataFrame, labels: Mapping[str, str]) -> pl.DataFrame:
    return frame.select(*(pl.lit(value).alias(name) for name, value in labels.items()), pl.all())


def collect_downstream(config: ProjectConfig, store: ArtifactStore, inputs: SummaryInputs) -> DownstreamTables | None:
    """The L6 artefacts of every (current card, dataset, system) on disk whose answers are current
    (``inputs``), or None without any."""
    systems = config.downstream.systems if config.downstream else []
    answers, judgements, per_query, agreement = [], [], [], []
    for dataset in config.datasets:
        for model in config.models.values():
            if not inputs.admits(DOWNSTREAM_ANSWERS, dataset, model.key):
                continue
            for system in systems:
                directory = downstream_directory(store.root, dataset, model.key, system)
                if not (directory / "per_query.parquet").is_file():
                    continue
                result = read_downstream(directory)
                labels = {"dataset": dataset, "model": model.key, "system": system}
                answers.append(_labelled(result.answers, labels))
                judgements.append(_labelled(result.judgements, labels))
                per_query.append(result.per_query)
                agreement += [{**labels, **row} for row in result.manifest.get("agreement", [])]
    if not per_query:
        return None
    kept, dropped = paired_coverage(pl.concat(per_query))
    return DownstreamTables(
        pl.concat(answers), pl.concat(judgements), kept, dropped,
        pl.DataFrame(agreement, schema={"dataset": pl.String, "model": pl.String, "system": pl.String,
                                        "criterion": pl.String, "n": pl.Int64, "kappa": pl.Float64,
                                        "weights": pl.String}))


def compare_downstream(per_query: pl.DataFrame, queries: pl.DataFrame, settings: ComparisonSettings, *,
                       truncated: Mapping[str, Collection[str]] | None = None) -> pl.DataFrame:
    """The paired comparisons of the L6 metrics of one dataset (:func:`compare_models`, the
    comparisons table's rows), once per group of metrics that cover the same queries (the
    comparison resamples a metric's queries jointly with the others of its call): usually one
    group, apart from a metric only some queries have (``answer:contains_gold``) or queries a
    malformed reply left ungraded. Values lie in :data:`METRIC_RANGE`; each group is its own
    Benjamini–Hochberg family (Holm for the report metric against the baseline when the report
    metric is an L6 metric). Empty without the baseline and another model."""
    empty = pl.DataFrame(schema=COMPARISON_SCHEMA)
    if per_query.is_empty() or per_query["model"].n_unique() < 2 or settings.baseline not in per_query["model"]:
        return empty
    coverage = (per_query.group_by("system", "metric").agg(pl.col("query_id").unique().sort().alias("_queries"))
                .with_columns(pl.col("_queries").hash().alias("_group")))
    grouped = per_query.join(coverage.select("system", "metric", "_group"), on=["system", "metric"])
    wide = settings.model_copy(update={"value_range": METRIC_RANGE})
    parts = [compare_models(part.drop("_group"), queries, wide, truncated=truncated)
             for part in grouped.partition_by("_group", maintain_order=True)]
    return pl.concat(parts) if parts else empty


def analysis_order(config: ProjectConfig, per_query: pl.DataFrame) -> list[str]:
    """The models of ``per_query`` with the baseline first, then in models.yaml order."""
    baseline = config.baseline.key
    keys = [baseline, *(m.key for m in config.models.values() if m.key != baseline)]
    present = set(per_query["model"].to_list())
    return [key for key in keys if key in present]


@dataclass(frozen=True)
class GradeSummary:
    """The grade analysis of every (dataset, system) with judge grades, by (dataset, system)."""

    analyses: dict[tuple[str, str], GradeAnalysis]

    def tables(self) -> dict[str, pl.DataFrame]:
        """``grade_<table>`` with dataset and system columns, over every analysis."""
        return {f"grade_{name}": pl.concat([
            _labelled(analysis.tables()[name], {"dataset": dataset, "system": system})
            for (dataset, system), analysis in self.analyses.items()], how="diagonal_relaxed")
            for name in ANALYSIS_TABLES} if self.analyses else {}


def analyse_downstream(config: ProjectConfig, tables: DownstreamTables) -> GradeSummary:
    """:func:`analyse_grades` per (dataset, system) of the gathered per-query table."""
    settings = config.downstream.analysis if config.downstream else None
    grades = tables.per_query.filter(pl.col("metric").str.starts_with(judge_metric("")))
    analyses = {}
    if settings is not None:
        for (dataset, system), rows in grades.partition_by("dataset", "system", as_dict=True,
                                                           maintain_order=True).items():
            analyses[(dataset, system)] = analyse_grades(rows, settings, dataset=dataset, system=system,
                                                         models=analysis_order(config, rows))
    return GradeSummary(analyses)


def grades_dir(store: ArtifactStore) -> StorePath:
    return store.root / GRADES_DIR


def write_grade_summary(tables: DownstreamTables, summary: GradeSummary, directory: StorePath) -> dict[str, StorePath]:
    """Every gathered and analysis table as ``<name>.parquet``, each analysis's plots and manifest
    under ``<dataset>/<system>/``, and ``manifest.json`` listing the analyses."""
    paths = {name: write_parquet(table.to_arrow(), directory / f"{name}.parquet")
             for name, table in {**tables.tables(), **summary.tables()}.items()}
    for (dataset, system), analysis in summary.analyses.items():
        for name, svg in analysis.plots.items():
            write_text(svg, directory / dataset / system / f"{name}.svg")
        write_json(analysis.manifest, directory / dataset / system / "manifest.json")
    paths["manifest"] = write_json([{"dataset": d, "system": s} for d, s in summary.analyses], directory / "manifest.json")
    return paths


def results_views(store: ArtifactStore) -> dict[str, StorePath]:
    """The L6 tables ``results.duckdb`` exposes (none before the grade analysis ran):
    ``downstream_answers``, ``judgements``, ``downstream_dropped``, ``judge_agreement`` and the
    ``grade_*`` tables."""
    directory = grades_dir(store)
    if not (directory / "manifest.json").is_file():
        return {}
    views = {"downstream_answers": "answers", "judgements": "judgements", "downstream_dropped": "dropped",
             "judge_agreement": "agreement", **{f"grade_{name}": f"grade_{name}" for name in ANALYSIS_TABLES}}
    return {view: directory / f"{name}.parquet" for view, name in views.items()
            if (directory / f"{name}.parquet").is_file()}


def per_query_path(store: ArtifactStore) -> StorePath | None:
    """The gathered L6 per-query rows, which join ``per_query_metrics`` (None before any)."""
    path = grades_dir(store) / "per_query.parquet"
    return path if path.is_file() else None


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def _verdict(analysis: GradeAnalysis) -> str:
    """Does the answer quality differ by model: the chosen model's Wald test with the configured
    covariance (clustered on the query by default: it holds its level when the criteria of one
    answer are correlated, where the likelihood-ratio test does not), the letters, the best model."""
    dataset, system = analysis.manifest["dataset"], analysis.manifest["system"]
    overall = analysis.descriptive.filter(pl.col("criterion") == "all").sort("mean", descending=True)
    if len(analysis.manifest["models"]) < 2:
        return (f"{dataset} · {system}: one model only ({analysis.manifest['models'][0]}, mean grade "
                f"{overall['mean'][0]:.2f}); nothing to compare.")
    omnibus = analysis.omnibus.filter(pl.col("test") == VERDICT_TEST)
    if omnibus.is_empty():
        return f"{dataset} · {system}: {analysis.manifest['selection']}"
    test = omnibus.row(0, named=True)
    alpha = analysis.manifest["settings"]["alpha"]
    differs = test["p_value"] <= alpha
    letters = ", ".join(f"{row['model']} {row['letters']}" for row in analysis.letters.iter_rows(named=True))
    best = overall.row(0, named=True)
    return (f"{dataset} · {system}: the answer quality {'differs' if differs else 'does not detectably differ'} by "
            f"model (Wald χ²({test['df']}) = {test['statistic']:.1f}, p = {_fmt_p(test['p_value'])}, "
            f"α = {alpha}, {test['candidate']}, {test['note']}); highest mean grade {best['model']} {best['mean']:.2f} "
            f"(SD {best['sd']:.2f}); letter groups: {letters or 'none'}.")


def _power_sentence(analysis: GradeAnalysis) -> str:
    if analysis.power.is_empty():
        return "No power analysis: one model only."
    rows = analysis.power.filter(pl.col("criterion") == "mean")
    row = (rows if rows.height else analysis.power).row(0, named=True)
    what = f"Power: a {row['difference']} grade-point difference on the {row['criterion']} grade"
    if row["n_required"] is None:
        return f"{what}: no number of queries is given ({row['note']})."
    approximation = row["normal_approximation"]
    return (f"{what} needs about {row['n_required']:,} queries for {row['target']:.0%} power at α = {row['alpha']} "
            f"(paired t, {row['n_simulations']:,} simulations per n, seed {row['seed']}; normal approximation "
            f"{'n/a' if approximation is None else f'{approximation:,}'}); this run has "
            f"{analysis.manifest['modelled_queries']:,}.")


def verdict_sentences(store: ArtifactStore, dataset: str) -> list[tuple[str, str]]:
    """(report section title, verdict sentence) of each (dataset, system) the grade analysis
    covered — the sentence its report section opens with."""
    return [(section_title(dataset, system), _verdict(analysis)) for system, _, analysis in _stored_analyses(store, dataset)]


def section_title(dataset: str, system: str) -> str:
    return f"L6 downstream answers: {dataset} · {system}"


def _stored_analyses(store: ArtifactStore, dataset: str) -> list[tuple[str, pl.Expr, GradeAnalysis]]:
    """(system, row filter, stored analysis) of each system of ``dataset`` the analysis covered."""
    directory = grades_dir(store)
    if not (directory / "manifest.json").is_file():
        return []
    analyses = []
    for entry in read_json(directory / "manifest.json"):
        if entry["dataset"] != dataset:
            continue
        system = entry["system"]
        where = (pl.col("dataset") == dataset) & (pl.col("system") == system)
        tables = {name: read_frame(directory / f"grade_{name}.parquet").filter(where).drop("dataset", "system")
                  for name in ANALYSIS_TABLES}
        manifest = read_json(directory / dataset / system / "manifest.json")
        analyses.append((system, where, GradeAnalysis(**tables, plots={}, manifest=manifest)))
    return analyses


def report_sections(store: ArtifactStore, dataset: str) -> list[ReportSection]:
    """The L6 section of each (dataset, system) the grade analysis covered: the verdict, the
    descriptive table, the AIC choice, the omnibus tests, pairs and letters, power, the plots,
    judge agreement, and what was dropped or could not be measured offline."""
    directory = grades_dir(store)
    sections = []
    for system, where, analysis in _stored_analyses(store, dataset):
        tables, manifest = analysis.tables(), analysis.manifest
        answers = read_frame(directory / "judgements.parquet").filter(where)
        agreement = read_frame(directory / "agreement.parquet").filter(where).drop("dataset", "system")
        dropped = read_frame(directory / "dropped.parquet").filter(where).drop("dataset", "system")
        counts = answers.unique(["model", "query_id"], maintain_order=True).group_by("model", maintain_order=True).agg(
            pl.col("grade").is_not_null().sum().alias("graded"), pl.col("malformed").is_not_null().sum().alias("malformed"),
            pl.col("skipped").is_not_null().sum().alias("skipped"))
        judge_notes = ("The judge is the offline qrels judge: its grades are derived from the relevance judgements "
                       "(relevance from the cited passage, ranking from nDCG@k, coverage from context recall), so "
                       "there is no agreement to report." if agreement.is_empty() else
                       "Judge agreement with the qrels judge (linear weighted kappa) per model and criterion below.")
        intro = " ".join([
            _verdict(analysis),
            "Every model answers from the top-k of its own run with the same generator, judge and prompts.",
            f"Grades 1-5 on {', '.join(manifest['criteria'])}; {manifest['modelled_queries']:,} queries graded "
            f"under every model and criterion are modelled ({manifest['incomplete_queries']:,} incomplete left out).",
            f"Model choice: {manifest['selection']}",
            _power_sentence(analysis), judge_notes,
            "Not measured offline: no instruction-tuned LLM installs offline with its weights, so the answers are "
            "extractive (the best-matching context sentence) and the grades come from the qrels; an "
            "OpenAI-compatible generator and judge plug in through judge.yaml (kind: http).",
        ])
        figures = tuple(Figure(f"{name}-{dataset}-{system}", f"{dataset} · {system}: {caption}",
                               (directory / dataset / system / f"{name}.svg").read_text())
                        for name, caption in PLOT_CAPTIONS.items() if (directory / dataset / system / f"{name}.svg").is_file())
        shown: list[tuple[str, pl.DataFrame]] = [
            ("Mean grade (SD) per model and criterion", tables["descriptive"]),
            ("Models of the grade (AIC compares only the comparable ones)", tables["fits"]),
            ("Omnibus tests: does the grade depend on the model?", tables["omnibus"]),
            ("Pairwise contrasts, Holm-corrected", tables["pairwise"]),
            ("Letter groups", tables["letters"]),
            ("Power", tables["power"]),
            ("Answers graded, malformed and skipped per model", counts),
        ]
        if agreement.height:
            shown.append(("Judge agreement with the qrels judge", agreement))
        if dropped.height:
            shown.append(("Queries dropped from the paired comparisons (missing for some model)", dropped))
        sections.append(ReportSection(title=section_title(dataset, system), intro=intro,
                                      tables=tuple(shown), figures=figures))
    return sections


def manifest_counts(results: Mapping[str, DownstreamResult]) -> dict[str, Any]:
    """Per system: counts, agreement and HTTP traffic (cache hits) of a partition's manifests."""
    return {system: {"counts": result.manifest["counts"], "agreement": result.manifest["agreement"],
                     "traffic": result.manifest["traffic"]} for system, result in results.items()}
