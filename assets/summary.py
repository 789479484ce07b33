"""Cross-model summary: the results database and the leaderboard over every current card."""


import dagster as dg

from embedpyramid.results import EvaluatedPartition, build_results_db, read_leaderboard
from embedpyramid.retrieval import read_metrics_manifest
from embedpyramid.tables import markdown_table
from assets.retrieval import EXACT
from resources import ProjectResource


@dg.asset(
    deps=["retrieval_metrics"],
    group_name="summary",
    code_version="1",
    kinds={"duckdb"},
    automation_condition=dg.AutomationCondition.eager(),
)
def results_db(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """``<data>/results.duckdb``: per-query metrics, runs, qrels and the leaderboard of every card
    in ``models.yaml`` on every dataset that has been evaluated."""
    config, store = project.config, project.store
    partitions, missing = [], []
    for dataset in config.datasets:
        for model in config.models.values():
            metrics_path = store.metrics_path(dataset, model.key, EXACT)
            if not metrics_path.is_file():
                missing.append(f"{model.key} × {dataset}")
                continue
            partitions.append(EvaluatedPartition(
                dataset=dataset, model_key=model.key, model_name=model.name, card_hash=model.card_hash,
                card=model.hashed_fields(), system=EXACT, metrics_path=metrics_path,
                run_path=store.run_dir(dataset, model.key) / f"{EXACT}.parquet",
                qrels_path=store.dataset_dir(dataset) / "qrels.parquet",
                conventions=read_metrics_manifest(metrics_path)["conventions"],
            ))
    if missing:
        context.log.warning(f"not yet evaluated, left out of the summary: {', '.join(missing)}")
    path = build_results_db(store.results_db, partitions)
    leaderboard = read_leaderboard(path)
    wide = leaderboard.pivot("model", index=["dataset", "metric"], values="mean", maintain_order=True)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "partitions": dg.MetadataValue.int(len(partitions)),
            "not_evaluated": dg.MetadataValue.json(missing),
            "leaderboard": dg.MetadataValue.md(markdown_table(wide)),
        },
    )
