"""Graph tests: real Dagster materializations of the real assets with real models."""

import json
import re
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import polars as pl
import pytest
import yaml
from graph_helpers import plan_and_automation

from embedpyramid.cli import main
from embedpyramid.config import ConfigError, load_config
from embedpyramid.data import open_frozen
from embedpyramid.encode import cached_embedding_path, read_embeddings
from embedpyramid.retrieval.metrics import parse_measure
from embedpyramid.store import ArtifactStore
from pipelines.automation import config_sensor
from pipelines.definitions import defs
from pipelines.freshness import CONFIG
from pipelines.instance import bind
from pipelines.partitions import DATASETS, MODELS, ann_asset_name, model_dataset_key
from pipelines.runner import run_pipeline
from resources import ProjectResource

DEFAULT_PROTOCOL = Path(__file__).resolve().parents[2] / "configs" / "protocol.yaml"
SPECS = ["flat", "hnsw32", "ivf-flat", "ivf-pq", "sq8", "binary", "int8", "flat-d256", "flat-d128", "flat-d64"]


def default_section(name: str) -> dict:
    return yaml.safe_load((DEFAULT_PROTOCOL.parent / f"{name}.yaml").read_text())


def test_definitions_load_with_lineage_partitions_and_automation():
    repository = defs.get_repository_def()
    graph = repository.asset_graph
    parents = {key.to_user_string(): sorted(p.to_user_string() for p in graph.get(key).parent_keys)
               for key in graph.get_all_asset_keys() if graph.get(key).is_materializable}
    assert parents == {
        "frozen_dataset": ["config/dataset_source"],
        "query_embeddings": ["config/model_card", "frozen_dataset"],
        "document_embeddings": ["config/model_card", "frozen_dataset"],
        "exact_topk": ["config/search", "document_embeddings", "query_embeddings"],
        "retrieval_metrics": ["config/conventions", "config/measures", "exact_topk", "frozen_dataset"],
        "raw_query_embeddings": ["config/model_card", "frozen_dataset", "query_embeddings"],
        "raw_document_embeddings": ["config/model_card", "document_embeddings", "frozen_dataset"],
        "norm_geometry": ["config/resampling", "frozen_dataset", "raw_document_embeddings", "raw_query_embeddings"],
        "normalization_price": ["config/conventions", "config/measures", "config/resampling", "config/search",
                                "frozen_dataset", "raw_document_embeddings", "raw_query_embeddings"],
        "comparisons": ["config/comparison", "retrieval_metrics"],
        "results_db": ["comparisons", "config/comparison", "retrieval_metrics"],
        **{ann_asset_name(spec): sorted([f"config/{ann_asset_name(spec)}", "config/ann_settings", "config/conventions",
                                         "config/resampling", "document_embeddings", "exact_topk", "frozen_dataset",
                                         "query_embeddings"])
           for spec in SPECS},
        "serving_frontier": sorted(["config/ann_settings", *(ann_asset_name(spec) for spec in SPECS)]),
        "comparison_report": ["comparisons", "config/comparison", "norm_geometry", "normalization_price", "results_db",
                              "serving_frontier"],
    }
    facets = {key.to_user_string() for key in graph.get_all_asset_keys() if graph.get(key).is_observable}
    assert facets == {f"config/{name}" for name in (
        "model_card", "dataset_source", "search", "measures", "conventions", "resampling", "comparison",
        "ann_settings", *(ann_asset_name(spec) for spec in SPECS))}
    assert {graph.get(key).group_name for key in graph.get_all_asset_keys()} == {
        CONFIG, "data", "embeddings", "l2_retrieval", "l1_geometry", "l4_serving", "summary"}
    assert {s.name for s in repository.sensor_defs} == {"config_sensor", "evaluation_automation"}
    assert {s.name for s in repository.schedule_defs} == {"nightly_refresh", "nightly_summary"}
    for key in graph.get_all_asset_keys():
        assert not graph.get(key).is_materializable or graph.get(key).code_version is not None


