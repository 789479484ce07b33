"""Cross-model summaries: paired comparisons, the results database and the comparison report."""

import dagster as dg
import polars as pl

from assets.metadata import excluded_metadata, summary_inputs, table_metadata
from embedpyramid.code_version import function_version
from embedpyramid.config import ProjectConfig
from embedpyramid.current_inputs import COMPARISONS, SummaryInputs
from embedpyramid.rendering.svg import forest_plot_svg, svg_markdown
from embedpyramid.rendering.tables import hsd_summary, key_table_markdown, markdown_table
from embedpyramid.store import write_parquet
from embedpyramid.summary.results import build_results_db, read_leaderboard
from graphbase.conditions import SUMMARIZE_WHEN_STALE
from graphbase.facets import COMPARISON, facet_deps
from graphbase.partitions import dataset_partitions
from resources import ProjectResource


@dg.asset(
    deps=["retrieval_metrics", *facet_deps(COMPARISON)],
    partitions_def=dataset_partitions,
    group_name="summary",
    code_version=function_version(__file__, "comparisons"),
    kinds={"parquet"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def comparisons(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """One dataset's comparisons (a partition per dataset, over every card's partition on it, so
    a new model on one dataset rewrites that dataset's only): every model against the baseline
    per metric × slice: mean delta, paired bootstrap CI, d_z, sign-flip and t-test p-values,
    adjusted within the confirmatory (Holm) or exploratory (Benjamini–Hochberg) family,
    win/tie/loss; the Tukey HSD groups with three or more models; the random-ranking floor; the
    worst regressions and the per-query deltas of the report metric; and the verdict. With
    systems.yaml, the same model comparisons within each L5 system, each system's verdict against
    dense exact and the latency each stage adds; with judge.yaml, L6's judge and answer metrics."""
    from embedpyramid.summary.comparisons import compare_evaluated, evaluated_partitions
    from embedpyramid.systems.comparison import system_partitions

    config, store, dataset = project.config, project.store, context.partition_key
    inputs = summary_inputs(context, config, project.data_dir)
    partitions, missing = evaluated_partitions(config, store, inputs, [dataset])
    systems, missing_systems = system_partitions(config, store, inputs, [dataset])
    tables = compare_evaluated(config, store, partitions, systems, inputs=inputs, datasets=[dataset])
    paths = tables.write(store.dataset_comparisons_dir(dataset))
    for reason in [*tables.skipped, *(f"not evaluated yet: {m}" for m in [*missing, *missing_systems])]:
        context.log.warning(reason)
    compared = tables.comparisons
    families = (compared.group_by("dataset", "family", "adjustment", maintain_order=True).len("tests").to_dicts()
                if compared.height else [])
    metadata = {
        "rows": dg.MetadataValue.int(compared.height),
        "baseline": dg.MetadataValue.text(config.baseline.key),
        "families": dg.MetadataValue.json(families),
        "verdict": dg.MetadataValue.md("\n\n".join(v["text"] for v in tables.verdicts) or "nothing compared yet"),
        "skipped": dg.MetadataValue.json(tables.skipped),
        **excluded_metadata(inputs),
        "key_table": dg.MetadataValue.md(key_table_markdown(compared) if compared.height else "nothing compared yet"),
        "path": dg.MetadataValue.path(str(paths["comparisons"])),
    }
    if tables.hsd.height:
        metadata["hsd"] = dg.MetadataValue.md(markdown_table(hsd_summary(tables.hsd)))
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    deps=["retrieval_metrics", "comparisons", "efficiency", "benchmark_transfer", "task_comparisons",
          *facet_deps(COMPARISON)],
    group_name="summary",
    code_version=function_version(__file__, "results_db"),
    kinds={"duckdb"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def results_db(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """``<data>/results.duckdb``: per-query metrics, runs, qrels, the leaderboard and the
    comparisons of every card in ``models.yaml`` on every dataset that has been evaluated, with
    the L5 systems' rows, verdicts against dense exact and latency, the L2 task tables, the L3
    transfer, reproduction and published-score tables, and with judge.yaml L6's judge and answer
    metrics (in per_query_metrics), answers, judgements and grade tables."""
    from embedpyramid.current_inputs import provenance_table
    from embedpyramid.downstream.grades import per_query_path, results_views
    from embedpyramid.summary.comparisons import evaluated_partitions, read_comparison_tables, results_tables
    from embedpyramid.systems.comparison import system_partitions
    from embedpyramid.tasks.comparison import task_conventions_table, task_results_tables

    store = project.store
    inputs = summary_inputs(context, project.config, project.data_dir)
    compared = read_comparison_tables(store, compared_datasets(project.config, inputs))
    partitions, missing = evaluated_partitions(project.config, store, inputs)
    systems, missing_systems = system_partitions(project.config, store, inputs)
    if missing or missing_systems:
        context.log.warning(f"not yet evaluated, left out of the summary: {', '.join([*missing, *missing_systems])}")
    downstream = per_query_path(store) if project.config.downstream else None
    excluded = write_parquet(inputs.frame().to_arrow(), store.comparisons_dir / "excluded_partitions.parquet")
    provenance = write_parquet(
        provenance_table(store, [model.key for model in project.config.models.values()], inputs).to_arrow(),
        store.comparisons_dir / "provenance.parquet")
    views = {**results_tables(store, compared), **task_results_tables(store), "excluded_partitions": excluded,
             "provenance": provenance,
             **(results_views(store) if project.config.downstream else {})}
    conventions = task_conventions_table(store)
    built = build_results_db(store.results_db, [*partitions, *systems], views,
                             quality_metric=project.config.protocol.comparison.report_metric,
                             extra_metrics=[downstream] if downstream else [],
                             extra_conventions=[conventions] if conventions else [])
    path = built.path
    baseline = project.config.baseline.key
    exact = read_leaderboard(path).filter(pl.col("system") == "exact")
    wide = exact.pivot("model", index=["dataset", "metric"], values="mean", maintain_order=True)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "partitions": dg.MetadataValue.int(len(partitions)),
            # Files of per-query metrics, runs and qrels read into the database / kept from the last build.
            "sources_read": dg.MetadataValue.int(built.sources_read),
            "sources_kept": dg.MetadataValue.int(built.sources_kept),
            "not_evaluated": dg.MetadataValue.json(missing),
            **excluded_metadata(inputs),
            "baseline": dg.MetadataValue.text(baseline),
            "leaderboard": table_metadata(wide.rename({baseline: f"{baseline} (baseline)"}, strict=False)),
        },
    )


def compared_datasets(config: ProjectConfig, inputs: SummaryInputs) -> list[str]:
    """The datasets whose comparisons a summary over every dataset reads: those whose
    ``comparisons`` partition is current (``inputs`` lists the others)."""
    return [dataset for dataset in config.datasets if inputs.admits(COMPARISONS, dataset)]


def report_asset(*, with_serving: bool) -> dg.AssetsDefinition:
    """The report, after every summary and analysis it shows (the L4 frontier when ann.yaml exists)."""

    @dg.asset(
        deps=["results_db", "comparisons", "norm_geometry", "normalization_price",
              *(["serving_frontier"] if with_serving else []), "benchmark_transfer", "task_comparisons",
              *facet_deps(COMPARISON)],
        group_name="summary",
        code_version=function_version(__file__, "comparison_report"),
        kinds={"html"},
        automation_condition=SUMMARIZE_WHEN_STALE,
    )
    def comparison_report(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        """``<data>/report/report.{md,html}``: the verdict, the leaderboard with the random floor,
        the HSD groups, the comparisons, a forest plot of slice deltas coloured by the adjusted
        decision, the per-query delta distributions, the worst regressions, the L1 geometry and
        normalization price, the L4 recall/QPS frontier of every model, the L3 reproduction and
        transfer sections, the L6 grade analysis and the environment."""
        from embedpyramid.summary.comparisons import read_comparison_tables
        from embedpyramid.summary.contents import build_report

        config, store = project.config, project.store
        metric = config.protocol.comparison.report_metric
        inputs = summary_inputs(context, config, project.data_dir)
        tables = read_comparison_tables(store, compared_datasets(config, inputs))
        files = build_report(config, store, read_leaderboard(store.results_db), tables, inputs=inputs)
        metadata = {
            "markdown": dg.MetadataValue.path(str(files.markdown)),
            "html": dg.MetadataValue.path(str(files.html)),
            "verdict": dg.MetadataValue.md("\n\n".join(v["text"] for v in tables.verdicts) or "nothing compared yet"),
            **excluded_metadata(inputs),
        }
        if tables.comparisons.height:
            metadata["key_table"] = dg.MetadataValue.md(key_table_markdown(tables.comparisons))
            metadata["forest_plot"] = dg.MetadataValue.md(
                svg_markdown(forest_plot_svg(tables.comparisons, metric), f"forest plot of {metric}"))
        return dg.MaterializeResult(metadata=metadata)

    return comparison_report
