"""Pyramid L2, the task families beside retrieval, and L1 pair sanity.

Per family F (sts, pair_classification, classification, clustering, bitext): ``frozen_F_dataset``
(one partition per F dataset) and ``task_F`` (model × F dataset), on their own dynamic partition
set ``F_datasets``, so adding a task dataset never adds partitions to, nor stales, retrieval's
assets. ``pair_sanity`` (retrieval's partitions) and ``pair_sanity_F`` (the pair families) give
the AUC of known-similar against random pairs. ``task_comparisons`` gathers them all and compares
the models.
"""

import dagster as dg
import polars as pl

from assets.embeddings import progress_logger
from assets.metadata import excluded_metadata, partition_check, summary_inputs, table_metadata, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.config.tasks import task_family_module
from embedpyramid.hashing import sha256_table
from embedpyramid.reports.tables import markdown_table
from embedpyramid.store import write_json
from pipelines.freshness import (
    CONVENTIONS,
    EVALUATE_WHEN_STALE,
    MODEL_CARD,
    RESAMPLING,
    SUMMARIZE_WHEN_STALE,
    TASK_COMPARISON,
    TASK_FACETS,
    facet_deps,
)
from pipelines.instance import ENCODER_POOL
from pipelines.partitions import (
    PAIR_FAMILIES,
    TASK_FAMILIES,
    model_dataset_partitions,
    task_dataset_partitions,
    task_partitions,
)
from resources import EncoderRegistry, ProjectResource

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
        deps=[f"frozen_{family}_dataset", *facet_deps(MODEL_CARD, _FACET[family])],
        group_name="l2_tasks",
        code_version=function_version(__file__, "task", task_family_module(family)),
        kinds={"torch", "parquet"},
        pool=ENCODER_POOL,
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"The {family} task on one card's vectors of the dataset's texts (cached, content-addressed): "
                    "per-item values, predictions, the summary (mean ± sd over seeds where stochastic) and per-seed "
                    "values, with the settings and every seed.",
    )
    def task(context: dg.AssetExecutionContext, project: ProjectResource,
             encoders: EncoderRegistry) -> dg.MaterializeResult:
        from embedpyramid.tasks.level import evaluate_task, task_vectors, tasks_dir, write_task_result

        part = project.partition(context)
        spec, model = part.config.task_dataset(part.dataset), part.model
        vectors, table = task_vectors(part.store, model, part.frozen, spec, lambda: encoders.encoder(model),
                                      progress_logger(context, f"encoded texts with {model.key}"))
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
                "embeddings_cache_hit": dg.MetadataValue.bool(table.cache_hit),
                "card_key": dg.MetadataValue.text(model.key),
                "path": dg.MetadataValue.path(str(path)),
            },
            data_version=dg.DataVersion(sha256_table(result.summary.to_arrow())),
        ))

    return task


def _sanity_metadata(context: dg.AssetExecutionContext, sanity, where: str) -> dict[str, dg.MetadataValue]:
    if sanity.warning:
        context.log.warning(f"{where}: {sanity.warning}")
    return {
        "auc": dg.MetadataValue.float(sanity.auc),
        "n_similar": dg.MetadataValue.int(sanity.n_similar),
        "similar_mean_cosine": dg.MetadataValue.float(sanity.similar_mean),
        "random_mean_cosine": dg.MetadataValue.float(sanity.random_mean),
        "warning": dg.MetadataValue.text(sanity.warning or "none"),
        "definition": dg.MetadataValue.text(sanity.definition),
        "seed": dg.MetadataValue.int(sanity.settings["seed"]),
    }


@dg.asset(
    partitions_def=model_dataset_partitions,
    deps=["query_embeddings", "document_embeddings", "frozen_dataset", *facet_deps(CONVENTIONS, RESAMPLING)],
    group_name="l1_geometry",
    code_version=function_version(__file__, "pair_sanity"),
    kinds={"parquet"},
    automation_condition=EVALUATE_WHEN_STALE,
)
def pair_sanity(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """AUC of each query and its relevant documents against as many seeded random (query,
    document) pairs; a warning when it is near 0.5."""
    from embedpyramid.encode import cached_embedding_path, read_embeddings
    from embedpyramid.geometry.pair_sanity import PairSanitySettings, retrieval_pair_sanity
    from embedpyramid.geometry.paths import PAIR_SANITY_FILE, l1_dir
    from embedpyramid.store import read_frame

    part = project.partition(context)
    config, store, model, frozen = part.config, part.store, part.model, part.frozen
    query_ids, queries = read_embeddings(cached_embedding_path(store, model, frozen, "query"))
    doc_ids, documents = read_embeddings(cached_embedding_path(store, model, frozen, "document"))
    sanity = retrieval_pair_sanity(
        query_ids, queries, doc_ids, documents, read_frame(frozen.path("qrels")),
        PairSanitySettings(seed=config.protocol.comparison.seed),
        relevance_threshold=config.protocol.conventions(config.dataset(part.dataset)).relevance_threshold)
    path = write_json(sanity.as_dict(), l1_dir(store, part.dataset, model.key) / PAIR_SANITY_FILE)
    return with_provenance(context, project, dg.MaterializeResult(metadata={**_sanity_metadata(context, sanity, f"{model.key} on {part.dataset}"),
                                          "card_key": dg.MetadataValue.text(model.key),
                                          "path": dg.MetadataValue.path(str(path))}))


def _pair_sanity_asset(family: str) -> dg.AssetsDefinition:
    @dg.asset(
        name=f"pair_sanity_{family}",
        partitions_def=task_partitions[family],
        deps=[f"task_{family}", f"frozen_{family}_dataset", *facet_deps(RESAMPLING)],
        group_name="l1_geometry",
        code_version=function_version(__file__, "sanity_asset"),
        kinds={"parquet"},
        automation_condition=EVALUATE_WHEN_STALE,
        description=f"AUC of the known-similar pairs of a {family} dataset against as many seeded random pairs "
                    "from the same pools (the cached vectors of task_" + family + "); a warning when near 0.5.",
    )
    def sanity_asset(context: dg.AssetExecutionContext, project: ProjectResource,
                     encoders: EncoderRegistry) -> dg.MaterializeResult:
        from embedpyramid.geometry.pair_sanity import PairSanitySettings, task_pair_sanity
        from embedpyramid.geometry.paths import PAIR_SANITY_FILE, l1_dir
        from embedpyramid.store import read_frame
        from embedpyramid.tasks.level import task_vectors

        part = project.partition(context)
        spec, model = part.config.task_dataset(part.dataset), part.model
        vectors, _ = task_vectors(part.store, model, part.frozen, spec, lambda: encoders.encoder(model))
        sanity = task_pair_sanity(family, read_frame(part.frozen.path("pairs")), vectors,
                                  PairSanitySettings(seed=part.config.protocol.comparison.seed))
        path = write_json(sanity.as_dict(), l1_dir(part.store, part.dataset, model.key) / PAIR_SANITY_FILE)
        return with_provenance(context, project, dg.MaterializeResult(metadata={**_sanity_metadata(context, sanity, f"{model.key} on {part.dataset}"),
                                              "card_key": dg.MetadataValue.text(model.key),
                                              "path": dg.MetadataValue.path(str(path))}))

    return sanity_asset


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
    from embedpyramid.tasks.summary import summarize_tasks, tasks_summary_dir

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
task_pair_sanity_assets = [_pair_sanity_asset(family) for family in PAIR_FAMILIES]
TASK_ASSETS = [*frozen_task_datasets, *task_assets, pair_sanity, *task_pair_sanity_assets, task_comparisons]