def test_default_graph_on_the_embedded_dataset_with_both_real_models(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    config = load_config("configs")
    report = run_pipeline("configs", tmp_path, instance=instance)
    keys = [model.key for model in config.models.values()]
    assert report.failures == []
    assert report.materialized == [(key, "chatterbot-en") for key in keys]
    minilm_key, use_key = config.models["minilm-l6"].key, config.models["use-m3"].key
    # MiniLM ships a Normalize module: its raw vectors need a second, stripped pass. USE has
    # nothing to strip: one pass stores both its raw and its card vectors.
    assert sorted(report.encoded) == sorted(
        [(minilm_key, "chatterbot-en", kind) for kind in ("document", "query", "raw_document", "raw_query")]
        + [(use_key, "chatterbot-en", kind) for kind in ("document", "query")])
    assert report.summary_built

    n_measures = len(config.protocol.measures())
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM per_query_metrics").fetchall() == [(len(keys) * 748 * n_measures,)]
        assert con.sql("SELECT count(*) FROM runs").fetchall() == [(len(keys) * 748 * 100,)]
        assert con.sql("SELECT count(*) FROM qrels").fetchall() == [(897,)]
        board = pl.from_arrow(con.sql("SELECT * FROM leaderboard").to_arrow_table())
    assert set(board["n"].to_list()) == {748}
    assert board["mean"].is_between(0, 1).all()
    for key in keys:
        means = means_of(board, key)
        for family in ("Recall", "Hit", "nDCG"):
            series = [means[f"{family}@{k}"] for k in (1, 3, 5, 10, 100)]
            assert series == sorted(series)
        assert means["Hit@1"] == pytest.approx(means["P@1"]) == pytest.approx(means["MRR@1"])

    # The stored run is the exact top-k of the stored vectors (brute force on the real data).
    store, minilm = ArtifactStore(tmp_path), config.models["minilm-l6"]
    run = pl.read_parquet(store.run_dir("chatterbot-en", minilm.key) / "exact.parquet")
    frozen = open_frozen(store.dataset_dir("chatterbot-en"))
    query_ids, queries = read_embeddings(cached_embedding_path(store, minilm, frozen, "query"))
    doc_ids, documents = read_embeddings(cached_embedding_path(store, minilm, frozen, "document"))
    top1 = np.argmax(queries @ documents.T, axis=1)
    assert run.filter(pl.col("rank") == 1)["doc_id"].to_list() == [doc_ids[i] for i in top1]

    # What the Dagster UI shows: partition metadata (headline numbers the Plots tab charts, the
    # metric table in cutoff order, the baseline marked), data versions and passing blocking checks.
    partition = model_dataset_key(minilm.name, "chatterbot-en")
    record = instance.fetch_materializations(
        dg.AssetRecordsFilter(dg.AssetKey("retrieval_metrics"), asset_partitions=[partition]), limit=1).records[0]
    metadata = record.asset_materialization.metadata
    assert metadata["evaluated_queries"].value == 748 and metadata["excluded_queries"].value == 0
    assert metadata["conventions"].value["gain"] == "linear" and metadata["baseline"].value is True
    assert metadata["nDCG@10"].value == pytest.approx(means_of(board, minilm_key)["nDCG@10"])
    assert isinstance(metadata["nDCG@10"], dg.FloatMetadataValue) and isinstance(metadata["Recall@10"], dg.FloatMetadataValue)
    rows = [row.data["metric"] for row in metadata["metrics"].value.records]
    assert [m for m in rows if m.startswith("Hit@")] == ["Hit@1", "Hit@3", "Hit@5", "Hit@10", "Hit@100"]
    assert {column.name: column.type for column in metadata["metrics"].value.schema.columns} == {
        "metric": "string", "mean": "float", "n": "int"}
    leaderboard = instance.fetch_materializations(dg.AssetKey("results_db"), limit=1).records[0]
    assert f"{minilm_key} (baseline)" in {c.name for c in leaderboard.asset_materialization.metadata["leaderboard"].value.schema.columns}
    for asset in ("query_embeddings", "document_embeddings"):
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey(asset), "vectors_valid"), limit=10)
        assert sorted((record.partition, record.status.value) for record in history) == sorted(
            (str(model_dataset_key(name, "chatterbot-en")), "SUCCEEDED") for name in config.models)
    assert sorted(instance.get_dynamic_partitions(MODELS)) == sorted(config.models)
    run = instance.get_run_records(dg.RunsFilter(tags={"embedpyramid/cli": "run"}), limit=1)[0].dagster_run
    assert run.job_name == "summary" and run.tags["embedpyramid/configs"] == str(Path("configs").resolve())
    assert run.tags["embedpyramid/command"] == "embedpyramid run"
    assert {r.dagster_run.job_name for r in instance.get_run_records()} == {"refresh_datasets", "evaluate", "summary"}

    # The comparison of the two models: every metric and slice, and the report that shows it.
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        compared = pl.from_arrow(con.sql("SELECT * FROM comparisons").to_arrow_table())
        worst = pl.from_arrow(con.sql("SELECT * FROM regressions WHERE direction = 'regression'").to_arrow_table())
    n_slices = 1 + 21 + 4  # all queries, 21 categories, 4 query-length buckets
    assert compared.height == n_measures * n_slices
    assert set(compared["model_a"]) == {config.baseline.key} and set(compared["model_b"]) == {config.models["use-m3"].key}
    overall = compared.filter((pl.col("slice_column") == "all") & (pl.col("metric") == "nDCG@10")).row(0, named=True)
    assert overall["n"] == 748 and overall["wins"] + overall["ties"] + overall["losses"] == 748
    assert overall["ci_low"] <= overall["mean_delta"] <= overall["ci_high"]
    assert overall["mean_delta"] == pytest.approx(overall["mean_b"] - overall["mean_a"])
    assert compared["holm_family"].unique().to_list() == [
        f"dataset=chatterbot-en: 1 pair × {n_measures} metrics × {n_slices} slices = {n_measures * n_slices} tests"]
    assert (compared["p_holm"] >= compared["p_value"]).all()
    assert compared.filter(pl.col("n") < 20)["small_slice"].all()
    assert worst.height == 10 and (worst["delta"] < 0).all() and worst["delta"].is_sorted()
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<svg" in html and "Worst regressions" in html and "http://" not in html and "https://" not in html
    report = instance.fetch_materializations(dg.AssetKey("comparison_report"), limit=1).records[0]
    assert report.asset_materialization.metadata["forest_plot"].value.startswith("![forest plot of nDCG@10](data:image/svg+xml;base64,")

    # L1 with the real all-MiniLM-L6-v2: raw norms differ from 1, and the two harmless
    # mistakes (normalized + euclidean, raw + cosine) leave the baseline's rankings unchanged.
    l1 = tmp_path / "geometry" / "chatterbot-en" / minilm_key
    behaviour = pl.read_parquet(l1 / "behaviour.parquet").rows_by_key("variant", named=True, unique=True)
    for harmless in ("normalized+euclidean", "raw+cosine"):
        assert behaviour[harmless]["top_overlap"] == 1.0 and behaviour[harmless]["top1_changed_share"] == 0.0
    baseline_run = pl.read_parquet(l1 / "runs" / "normalized+dot.parquet")
    assert pl.read_parquet(l1 / "runs" / "raw+cosine.parquet")["doc_id"].equals(baseline_run["doc_id"])
    assert behaviour["raw+dot"]["top1_changed_share"] > 0.1 and behaviour["raw+dot"]["pick_ratio_q1"] > 1.0
    price = pl.read_parquet(l1 / "price.parquet").filter(pl.col("variant") == "raw+cosine")
    assert (price["delta"] == 0).all() and (price["ci_low"] == 0).all() and (price["ci_high"] == 0).all()
    norms = pl.read_parquet(l1 / "document_norms.parquet")["norm"]
    assert (norms - 1).abs().min() > 0.05
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key([
        dg.AssetCheckKey(dg.AssetKey("normalization_price"), "euclidean_expansion_exact"),
        dg.AssetCheckKey(dg.AssetKey("raw_document_embeddings"), "direction_preserved"),
    ])
    assert len(checks) == 2 and all(e.status.value == "SUCCEEDED" for e in checks.values())
    geometry = instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey("norm_geometry"), asset_partitions=[model_dataset_key("use-m3", "chatterbot-en")]), limit=1).records[0]
    assert geometry.asset_materialization.metadata["normalize_layer_stripped"].value is False
    assert "## L1 geometry and the price of normalization mistakes: " + minilm_key in (tmp_path / "report" / "report.md").read_text()

    # L4 on the real vectors: Flat reproduces exact search; HNSW recall rises with efSearch.
    serving = pl.read_parquet(tmp_path / "serving" / "chatterbot-en" / minilm_key / "summary.parquet")
    flat = serving.filter(pl.col("spec") == "flat").row(0, named=True)
    assert (flat["ann_recall"], flat["delta"], flat["delta_ci_low"], flat["delta_ci_high"]) == (1.0, 0.0, 0.0, 0.0)
    assert flat["ann_value"] == flat["exact_value"] == pytest.approx(means_of(board, minilm_key)["nDCG@10"])
    runs = sorted(p.name for p in (tmp_path / "serving" / "chatterbot-en" / minilm_key / "hnsw32" / "runs").iterdir())
    assert runs == [f"efSearch-{value}.parquet" for value in (128, 16, 256, 32, 64)]
    hnsw = serving.filter(pl.col("spec") == "hnsw32").sort("sweep_value")
    assert hnsw["sweep_value"].to_list() == [16, 32, 64, 128, 256]
    assert hnsw["ann_recall"].is_sorted() and hnsw["ann_recall"][-1] >= 0.99
    assert set(serving["spec"]) == set(SPECS)
    assert (serving["qps"] > 0).all() and (serving["p95_ms"] >= serving["p50_ms"]).all() and (serving["index_bytes"] > 0).all()
    flat_per_query = pl.read_parquet(tmp_path / "serving" / "chatterbot-en" / minilm_key / "flat" / "per_query.parquet")
    exact_per_query = pl.read_parquet(store.metrics_path("chatterbot-en", minilm_key, "exact"))
    joined = flat_per_query.filter(pl.col("metric") == "nDCG@10").join(
        exact_per_query.filter(pl.col("metric") == "nDCG@10"), on="query_id")
    assert joined.height == 748 and (joined["value"] == joined["value_right"]).all()
    assert "## L4 serving approximation: " + minilm_key in (tmp_path / "report" / "report.md").read_text()


