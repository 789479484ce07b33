"""L3 in the graph: the reproduction check on retrieval_metrics (passing and failing on purpose),
the transfer asset over every partition, and a third model recomputing only its own partitions,
the transfer and the summaries."""

import dagster as dg
import duckdb
import polars as pl
from graph_helpers import beir_folder, plan_and_automation, quick_protocol, toy

from assets.transfer import REPRODUCTION_CHECK
from embedpyramid.config import load_config
from embedpyramid.store import ArtifactStore, read_frame
from embedpyramid.transfer.level import read_transfer, transfer_dir
from graphbase.partitions import DATASETS, model_dataset_key
from pipelines.automation import SUMMARY_ASSETS
from pipelines.runner import run_pipeline

CHECK = dg.AssetCheckKey(dg.AssetKey("retrieval_metrics"), REPRODUCTION_CHECK)


def check_evaluations(instance: dg.DagsterInstance) -> dict[str, dg.AssetCheckEvaluation]:
    """The latest reproduction check evaluation of each retrieval_metrics partition."""
    records = instance.get_event_records(dg.EventRecordsFilter(dg.DagsterEventType.ASSET_CHECK_EVALUATION),
                                         ascending=True)
    latest = {}
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        if evaluation.asset_check_key == CHECK:
            latest[evaluation.partition] = evaluation
    return latest


def latest_materialization(instance: dg.DagsterInstance, asset: str, partition: str | None) -> int:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey(asset), asset_partitions=[partition] if partition else None), limit=1).records
    return records[0].storage_id


def reference(model: str, value: float, tolerance: float) -> dict:
    return {"model": model, "metric": "nDCG@10", "value": value, "tolerance": tolerance, "source": "set by this test"}


def test_reproduction_check_passes_and_fails_and_a_third_model_recomputes_only_its_own(write_configs, tmp_path):
    models = {"ngrams": toy(), "ngrams-24": toy(24)}
    public = {"loader": "beir", "path": str(beir_folder(tmp_path / "bench")), "role": "public"}
    own = {"loader": "chatterbot", "categories": ["ai"], "role": "own"}
    standing_in = {"loader": "published", "reference": [reference("ngrams", 0.5, 0.01), reference("ngrams-24", 0.6, 0.01)]}
    datasets = {"bench": public, "mine": own, "paper": standing_in}
    folder = write_configs(models=models, datasets=datasets, protocol=quick_protocol())
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    store = ArtifactStore(data)
    report = run_pipeline(folder, data, instance=instance)
    assert report.failures == [] and report.summary_built
    # A published-only dataset is no partition: nothing to freeze or evaluate.
    assert sorted(instance.get_dynamic_partitions(DATASETS)) == ["bench", "mine"]
    config = load_config(folder)
    keys = {name: model.key for name, model in config.models.items()}
    result = read_transfer(transfer_dir(store))
    assert set(result.rankings["dataset"]) == {"bench", "mine", "paper"}
    pairs = {(row["public_dataset"], row["own_dataset"]): row for row in result.pairs.iter_rows(named=True)}
    assert set(pairs) == {("bench", "mine"), ("paper", "mine")}
    for row in pairs.values():
        assert not row["informative"] and row["kendall_tau_b"] is None
        assert "2 models: a rank correlation is not informative" in row["note"]
    assert pairs[("paper", "mine")]["public_winner"] == [keys["ngrams-24"]]
    # No published score on a dataset with data yet: every partition's check passes, saying so.
    evaluations = check_evaluations(instance)
    assert set(evaluations) == {str(model_dataset_key(m, d)) for m in models for d in ("bench", "mine")}
    assert all(e.passed and "no published score" in e.description for e in evaluations.values())

    # Published scores on the public dataset: one reproduced (the value this pipeline measures),
    # one 0.1 off with a tolerance of 0.01. Only bench's retrieval_metrics and the transfer move.
    measured = {name: read_frame(store.metrics_path("bench", key, "exact")).filter(pl.col("metric") == "nDCG@10")["value"].mean()
                for name, key in keys.items()}
    datasets["bench"] = {**public, "reference": [reference("ngrams", measured["ngrams"], 1e-9),
                                                 reference("ngrams-24", measured["ngrams-24"] + 0.1, 0.01)]}
    folder = write_configs(models=models, datasets=datasets, protocol=quick_protocol())
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/references [bench]", "config/transfer"]
    partitions = {str(model_dataset_key(name, "bench")) for name in models}
    assert {item for item in planned if item[1] is not None} == {("retrieval_metrics", p) for p in partitions}
    assert requested == {("retrieval_metrics", p) for p in partitions}
    assert run_pipeline(folder, data, instance=instance).failures == []
    evaluations = check_evaluations(instance)
    passed = evaluations[str(model_dataset_key("ngrams", "bench"))]
    failed = evaluations[str(model_dataset_key("ngrams-24", "bench"))]
    assert passed.passed and passed.description == "1 of 1 published scores reproduced"
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.WARN
    assert failed.description == "0 of 1 published scores reproduced, 1 fail"
    message = failed.metadata["messages"].value
    assert "difference -0.1000" in message and "outside ±0.01: not reproduced" in message
    assert "document text (title + \" \" + text for 0 of 12 documents" in message and "relevance threshold 1" in message
    with duckdb.connect(str(store.results_db), read_only=True) as con:
        rows = con.execute("SELECT model, status FROM reproduction ORDER BY model").fetchall()
        assert rows == [("ngrams", "pass"), ("ngrams-24", "fail")]
        assert con.execute('SELECT count(*) FROM "references"').fetchall() == [(4,)]
        assert con.execute("SELECT count(*) FROM transfer_pairs").fetchall() == [(2,)]
        assert con.execute("SELECT count(*) FROM transfer_flips").fetchall() == [(2,)]
        assert con.execute("SELECT count(DISTINCT dataset) FROM transfer_rankings").fetchall() == [(3,)]
    markdown = (store.report_dir / "report.md").read_text()
    assert "## Reproduction" in markdown and "## Transfer" in markdown and "not reproduced" in markdown

    # A third model: its own partitions, the transfer and the summaries; nothing of the others.
    models["ngrams-32"] = toy(32)
    folder = write_configs(models=models, datasets=datasets, protocol=quick_protocol())
    planned, requested, _ = plan_and_automation(folder, data, instance)
    assert {partition for _, partition in planned | requested if partition is not None} == {
        str(model_dataset_key("ngrams-32", dataset)) for dataset in ("bench", "mine")}
    assert {asset for asset, partition in planned if partition is None} <= set(SUMMARY_ASSETS)
    existing = [(asset, str(model_dataset_key(name, dataset))) for asset in ("retrieval_metrics", "exact_topk")
                for name in ("ngrams", "ngrams-24") for dataset in ("bench", "mine")]
    before = {item: latest_materialization(instance, *item) for item in [*existing, *((a, None) for a in SUMMARY_ASSETS)]}
    report = run_pipeline(folder, data, instance=instance)
    assert report.failures == [] and report.summary_built
    keys["ngrams-32"] = load_config(folder).models["ngrams-32"].key
    assert sorted(report.materialized) == [(keys["ngrams-32"], "bench"), (keys["ngrams-32"], "mine")]
    assert {item for item, storage_id in before.items() if latest_materialization(instance, *item) != storage_id} == {
        (asset, None) for asset in SUMMARY_ASSETS}
    pair = read_transfer(transfer_dir(store)).pairs.filter(pl.col("public_dataset") == "bench").row(0, named=True)
    assert pair["n_models"] == 3 and pair["informative"] and pair["kendall_tau_b"] is not None
    assert pair["tau_b_ci_low"] <= pair["kendall_tau_b"] <= pair["tau_b_ci_high"]


