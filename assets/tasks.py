"""Pyramid L2, the task families beside retrieval.

Per family F (sts, pair_classification, classification, clustering, bitext): ``frozen_F_dataset``
(one partition per F dataset) and ``task_F`` (model × F dataset), on their own dynamic partition
set ``F_datasets``, so adding a task dataset never adds partitions to, nor stales, retrieval's
assets. ``task_F`` reads the card's vectors of the texts from ``F_embeddings``
(:mod:`assets.embeddings`), as retrieval reads ``query_embeddings``. ``task_comparisons`` gathers
the tasks and L1's pair sanity (:mod:`assets.geometry`) and compares the models.
"""

import dagster as dg
import polars as pl

from assets.metadata import excluded_metadata, partition_check, summary_inputs, table_metadata, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.config.tasks import task_family_module
from embedpyramid.hashing import sha256_table
from embedpyramid.rendering.tables import markdown_table
from graphbase.conditions import EVALUATE_WHEN_STALE, SUMMARIZE_WHEN_STALE
from graphbase.facets import MODEL_CARD, TASK_COMPARISON, TASK_FACETS, facet_deps
from graphbase.partitions import (
    PAIR_FAMILIES,
    TASK_FAMILIES,
    task_dataset_partitions,
    task_partitions,
)
from resources import ProjectResource

_FACET = {facet.partitioned_by: facet for facet in TASK_FACETS}


def _frozen_asset(family: str) -> dg.AssetsDefinition:
    name = f"frozen_{family}_dataset"
    partitions = task_dataset_partitions[family]

    @dg.asset(
        name=name,
        partitions_def=partitions,
        deps=facet_deps(_FACET[family]),
        group_name="data",
        code_version=function_version(__file__, "frozen"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"A {family} task dataset frozen to texts (and pairs) tables plus a manifest; its data version "
                    "is the hash of their hashes.",
        check_specs=[partition_check("tables_match_manifest", name, partitions,
                                     "Tables match their manifest hashes and pairs name known text ids", blocking=True)],
    )
    def frozen(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from embedpyramid.data import freeze_task_dataset, load_task_dataset, verify_task_frozen

        dataset = context.partition_key
        frozen = freeze_task_dataset(dataset, load_task_dataset(project.config, dataset),
                                     project.store.dataset_dir(dataset))
        problems = verify_task_frozen(frozen)
        return with_provenance(context, project, dg.MaterializeResult(
            metadata={**{key: dg.MetadataValue.int(value) for key, value in frozen.manifest["counts"].items()},
                      "task": dg.MetadataValue.text(family),
                      "source": dg.MetadataValue.json(frozen.manifest["source"]),
                      "path": dg.MetadataValue.path(str(frozen.directory))},
            data_version=dg.DataVersion(frozen.version),
            check_results=[dg.AssetCheckResult(check_name="tables_match_manifest", passed=not problems,
                                               metadata={"problems": dg.MetadataValue.json(problems)})],
        ))

    return frozen


def _task_asset(family: str) -> dg.AssetsDefinition:
    @dg.asset(
        name=f"task_{family}",
        partitions_def=task_partitions[family],
        deps=[f"frozen_{family}_dataset", f"{family}_embeddings", *facet_deps(MODEL_CARD, _FACET[family])],
        group_name="l2_tasks",
        code_version=function_version(__file__, "task", task_family_module(family)),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"The {family} task on one card's vectors of the dataset's texts ({family}_embeddings): "
                    "per-item values, predictions, the summary (mean ± sd over seeds where stochastic) and per-seed "
                    "values, with the settings and every seed.",
    )
    def task(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from embedpyramid.tasks.level import evaluate_task, task_vectors, tasks_dir, write_task_result

        part = project.partition(context)
        spec, model = part.config.task_dataset(part.dataset), part.model
        vectors = task_vectors(part.store, model, part.frozen, spec)
        result = evaluate_task(spec, part.frozen, vectors, dataset=part.dataset, model=model.key,
                               similarity=model.similarity)
        path = write_task_result(result, tasks_dir(part.store, part.dataset, model.key))
        overall = result.summary.filter(pl.col("subset") == "all")
        headline = {f"{row['system']} {row['metric']}" + (f" ({row['split']})" if row["split"] != "all" else ""):
                    dg.MetadataValue.float(float(row["value"])) for row in overall.iter_rows(named=True)}
        return with_provenance(context, project, dg.MaterializeResult(
            metadata={
                **headline,
                "summary": table_metadata(result.summary.drop("dataset", "model")),
                "settings": dg.MetadataValue.json(result.settings),
                "items": dg.MetadataValue.int(result.predictions.height),
                "card_key": dg.MetadataValue.text(model.key),
                "path": dg.MetadataValue.path(str(path)),
            },
            data_version=dg.DataVersion(sha256_table(result.summary.to_arrow())),
        ))

    return task


@dg.asset(
    deps=[*(f"task_{family}" for family in TASK_FAMILIES), *(f"pair_sanity_{family}" for family in PAIR_FAMILIES),
          "pair_sanity", *facet_deps(TASK_COMPARISON)],
    group_name="summary",
    code_version=function_version(__file__, "task_comparisons", *map(task_family_module, TASK_FAMILIES)),
    kinds={"parquet"},
    automation_condition=SUMMARIZE_WHEN_STALE,
)
def task_comparisons(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """Every evaluated (card, task dataset) gathered — per-item rows, summaries, pair sanity —
    and each model against the baseline: the paired comparisons of the per-item values (CI, d_z,
    Holm, verdicts) and the paired bootstrap of every whole-set statistic."""
    from embedpyramid.tasks.comparison import summarize_tasks, tasks_summary_dir

    inputs = summary_inputs(context, project.config, project.data_dir)
    summary = summarize_tasks(project.config, project.store, inputs)
    paths = summary.write(tasks_summary_dir(project.store))
    for reason in summary.skipped:
        context.log.warning(reason)
    sanity = summary.tables["pair_sanity"]
    return dg.MaterializeResult(metadata={
        "verdict": dg.MetadataValue.md("\n\n".join(v["text"] for v in summary.verdicts) or "nothing compared yet"),
        "task_datasets": dg.MetadataValue.json(sorted(set(summary.tables["task_summary"]["dataset"]))),
        "comparisons": dg.MetadataValue.int(summary.tables["task_comparisons"].height),
        "statistic_comparisons": dg.MetadataValue.int(summary.tables["task_statistic_comparisons"].height),
        "pair_sanity": dg.MetadataValue.md(markdown_table(sanity.select("dataset", "model", "auc", "warning"))
                                           if sanity.height else "none yet"),
        "skipped": dg.MetadataValue.json(summary.skipped),
        **excluded_metadata(inputs),
        "path": dg.MetadataValue.path(str(paths["task_summary"].parent)),
    })


frozen_task_datasets = [_frozen_asset(family) for family in TASK_FAMILIES]
task_assets = [_task_asset(family) for family in TASK_FAMILIES]
TASK_ASSETS = [*frozen_task_datasets, *task_assets, task_comparisons]
