"""Cross-model summaries: paired comparisons, the results database and the comparison report."""

import dagster as dg

from assets.metadata import table_metadata
from embedpyramid.reports import forest_plot_svg, key_table_markdown, svg_markdown
from embedpyramid.reports.results import build_results_db, read_leaderboard
from pipelines.freshness import COMPARISON, SUMMARIZE_WHEN_STALE, facet_deps
from resources import ProjectResource


@dg.asset(
    deps=["retrieval_metrics", *facet_deps(COMPARISON)],
    group_name="summary",
    code_version="1",
    kinds={"parquet"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def comparisons(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Every model against the baseline per dataset × metric × slice: mean delta, paired bootstrap
    CI, sign-flip p-value with Holm across the report, win/tie/loss; plus the worst regressions
    and the per-query deltas of the report metric."""
    from embedpyramid.reports.summary import compare_evaluated, evaluated_partitions

    config, store = project.config, project.store
    partitions, missing = evaluated_partitions(config, store)
    tables = compare_evaluated(config, store, partitions)
    paths = tables.write(store.comparisons_dir)
    for reason in [*tables.skipped, *(f"not evaluated yet: {m}" for m in missing)]:
        context.log.warning(reason)
    compared = tables.comparisons
    families = compared["holm_family"].unique().sort().to_list() if compared.height else []
    return dg.MaterializeResult(metadata={
        "rows": dg.MetadataValue.int(compared.height),
        "baseline": dg.MetadataValue.text(config.baseline.key),
        "holm_families": dg.MetadataValue.json(families),
        "skipped": dg.MetadataValue.json(tables.skipped),
        "key_table": dg.MetadataValue.md(key_table_markdown(compared) if compared.height else "nothing compared yet"),
        "path": dg.MetadataValue.path(str(paths["comparisons"])),
    })


@dg.asset(
    deps=["retrieval_metrics", "comparisons", *facet_deps(COMPARISON)],
    group_name="summary",
    code_version="2",
    kinds={"duckdb"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def results_db(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """``<data>/results.duckdb``: per-query metrics, runs, qrels, the leaderboard and the
    comparisons of every card in ``models.yaml`` on every dataset that has been evaluated."""
    from embedpyramid.reports.summary import evaluated_partitions

    store = project.store
    partitions, missing = evaluated_partitions(project.config, store)
    if missing:
        context.log.warning(f"not yet evaluated, left out of the summary: {', '.join(missing)}")
    path = build_results_db(store.results_db, partitions, {
        name: store.comparisons_dir / f"{name}.parquet" for name in ("comparisons", "regressions")})
    baseline = project.config.baseline.key
    wide = read_leaderboard(path).pivot("model", index=["dataset", "metric"], values="mean", maintain_order=True)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "partitions": dg.MetadataValue.int(len(partitions)),
            "not_evaluated": dg.MetadataValue.json(missing),
            "baseline": dg.MetadataValue.text(baseline),
            "leaderboard": table_metadata(wide.rename({baseline: f"{baseline} (baseline)"}, strict=False)),
        },
    )


def report_asset(*, with_serving: bool) -> dg.AssetsDefinition:
    """The report, after every summary and analysis it shows (the L4 frontier when ann.yaml exists)."""

    @dg.asset(
        deps=["results_db", "comparisons", "norm_geometry", "normalization_price",
              *(["serving_frontier"] if with_serving else []), *facet_deps(COMPARISON)],
        group_name="summary",
        code_version="3",
        kinds={"html"},
        automation_condition=SUMMARIZE_WHEN_STALE,
    )
    def comparison_report(project: ProjectResource) -> dg.MaterializeResult:
        """``<data>/report/report.{md,html}``: leaderboard, comparisons, a forest plot of slice
        deltas with CIs, the per-query delta distributions, the worst regressions, the L1 geometry
        and normalization price, and the L4 recall/QPS frontier of every model."""
        from embedpyramid.reports.summary import build_report, read_comparison_tables

        config, store = project.config, project.store
        metric = config.protocol.comparison.report_metric
        tables = read_comparison_tables(store.comparisons_dir)
        files = build_report(config, store, read_leaderboard(store.results_db), tables)
        metadata = {
            "markdown": dg.MetadataValue.path(str(files.markdown)),
            "html": dg.MetadataValue.path(str(files.html)),
        }
        if tables.comparisons.height:
            metadata["key_table"] = dg.MetadataValue.md(key_table_markdown(tables.comparisons))
            metadata["forest_plot"] = dg.MetadataValue.md(
                svg_markdown(forest_plot_svg(tables.comparisons, metric), f"forest plot of {metric}"))
        return dg.MaterializeResult(metadata=metadata)

    return comparison_report
