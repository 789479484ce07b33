"""Pyramid L3, benchmark transfer: the reproduction check of every (model, dataset) with published
scores (recorded with ``retrieval_metrics``), and the transfer analysis over all partitions."""

import dagster as dg

from assets.metadata import excluded_metadata, partition_check, summary_inputs, table_metadata
from embedpyramid.code_version import function_version
from graphbase.conditions import SUMMARIZE_WHEN_STALE
from graphbase.facets import COMPARISON, RESAMPLING, TRANSFER, facet_deps
from graphbase.partitions import model_dataset_partitions
from resources import ProjectResource

STS_RESULTS = dg.AssetKey("task_sts")
"""The L2 STS asset: its results on disk (``<data>/tasks/<dataset>/<card key>/``) rank the models
on each STS dataset."""
REPRODUCTION_CHECK = "reproduces_published_scores"
EXACT = "exact"

reproduction_check_spec = partition_check(
    REPRODUCTION_CHECK, "retrieval_metrics", model_dataset_partitions,
    "Every published score of this model on this dataset is reproduced within its tolerance (warns, never blocks)",
)


def reproduction_check_result(checks: list) -> dg.AssetCheckResult:
    """The check of one partition: measured, published, difference, tolerance and status of each
    published score, and for a mismatch the usual causes with this run's values."""
    from embedpyramid.transfer.level import check_summary
    from embedpyramid.transfer.reproduction import reproduction_frame

    passed, summary = check_summary(checks)
    frame = reproduction_frame(checks)
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey("retrieval_metrics"), check_name=REPRODUCTION_CHECK, passed=passed, severity=dg.AssetCheckSeverity.WARN,
        description=summary,
        metadata={
            "summary": dg.MetadataValue.text(summary),
            "checks": table_metadata(frame.select("metric", "published", "measured", "difference", "tolerance",
                                                  "status", "n_items", "source")),
            "messages": dg.MetadataValue.md("\n\n".join(f"- {message}" for message in frame["message"]) or summary),
        },
    )


@dg.asset(
    deps=["retrieval_metrics", STS_RESULTS, *facet_deps(TRANSFER, RESAMPLING, COMPARISON)],
    group_name="l3_transfer",
    code_version=function_version(__file__, "benchmark_transfer"),
    kinds={"parquet"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def benchmark_transfer(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Does the public ranking of the models hold on your data? Ranks the models on every dataset's
    confirmatory measure (published scores standing in for a benchmark not on disk, STS datasets
    from their L2 results) and compares every public × own pair: Kendall's τ_b and Spearman's ρ with
    bootstrap intervals, the probability that the public winner is the own winner, the flipped
    model pairs. Also checks every published score against this run (the ``reproduction`` table)."""
    from embedpyramid.summary.comparisons import evaluated_partitions
    from embedpyramid.transfer.level import evaluate_transfer, transfer_dir, transfer_verdicts, write_level

    config, store = project.config, project.store
    inputs = summary_inputs(context, config, project.data_dir)
    partitions, missing = evaluated_partitions(config, store, inputs)
    level = evaluate_transfer(config, store, {(p.dataset, p.model_key): p.metrics_path for p in partitions},
                              inputs=inputs, system=EXACT)
    directory = write_level(level, transfer_dir(store))
    result = level.transfer
    skipped = result.settings["skipped_datasets"]
    for name, reason in skipped.items():
        context.log.warning(f"transfer: {name} left out: {reason}")
    statuses = [check.status for check in level.reproduction]
    metadata = {
        "verdict": dg.MetadataValue.md("\n\n".join(transfer_verdicts(result))),
        "pairs": dg.MetadataValue.int(result.pairs.height),
        "ranked_datasets": dg.MetadataValue.json(result.rankings["dataset"].unique(maintain_order=True).to_list()),
        "skipped_datasets": dg.MetadataValue.json(skipped),
        "not_evaluated": dg.MetadataValue.json(missing),
        **excluded_metadata(inputs),
        "references": dg.MetadataValue.int(level.references.height),
        "reproduction": dg.MetadataValue.json({status: statuses.count(status) for status in sorted(set(statuses))}),
        "seed": dg.MetadataValue.int(result.settings["seed"]),
        "n_resamples": dg.MetadataValue.int(result.settings["n_resamples"]),
        "path": dg.MetadataValue.path(str(directory)),
    }
    if result.pairs.height:
        metadata["pair_table"] = table_metadata(result.pairs.drop("models", "public_winner", "own_winner"))
    return dg.MaterializeResult(metadata=metadata)