def means_of(board: pl.DataFrame, model_key: str) -> dict[str, float]:
    return dict(board.filter(pl.col("model") == model_key).select("metric", "mean").iter_rows())


def small_run(write_configs, small_chatterbot, models, instance, data, folder, changes=None, **sections):
    """Bring ``folder``'s config up to date through the CLI's runner, after checking that the
    automation would request exactly the partitions the runner is about to materialize (from
    the second run on; before, the automation freezes the datasets first); afterwards both
    agree that nothing is left. ``changes``: the config facets the edit should change."""
    folder_path = write_configs(folder, models=models, datasets=small_chatterbot, **sections)
    planned, requested, observed = plan_and_automation(folder_path, data, instance)
    if changes is not None:
        assert observed == changes
    if instance.get_run_records(limit=1):
        assert requested == planned
    else:
        assert requested == {("frozen_dataset", "chatterbot-small")} and len(planned) > len(requested)
    report = run_pipeline(folder_path, data, instance=instance)
    assert plan_and_automation(folder_path, data, instance) == (set(), set(), [])
    return report


def test_only_what_a_change_touches_is_recomputed(write_configs, default_models, small_chatterbot, tmp_path):
    """Each edit of the config recomputes what depends on it, nothing else — as the CLI runs it
    and as the automation requests it (checked against each other at every step)."""
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    minilm = default_models["minilm-l6"]
    first = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1")
    use_key = load_config(tmp_path / "c1").models["use-m3"].key
    assert first.failures == [] and len(first.materialized) == 2 and len(first.encoded) == 6

    again = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1", changes=[])
    assert (again.materialized, again.encoded, again.frozen, len(again.skipped)) == ([], [], [], 2)
    assert not again.summary_built

    batch = {**default_models, "minilm-l6": {**minilm, "run": {**minilm["run"], "batch_size": 5}}}
    rerun = small_run(write_configs, small_chatterbot, batch, instance, data, "c2", changes=[])
    assert (rerun.materialized, rerun.encoded) == ([], [])

    for field, value in (("query_prompt", "query: "), ("normalize", False), ("dimension", 128)):
        changed = {**default_models, "minilm-l6": {**minilm, field: value}}
        report = small_run(write_configs, small_chatterbot, changed, instance, data, f"c-{field}",
                           changes=["config/model_card [minilm-l6]", "config/comparison"])
        new_key = load_config(tmp_path / f"c-{field}").models["minilm-l6"].key
        assert report.materialized == [(new_key, "chatterbot-small")], field
        assert sorted(report.encoded) == [(new_key, "chatterbot-small", kind)
                                          for kind in ("document", "query", "raw_document", "raw_query")]
        assert (use_key, "chatterbot-small") in report.skipped

    # Back to the original card: its vectors are still cached, so nothing is encoded again.
    restored = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1")
    assert restored.encoded == [] and restored.skipped == [(use_key, "chatterbot-small")]

    added = {**default_models, "minilm-l6-64": {**minilm, "dimension": 64}}
    report = small_run(write_configs, small_chatterbot, added, instance, data, "c-added")
    new_key = load_config(tmp_path / "c-added").models["minilm-l6-64"].key
    assert report.materialized == [(new_key, "chatterbot-small")] and len(report.skipped) == 2
    assert report.summary_built
    assert set(pl.read_parquet(data / "comparisons" / "comparisons.parquet")["model_b"]) == {use_key, new_key}
    assert set(instance.get_dynamic_partitions(MODELS)) == set(added)
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        assert {row[0] for row in con.sql("SELECT DISTINCT model FROM leaderboard").fetchall()} == \
            {m.key for m in load_config(tmp_path / "c-added").models.values()}

    protocol = {**default_section("protocol"), "comparison": {**default_section("protocol")["comparison"], "seed": 7}}
    reseeded = small_run(write_configs, small_chatterbot, default_models, instance, data, "c-seed", protocol=protocol)
    # The comparison seed also seeds the L1 price intervals: L1 and the summary move, nothing else.
    assert (reseeded.encoded, reseeded.skipped, reseeded.summary_built) == ([], [], True)
    keys = [load_config(tmp_path / "c-seed").models[m].key for m in default_models]
    assert sorted(reseeded.assets) == sorted((key, "chatterbot-small", asset) for key in keys
                                             for asset in ("norm_geometry", "normalization_price"))
    assert pl.read_parquet(data / "comparisons" / "comparisons.parquet")["seed"].unique().to_list() == [7]

    protocol = {**protocol, "k_values": [1, 3, 5, 10, 20, 100]}
    deeper = small_run(write_configs, small_chatterbot, default_models, instance, data, "c-k", protocol=protocol)
    # A new cutoff changes the metrics (L2) and the price table (L1) of every model; the
    # retrieval run, the embeddings and the geometry stay.
    assert sorted(deeper.assets) == sorted((key, "chatterbot-small", asset) for key in keys
                                           for asset in ("retrieval_metrics", "normalization_price"))

    # Forcing a re-materialization of a cached partition still encodes nothing.
    forced = dg.materialize(
        list(defs.assets), selection=["query_embeddings"], instance=instance,
        partition_key=model_dataset_key("use-m3", "chatterbot-small"),
        resources={"project": ProjectResource(configs_dir=str(tmp_path / "c1"), data_dir=str(data)),
                   "encoders": defs.resources["encoders"]},
    )
    materialization = forced.asset_materializations_for_node("query_embeddings")[0]
    assert materialization.metadata["cache_hit"].value is True


