"""Pyramid L6 (only with a judge.yaml): answers, their metrics and the judge's grades per (model,
dataset), and the grade analysis across models."""

import dagster as dg

from assets.embeddings import progress_logger
from assets.metadata import excluded_metadata, summary_inputs, table_metadata, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.rendering.svg import svg_markdown
from embedpyramid.rendering.tables import markdown_table
from graphbase.conditions import EVALUATE_WHEN_STALE, SUMMARIZE_WHEN_STALE
from graphbase.facets import COMPARISON, CONVENTIONS, JUDGE, facet_deps
from graphbase.partitions import model_dataset_partitions
from graphbase.tags import STAGE_TAG, SUMMARY_STAGE
from resources import ProjectResource

GROUP = "l6_downstream"


@dg.asset(
    partitions_def=model_dataset_partitions,
    deps=["exact_topk", "frozen_dataset", *facet_deps(JUDGE, CONVENTIONS)],
    group_name=GROUP,
    code_version=function_version(__file__, "downstream_answers"),
    kinds={"parquet"},
    automation_condition=EVALUATE_WHEN_STALE,
)
def downstream_answers(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Per system of judge.yaml: each query's top-k context, the generator's answer with its
    citations, the answer and citation metrics, and the judge's 1-5 grades per criterion (with
    the qrels judge's beside an HTTP judge's), as answers, judgements and long per-query rows."""
    from embedpyramid.downstream.grades import answer_partition, manifest_counts, mean_grades
    from embedpyramid.hashing import sha256_json, sha256_table

    part = project.partition(context)
    results = answer_partition(part.config, part.store, part.model, part.dataset, part.frozen,
                               progress=progress_logger(context, f"answered queries with {part.model.key}"))
    counts = manifest_counts(results)
    for system, entry in counts.items():
        if entry["counts"]["generator_malformed"] or entry["counts"]["judge_malformed"]:
            context.log.warning(f"{system}: {entry['counts']['generator_malformed']} malformed answers, "
                                f"{entry['counts']['judge_malformed']} malformed judgements (recorded in judgements)")
    grades = {system: mean_grades(result) for system, result in results.items()}
    metadata = {
        **{f"{system} {metric}": dg.MetadataValue.float(value)
           for system, means in grades.items() for metric, value in means.items()},
        "counts": dg.MetadataValue.json({system: entry["counts"] for system, entry in counts.items()}),
        "ungraded": dg.MetadataValue.int(sum(e["counts"]["queries"] - e["counts"]["judged_queries"]
                                             for e in counts.values())),
        "malformed": dg.MetadataValue.int(sum(e["counts"]["generator_malformed"] + e["counts"]["judge_malformed"]
                                              for e in counts.values())),
        "agreement": dg.MetadataValue.json({system: entry["agreement"] for system, entry in counts.items()}),
        "traffic": dg.MetadataValue.json({system: entry["traffic"] for system, entry in counts.items()}),
        "generator": dg.MetadataValue.json(next(iter(results.values())).manifest["generator"]),
        "judge": dg.MetadataValue.json(next(iter(results.values())).manifest["judge"]),
        "card_key": dg.MetadataValue.text(part.model.key),
    }
    version = sha256_json({system: [sha256_table(result.per_query.to_arrow()), sha256_table(result.answers.to_arrow()),
                                    sha256_table(result.judgements.to_arrow())] for system, result in results.items()})
    return with_provenance(context, project, dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version)))


@dg.asset(
    deps=["downstream_answers", *facet_deps(JUDGE, COMPARISON)],
    group_name=GROUP,
    code_version=function_version(__file__, "grade_analysis"),
    kinds={"parquet", "svg"},
    tags={STAGE_TAG: SUMMARY_STAGE},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def grade_analysis(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Per (dataset, system) across the evaluated models: mean (SD) grade per model × criterion,
    gaussian identity/log/inverse, binomial-logit and ordinal models of the grade with the AIC
    choice among the comparable ones, the omnibus likelihood-ratio and Wald tests, Holm pairs
    with letter groups, the simulated power analysis and the box, bar and heatmap plots; with the
    gathered answers, judgements, paired per-query rows and what the pairing dropped."""
    from embedpyramid.downstream.grades import analyse_downstream, collect_downstream, grades_dir, write_grade_summary

    config, store = project.config, project.store
    inputs = summary_inputs(context, config, project.data_dir)
    tables = collect_downstream(config, store, inputs)
    if tables is None:
        raise FileNotFoundError("no downstream answers on disk for the cards in models.yaml: "
                                "materialize downstream_answers first")
    summary = analyse_downstream(config, tables)
    paths = write_grade_summary(tables, summary, grades_dir(store))
    for row in tables.dropped.iter_rows(named=True):
        context.log.warning(f"{row['dataset']} · {row['system']} · {row['metric']}: {row['dropped_queries']} queries "
                            "left out of the paired comparisons (missing for some model)")
    metadata = {
        "analyses": dg.MetadataValue.json([f"{d} · {s}" for d, s in summary.analyses]),
        "dropped_queries": dg.MetadataValue.int(int(tables.dropped["dropped_queries"].sum())),
        **excluded_metadata(inputs),
        "path": dg.MetadataValue.path(str(paths["manifest"].parent)),
    }
    for (dataset, system), analysis in summary.analyses.items():
        metadata[f"{dataset} · {system} selection"] = dg.MetadataValue.text(analysis.manifest["selection"])
        metadata[f"{dataset} · {system} grades"] = table_metadata(analysis.descriptive)
        if analysis.omnibus.height:
            metadata[f"{dataset} · {system} omnibus"] = dg.MetadataValue.md(markdown_table(analysis.omnibus))
        metadata[f"{dataset} · {system} bar chart"] = dg.MetadataValue.md(
            svg_markdown(analysis.plots["grades_bar"], f"mean grade by model, {dataset} · {system}"))
    return dg.MaterializeResult(metadata=metadata)


DOWNSTREAM_ASSETS = [downstream_answers, grade_analysis]
"""The L6 assets; with them the comparisons read ``downstream_answers`` and the results database
and the report read ``grade_analysis`` (added by :func:`pipelines.graph.build_definitions`)."""
SUMMARY_DEPS = {"comparisons": "downstream_answers", "results_db": "grade_analysis",
                "comparison_report": "grade_analysis"}