def test_lee_public_against_chatterbot_own_with_two_real_models(write_configs, two_real_models, tmp_path):
    """End to end with real models: chatterbot (own) and Lee (public, through the task_sts asset)
    evaluated by the graph; the transfer ranks both and compares them."""
    datasets = {"chatterbot-ai": {"loader": "chatterbot", "categories": ["ai", "emotion"], "role": "own"},
                "lee-sts": {"loader": "gensim-lee", "task": "sts", "role": "public"}}
    folder = write_configs(models=two_real_models, datasets=datasets, protocol=quick_protocol())
    store = ArtifactStore(tmp_path / "data")
    instance = dg.DagsterInstance.ephemeral()
    # Only the own dataset first: Lee is left out of the transfer, with the reason.
    report = run_pipeline(folder, store.root, instance=instance, datasets=["chatterbot-ai"])
    assert report.failures == []
    lee = read_transfer(transfer_dir(store))
    assert lee.settings["skipped_datasets"] == {"lee-sts": "no STS results yet (the task_sts asset has not evaluated it)"}
    assert "No public × own pair" in (store.report_dir / "report.md").read_text()

    # Then Lee: task_sts evaluates it for both cards and the transfer and summaries follow.
    report = run_pipeline(folder, store.root, instance=instance)
    assert report.failures == []
    assert sorted(dataset for _, dataset in report.materialized) == ["lee-sts", "lee-sts"]
    result = read_transfer(transfer_dir(store))
    assert result.settings["skipped_datasets"] == {}
    lee_ranking = result.rankings.filter(pl.col("dataset") == "lee-sts")
    assert lee_ranking["n_items"].to_list() == [1225, 1225] and set(lee_ranking["metric"]) == {"Spearman"}
    assert (lee_ranking["score"] > 0).all()
    [pair] = result.pairs.iter_rows(named=True)
    assert (pair["public_dataset"], pair["own_dataset"], pair["n_models"]) == ("lee-sts", "chatterbot-ai", 2)
    assert not pair["informative"] and 0.0 <= pair["p_same_winner"] <= 1.0
    markdown = (store.report_dir / "report.md").read_text()
    assert "lee-sts (public, Spearman) vs chatterbot-ai (own, nDCG@10), 2 models" in markdown
    assert "No dataset in datasets.yaml carries a published score" in markdown