def toy(entry_point: str) -> dict:
    return {"backend": "entry-point", "entry_point": entry_point, "options": {"dim": 48}}


def test_a_blocking_check_stops_metrics_and_spares_other_models(write_configs, small_chatterbot, tmp_path):
    folder = write_configs(models={"ngrams": toy("toy_encoders:CharacterNgrams"), "broken": toy("toy_encoders:BrokenEncoder")},
                           datasets=small_chatterbot)
    config, store = load_config(folder), ArtifactStore(tmp_path / "data")
    report = run_pipeline(folder, store.root, instance=dg.DagsterInstance.ephemeral())
    broken, good = config.models["broken"].key, config.models["ngrams"].key
    assert report.materialized == [(good, "chatterbot-small")]
    assert len(report.failures) == 1
    assert report.failures[0].startswith(f"{broken} × chatterbot-small: blocking check vectors_valid on ")
    assert "query_embeddings failed: " in report.failures[0] and "vectors contain NaN or inf" in report.failures[0]
    assert not store.metrics_path("chatterbot-small", broken, "exact").exists()
    assert not (store.run_dir("chatterbot-small", broken) / "exact.parquet").exists()
    with duckdb.connect(str(store.results_db), read_only=True) as con:
        assert con.sql("SELECT DISTINCT model FROM leaderboard").fetchall() == [(good,)]


def test_bad_dataset_fails_alone_and_names_the_line(write_configs, small_chatterbot, tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "Dogs bark."}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "dogs"}\n')
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\nq1\td2\t1\n")
    folder = write_configs(models={"ngrams": toy("toy_encoders:CharacterNgrams")},
                           datasets={**small_chatterbot, "bad": {"loader": "beir", "path": str(beir)}})
    instance = dg.DagsterInstance.ephemeral()
    report = run_pipeline(folder, tmp_path / "data", instance=instance, datasets=["chatterbot-small"])
    assert report.failures == []
    before = (tmp_path / "data" / "results.duckdb").read_bytes()
    report = run_pipeline(folder, tmp_path / "data", instance=instance)
    assert len(report.failures) == 1
    assert re.fullmatch(r"frozen_dataset\[bad\]: embedpyramid\.data\.frozen\.DataError: .*test\.tsv:2: document id 'd2' is not in corpus\.jsonl; "
                        r"fix the id or add the document", report.failures[0])
    assert len(report.skipped) == 1 and report.materialized == [] and not report.summary_built
    assert (tmp_path / "data" / "results.duckdb").read_bytes() == before
    assert not (tmp_path / "data" / "datasets" / "bad").exists()


def test_sensor_registers_cards_reports_config_and_drops_only_what_its_folder_removed(write_configs, default_models):
    instance = dg.DagsterInstance.ephemeral()
    folder = write_configs(models=default_models)
    instance.add_dynamic_partitions(MODELS, ["retired"])

    def tick(configs):
        return config_sensor(dg.build_sensor_context(instance=instance, resources={
            "project": ProjectResource(configs_dir=str(configs), data_dir="unused")}))

    result = tick(folder)
    requests = {(type(r).__name__, r.partitions_def_name): sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
    assert requests == {
        ("AddDynamicPartitionsRequest", MODELS): ["minilm-l6", "use-m3"],
        ("DeleteDynamicPartitionsRequest", MODELS): ["retired"],
        ("AddDynamicPartitionsRequest", DATASETS): ["chatterbot-en"],
    }
    observed = {(event.asset_key.to_user_string(), event.partition) for event in result.asset_events}
    assert ("config/model_card", "minilm-l6") in observed and ("config/search", None) in observed
    check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(["config", "folder"]), "loads"))
    assert check.event.asset_check_evaluation.passed

    # Bound to another folder (the last CLI command's): this location neither deletes nor reports.
    bind(instance, write_configs("other", models={"minilm-l6": default_models["minilm-l6"]}), Path("data"))
    other = tick(folder)
    assert not other.dynamic_partitions_requests and "the instance follows" in other.skip_reason.skip_message

    # A broken card: the tick fails with the file and key, and the folder's check fails too.
    broken = write_configs("other", models={"minilm-l6": {**default_models["minilm-l6"], "pooling": "sideways"}})
    with pytest.raises(ConfigError, match=r"(?s)models\.yaml.*models\.minilm-l6\.pooling"):
        tick(broken)
    check = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(["config", "folder"]), "loads"))
    assert not check.event.asset_check_evaluation.passed
    assert "models.minilm-l6.pooling" in check.event.asset_check_evaluation.metadata["error"].value


def test_cli_run_status_backfill_and_leaderboard(write_configs, small_chatterbot, tmp_path, capsys):
    folder = write_configs(models={"ngrams": toy("toy_encoders:CharacterNgrams")}, datasets=small_chatterbot)
    data = tmp_path / "data"
    assert main(["run", "--configs", str(folder), "--data", str(data)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("dataset: chatterbot-small") and "nDCG@10" in table
    assert main(["leaderboard", "--data", str(data), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {parse_measure(row["metric"]).name for row in rows} == {"Recall", "Hit", "MRR", "MAP", "nDCG", "P", "RPrec"}
    assert main(["run", "--configs", str(folder), "--data", str(data), "--models", "nope"]) == 2
    assert "unknown models ['nope']" in capsys.readouterr().err

    # A new card: status shows it missing; backfill by its key evaluates it and the summaries only.
    second = write_configs(models={"ngrams": toy("toy_encoders:CharacterNgrams"),
                                   "ngrams-24": {**toy("toy_encoders:CharacterNgrams"), "options": {"dim": 24}}},
                           datasets=small_chatterbot)
    new_key = load_config(second).models["ngrams-24"].key
    assert main(["status", "--configs", str(second), "--data", str(data), "--format", "json"]) == 0
    status = {(row["model"], row["level"]): (row["state"], row["why"]) for row in json.loads(capsys.readouterr().out)}
    assert status[(new_key, "l2_retrieval")][0] == "missing"
    assert status[(load_config(second).models["ngrams"].key, "l2_retrieval")] == ("fresh", "")
    assert status[(None, "summary")][0] == "stale" and "config/comparison has a new data version" in status[(None, "summary")][1]
    assert main(["backfill", "--model", new_key, "--configs", str(second), "--data", str(data)]) == 0
    capsys.readouterr()
    assert main(["status", "--configs", str(second), "--data", str(data)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["dataset", "model", "level", "state", "why"]
    assert all(line.split()[3] == "fresh" for line in lines[1:])
    assert main(["run", "--configs", str(second), "--data", str(data), "--models", "ngrams-24,ngrams"]) == 0
    assert "up to date" in capsys.readouterr().err


def small_ann(**indexes) -> dict:
    settings = {**default_section("ann")["settings"], "latency_queries": 20, "timing_repeats": 1}
    return {"settings": settings, "indexes": indexes}


def test_a_dimension_cut_changes_the_l4_assets_only(write_configs, default_models, small_chatterbot, tmp_path):
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    models = {"minilm-l6": default_models["minilm-l6"]}
    ann = small_ann(flat={"factory": "Flat"}, cut={"factory": "Flat", "dimension": 128})
    first = small_run(write_configs, small_chatterbot, models, instance, data, "a", ann=ann)
    key = load_config(tmp_path / "a").models["minilm-l6"].key
    assert first.failures == [] and {"ann_flat", "ann_cut", "serving_frontier"} <= {asset for _, _, asset in first.assets}

    cut64 = small_ann(flat={"factory": "Flat"}, cut={"factory": "Flat", "dimension": 64})
    second = small_run(write_configs, small_chatterbot, models, instance, data, "b", ann=cut64,
                       changes=["config/ann_cut"])
    assert second.failures == [] and second.encoded == []
    assert sorted(second.assets) == [(key, "chatterbot-small", "ann_cut"), (key, "chatterbot-small", "serving_frontier")]
    assert second.summary_built
    summary = pl.read_parquet(data / "serving" / "chatterbot-small" / key / "summary.parquet")
    cut = summary.filter(pl.col("spec") == "cut").row(0, named=True)
    assert cut["dimension"] == 64 and cut["ann_recall"] < 1.0 and cut["bytes_per_vector"] < 0.2 * summary.filter(
        pl.col("spec") == "flat")["bytes_per_vector"][0]
    assert len(list((data / "indexes").glob("cut-*.index"))) == 2


def test_an_l2_index_for_a_cosine_model_is_refused(write_configs, default_models, small_chatterbot, tmp_path):
    models = {"minilm-l6": default_models["minilm-l6"]}
    folder = write_configs(models=models, datasets=small_chatterbot, ann=small_ann(euclid={"factory": "Flat", "metric": "l2"}))
    report = run_pipeline(folder, tmp_path / "data", instance=dg.DagsterInstance.ephemeral())
    assert len(report.failures) == 1
    assert "metric 'l2', but the model card normalizes its vectors (cosine scores)" in report.failures[0]
    assert "set metric: inner_product on the spec" in report.failures[0]
    assert not (tmp_path / "data" / "indexes").exists()
