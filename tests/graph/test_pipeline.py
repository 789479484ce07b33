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
from readme import commands_of
from report_browser import CHROMIUM, report_height

from embedpyramid.cli import main
from embedpyramid.config import ConfigError, load_config, parse_measure
from embedpyramid.data import open_frozen
from embedpyramid.encode import cached_embedding_path, read_embeddings
from embedpyramid.retrieval.level import read_metrics_manifest
from embedpyramid.store import ArtifactStore
from graphbase.facets import CONFIG
from graphbase.instance import bind, open_instance
from graphbase.partitions import (
    DATASETS,
    MODELS,
    PAIR_FAMILIES,
    TASK_FAMILIES,
    ann_asset_name,
    card_partition_mapping,
    model_dataset_key,
    system_asset_name,
    task_datasets_name,
)
from graphbase.warm import UP_TO_DATE_LINE
from pipelines.automation import automation_sensors
from pipelines.definitions import defs
from pipelines.runner import run_pipeline
from resources import ProjectResource, ShardWorkspace

DEFAULT_PROTOCOL = Path(__file__).resolve().parents[2] / "configs" / "protocol.yaml"
RETRIEVAL = "metric NOT LIKE '%:%'"  # the retrieval measures, not L6's judge:/answer:/context: metrics
SPECS = ["flat", "hnsw32", "ivf-flat", "ivf-pq", "sq8", "binary", "int8", "flat-d256", "flat-d128", "flat-d64"]
SYSTEMS = ["bm25", "rrf", "weighted-minmax", "weighted-zscore", "rerank-by-use-m3", "rerank-by-minilm-l6",
           "hnsw-rerank-by-use-m3"]


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
        "retrieval_metrics": ["config/conventions", "config/measures", "config/references", "exact_topk", "frozen_dataset"],
        "raw_query_embeddings": ["config/model_card", "frozen_dataset", "query_embeddings"],
        "raw_document_embeddings": ["config/model_card", "document_embeddings", "frozen_dataset"],
        "norm_geometry": ["config/resampling", "frozen_dataset", "raw_document_embeddings", "raw_query_embeddings"],
        "normalization_price": ["config/conventions", "config/measures", "config/resampling", "config/search",
                                "frozen_dataset", "raw_document_embeddings", "raw_query_embeddings"],
        "efficiency": ["config/resampling", "config/run_settings", "document_embeddings", "exact_topk",
                       "query_embeddings"],
        "comparisons": sorted(["config/comparison", "downstream_answers", "retrieval_metrics",
                               *(system_asset_name(s) for s in SYSTEMS)]),
        **{system_asset_name(name): sorted([f"config/{system_asset_name(name)}", "config/systems_settings",
                                            "config/conventions", "config/measures", "frozen_dataset", *inputs])
           for name, inputs in {
               "bm25": [], "rrf": ["system_bm25", "exact_topk"], "weighted-minmax": ["system_bm25", "exact_topk"],
               "weighted-zscore": ["system_bm25", "exact_topk"],
               "rerank-by-use-m3": ["exact_topk", "query_embeddings", "document_embeddings"],
               "rerank-by-minilm-l6": ["exact_topk", "query_embeddings", "document_embeddings"],
               "hnsw-rerank-by-use-m3": ["ann_hnsw32", "query_embeddings", "document_embeddings"]}.items()},
        "results_db": sorted(["benchmark_transfer", "comparisons", "config/comparison", "efficiency", "grade_analysis",
                              "retrieval_metrics", "task_comparisons"]),
        "benchmark_transfer": ["config/comparison", "config/resampling", "config/transfer", "retrieval_metrics",
                               "task_sts"],
        "pair_sanity": ["config/conventions", "config/resampling", "document_embeddings", "frozen_dataset",
                        "query_embeddings"],
        **{f"frozen_{f}_dataset": [f"config/{f}_datasets"] for f in TASK_FAMILIES},
        **{f"{f}_embeddings": sorted([f"config/{f}_datasets", "config/model_card", f"frozen_{f}_dataset"])
           for f in TASK_FAMILIES},
        **{f"task_{f}": sorted([f"config/{f}_datasets", "config/model_card", f"frozen_{f}_dataset", f"{f}_embeddings"])
           for f in TASK_FAMILIES},
        **{f"pair_sanity_{f}": sorted(["config/resampling", f"frozen_{f}_dataset", f"{f}_embeddings"]) for f in PAIR_FAMILIES},
        "task_comparisons": sorted(["config/task_comparison", "pair_sanity", *(f"task_{f}" for f in TASK_FAMILIES),
                                    *(f"pair_sanity_{f}" for f in PAIR_FAMILIES)]),
        **{ann_asset_name(spec): sorted([f"config/{ann_asset_name(spec)}", "config/ann_settings", "config/conventions",
                                         "config/resampling", "document_embeddings", "exact_topk", "frozen_dataset",
                                         "query_embeddings"])
           for spec in SPECS},
        "serving_frontier": sorted(["config/ann_settings", *(ann_asset_name(spec) for spec in SPECS)]),
        "comparison_report": sorted(["benchmark_transfer", "comparisons", "config/comparison", "grade_analysis",
                                     "norm_geometry", "normalization_price", "results_db", "serving_frontier",
                                     "task_comparisons"]),
        "downstream_answers": ["config/conventions", "config/judge", "exact_topk", "frozen_dataset"],
        "grade_analysis": ["config/comparison", "config/judge", "downstream_answers"],
    }
    # A bi-encoder rerank reads its by card's embeddings in that card's partition (the lineage
    # shows query/document_embeddings [by × dataset] → the rerank [card × dataset]); an ann:
    # first stage reaches the card's own embeddings through the index asset.
    for name, by in (("rerank-by-use-m3", "use-m3"), ("rerank-by-minilm-l6", "minilm-l6"),
                     ("hnsw-rerank-by-use-m3", "use-m3")):
        mappings = graph.get(dg.AssetKey(system_asset_name(name))).partition_mappings
        assert {key.to_user_string(): mapping for key, mapping in mappings.items()} == {
            kind: card_partition_mapping(by) for kind in ("query_embeddings", "document_embeddings")}
    facets = {key.to_user_string() for key in graph.get_all_asset_keys() if graph.get(key).is_observable}
    assert facets == {f"config/{name}" for name in (
        "model_card", "run_settings", "dataset_source", "search", "measures", "conventions", "resampling", "comparison",
        "references", "transfer", "ann_settings", *(ann_asset_name(spec) for spec in SPECS), "judge",
        *(f"{f}_datasets" for f in TASK_FAMILIES), "task_comparison", "systems_settings",
        *(system_asset_name(name) for name in SYSTEMS))}
    assert {graph.get(key).group_name for key in graph.get_all_asset_keys()} == {
        CONFIG, "data", "embeddings", "l2_retrieval", "l1_geometry", "l4_serving", "efficiency", "summary", "l2_tasks",
        "l3_transfer", "l5_systems", "l6_downstream"}
    assert {s.name for s in repository.sensor_defs} == {"config_sensor", "evaluation_automation"}
    assert {s.name for s in repository.schedule_defs} == {
        "nightly_refresh", "nightly_summary", "freshness_reconcile",
        *(f"nightly_refresh_{family}" for family in TASK_FAMILIES)}
    for key in graph.get_all_asset_keys():
        assert not graph.get(key).is_materializable or graph.get(key).code_version is not None


@pytest.mark.heavy
def test_default_graph_on_the_embedded_dataset_with_three_real_models(tmp_path, capsys):
    # The README's quick start: `embedpyramid run` with the default configs (here in-process,
    # into a fresh data folder), then its `embedpyramid query` examples on what it wrote.
    assert commands_of("embedpyramid")[0] == ["run"]
    config = load_config("configs")
    progress: list[str] = []
    report = run_pipeline("configs", tmp_path, log=progress.append)  # the instance under the data folder, as run's
    instance = open_instance(tmp_path)
    keys = [model.key for model in config.models.values()]
    assert report.failures == []
    # Retrieval first, then the L2 task datasets on their own partitions.
    assert report.materialized == [(key, dataset) for dataset in ["chatterbot-en", *config.task_datasets]
                                   for key in keys]
    minilm_key, use_key = config.models["minilm-l6"].key, config.models["use-m3"].key
    d256_key = config.models["minilm-l6-d256"].key
    # One forward pass per text: the card's table is derived from the raw one (MiniLM's
    # Normalize module is stripped for the pass), so the raw assets encode nothing more, and the
    # 256-dimension cut of MiniLM derives its tables from MiniLM's pass, encoding nothing. Every
    # table is written by its own card's embedding assets: the reranks by USE and by MiniLM (L5)
    # read the other card's, which the runner materialized first in that card's partition.
    assert sorted(report.encoded) == sorted((key, "chatterbot-en", kind) for key in (minilm_key, use_key)
                                            for kind in ("document", "query"))
    assert sorted(report.derived) == [(d256_key, "chatterbot-en", kind) for kind in ("document", "query")]
    assert sorted(report.read_across) == sorted([(minilm_key, "chatterbot-en"), (use_key, "chatterbot-en")])
    assert report.summary_built
    queries = [args for args in commands_of("embedpyramid") if args[0] == "query"]
    assert len(queries) == 2
    capsys.readouterr()
    for args in queries:
        assert main([*args, "--data", str(tmp_path)]) == 0
        shown = capsys.readouterr().out
        assert all(key in shown for key in keys), (args, shown)

    n_measures = len(config.protocol.measures())
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        # Exact search's retrieval measures here; L6's judge:/answer:/context: metrics are in
        # tests/graph/test_downstream.py, the systems' rows below.
        exact = f"WHERE system = 'exact' AND {RETRIEVAL}"
        assert con.sql(f"SELECT count(*) FROM per_query_metrics {exact}").fetchall() == [(len(keys) * 748 * n_measures,)]
        assert con.sql("SELECT count(*) FROM runs WHERE system = 'exact'").fetchall() == [(len(keys) * 748 * 100,)]
        assert con.sql("SELECT count(*) FROM qrels").fetchall() == [(897,)]
        board = pl.from_arrow(con.sql(f"SELECT * FROM leaderboard {exact}").to_arrow_table())
        judged = con.sql("SELECT DISTINCT model FROM per_query_metrics WHERE metric = 'judge:relevance'").fetchall()
        # L5 (configs/systems.yaml): every system against each model it applies to.
        systems = con.sql("SELECT DISTINCT system_b FROM system_verdicts WHERE family = 'confirmatory'").fetchall()
        assert {name for (name,) in systems} == set(config.systems.systems)
        floor = dict(con.sql("SELECT metric, mean FROM random_floor").fetchall())
    assert {model for (model,) in judged} == set(keys)
    assert set(board["n"].to_list()) == {748}
    assert board["mean"].is_between(0, 1).all()
    for key in keys:
        means = means_of(board, key)
        for family in ("Recall", "Hit", "nDCG", "CompleteEvidence"):
            series = [means[f"{family}@{k}"] for k in (1, 3, 5, 10, 100)]
            assert series == sorted(series)
        assert means["Hit@1"] == pytest.approx(means["P@1"]) == pytest.approx(means["MRR@1"])
        assert all(means[metric] > floor[metric] for metric in ("nDCG@10", "Recall@100", "MRR"))
    # Every chatterbot qrel is relevant: P@k under a random ranking is R / N averaged.
    assert floor["P@10"] == pytest.approx(floor["P@1"]) and 0 < floor["nDCG@10"] < 0.01

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
    assert metadata["conventions"].value["ties"] == "expected" and metadata["baseline"].value is True
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
    assert {r.dagster_run.job_name for r in instance.get_run_records()} == {
        "refresh_datasets", "evaluate_dataset", "evaluate", "summary",
        *(f"{stage}_{family}" for stage in ("freeze", "evaluate") for family in TASK_FAMILIES
          if config.family_datasets(family))}

    # The comparisons of the two other models with the baseline: every tested metric and slice
    # in two families, and the report that shows them.
    aliases = read_metrics_manifest(store.metrics_path("chatterbot-en", minilm.key, "exact"))["aliases"]
    assert aliases["P@1"] == "Hit@1" and aliases["MAP@1"] == "Recall@1" and aliases["Judged@10"] == "P@10"
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        compared = pl.from_arrow(con.sql(f"SELECT * FROM comparisons WHERE system = 'exact' AND {RETRIEVAL}")
                                 .to_arrow_table())
        worst = pl.from_arrow(con.sql("SELECT * FROM regressions WHERE direction = 'regression'").to_arrow_table())
        hsd = pl.from_arrow(con.sql("SELECT * FROM hsd ORDER BY mean DESC").to_arrow_table())
        hsd_pairs = pl.from_arrow(con.sql("SELECT * FROM hsd_pairs").to_arrow_table())
    # all queries, 21 categories, 4 query-length buckets, and truncated yes/no: 3 queries have an
    # answer of 256 tokens or more, MiniLM's limit.
    n_slices = 1 + 21 + 4 + 2
    n_tested = n_measures - len(aliases)
    assert compared.height == 2 * n_tested * n_slices
    assert set(compared.filter(pl.col("slice_value") == "yes")["n"]) == {3}
    assert set(compared["model_a"]) == {config.baseline.key} and set(compared["model_b"]) == {use_key, d256_key}
    assert "P@1" not in set(compared["metric"]) and compared.filter(
        pl.col("metric") == "Hit@1")["aliases"][0].to_list() >= ["P@1", "nDCG@1"]
    overall = compared.filter((pl.col("slice_column") == "all") & (pl.col("metric") == "nDCG@10")
                              & (pl.col("model_b") == use_key)).row(0, named=True)
    assert overall["n"] == 748 and overall["wins"] + overall["ties"] + overall["losses"] == 748
    assert overall["ci_low"] <= overall["mean_delta"] <= overall["ci_high"]
    assert overall["mean_delta"] == pytest.approx(overall["mean_b"] - overall["mean_a"])
    assert (overall["family"], overall["adjustment"], overall["family_size"]) == ("confirmatory", "holm", 2)
    assert overall["decision"] == "worse" and overall["d_z"] < 0 and overall["t_p_value"] < 1e-4
    exploratory = compared.filter(pl.col("family") == "exploratory")
    assert set(exploratory["adjustment"]) == {"bh"} and set(exploratory["family_size"]) == {compared.height - 2}
    assert (compared["p_adjusted"] >= compared["p_value"]).all()
    assert compared.filter(pl.col("n") < 20)["small_slice"].all()
    assert (compared["ci_low_mc_error"] >= 0).all() and (compared["p_value_mc_error"] >= 0).all()
    assert worst.height == 20 and (worst["delta"] < 0).all()
    assert (worst["n_tied"] >= 1).all() and (worst["n_direction"] >= worst["rank"]).all()
    # The Tukey HSD of the three models: groups, rank intervals, simultaneous intervals.
    assert hsd.height == 3 and set(hsd["model"]) == set(keys) and hsd["letters"].str.len_chars().min() >= 1
    assert hsd["model"][-1] == use_key and hsd["rank_high"][-1] == 3
    assert hsd_pairs.height == 3 and (hsd_pairs["ci_low"] <= hsd_pairs["mean_delta"]).all()
    html = (tmp_path / "report" / "report.html").read_text()
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "<svg" in html and "Worst regressions" in html and "http://" not in html and "https://" not in html
    assert markdown.index("## Verdict") < markdown.index("## Contents") < markdown.index("## Leaderboard")
    assert "## Model groups: nDCG@10 (Tukey HSD)" in markdown and "## Run environment" in markdown
    for row in hsd.iter_rows(named=True):
        assert f"| chatterbot-en | {row['model']} | 748 | {row['mean']:.4f} |" in markdown
    report_record = instance.fetch_materializations(dg.AssetKey("comparison_report"), limit=1).records[0]
    report_metadata = report_record.asset_materialization.metadata
    assert report_metadata["forest_plot"].value.startswith("![forest plot of nDCG@10](data:image/svg+xml;base64,")
    assert report_metadata["verdict"].value.startswith("chatterbot-en · nDCG@10 over 748 queries: ")

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
    hnsw_runs = tmp_path / "serving" / "chatterbot-en" / minilm_key / "hnsw32" / "runs"
    assert config.ann.settings.seeds == 2  # configs/full builds 3
    assert sorted(p.name for p in hnsw_runs.iterdir()) == ["seed-42", "seed-43"]
    assert sorted(p.name for p in (hnsw_runs / "seed-43").iterdir()) == [
        f"efSearch-{value}.parquet" for value in (128, 16, 256, 32, 64)]
    hnsw = serving.filter(pl.col("spec") == "hnsw32").sort("sweep_value")
    assert hnsw["sweep_value"].to_list() == [16, 32, 64, 128, 256] and set(hnsw["seeds"]) == {"42,43"}
    assert hnsw["ann_recall"].is_sorted() and hnsw["ann_recall"][-1] >= 0.99
    assert (hnsw["ann_recall_sd"] >= 0).all() and flat["n_seeds"] == 1 and flat["ann_recall_sd"] is None
    # FAISS's small-training-set warning is one finding of the spec, not 32 printed lines.
    ivf_pq = serving.filter(pl.col("spec") == "ivf-pq")
    assert set(ivf_pq["training_finding"]) == {"IVF22,PQ32 trained on 870 vectors; FAISS recommends ≥ 9,984 "
                                                "(256 centroids per PQ sub-quantizer × 39)"}
    assert set(serving["index_metric"]) == {"inner_product"} and set(serving["reference_metric"]) == {"inner_product"}
    assert set(serving["spec"]) == set(SPECS)
    assert (serving["qps"] > 0).all() and (serving["p95_ms"] >= serving["p50_ms"]).all() and (serving["index_bytes"] > 0).all()
    flat_per_query = pl.read_parquet(tmp_path / "serving" / "chatterbot-en" / minilm_key / "flat" / "per_query.parquet")
    exact_per_query = pl.read_parquet(store.metrics_path("chatterbot-en", minilm_key, "exact"))
    joined = flat_per_query.filter(pl.col("metric") == "nDCG@10").join(
        exact_per_query.filter(pl.col("metric") == "nDCG@10"), on="query_id")
    assert joined.height == 748 and (joined["value"] == joined["value_right"]).all()
    assert "## L4 serving approximation: " + minilm_key in (tmp_path / "report" / "report.md").read_text()

    # The answer fits one screen: a warm `run` prints the headline table, the task datasets and one
    # verdict per dataset; a cold one prints its progress lines before the same answer.
    capsys.readouterr()
    assert main(["run", "--data", str(tmp_path)]) == 0
    warm = capsys.readouterr()
    answer = warm.out.splitlines()
    assert warm.err.splitlines() == [UP_TO_DATE_LINE]
    assert len(answer) + 1 <= 40 and len(progress) + len(answer) <= 40, (progress, answer)
    verdicts = answer[answer.index("verdict (one line per dataset; the report has every system and metric):") + 1:]
    assert [line.split(" · ")[0].split("] ")[-1].strip() for line in verdicts[:len(config.datasets)]] == list(
        config.datasets)
    assert "accuracy over 30 pairs" in warm.out and "accuracy over 745 texts" in warm.out  # units named for what they are

    # The report's first screen ranks the models; everything else is folded: at 1,400 px it is not
    # taller than 10,000 px (Chromium, which CI installs).
    if CHROMIUM is not None:
        height = report_height(tmp_path / "report" / "report.html", 1400, tmp_path / "report-first-screen.png")
        assert height <= 10_000, f"the default report is {height} px tall at 1,400 px"
    assert " queries" not in "\n".join(line for line in verdicts if line.lstrip().startswith("["))


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


def l1_steps(instance: dg.DagsterInstance, limit: int | None = None) -> list[str]:
    """The L1 step keys of the latest ``limit`` evaluate runs (of all of them by default)."""
    records = instance.get_run_records(dg.RunsFilter(job_name="evaluate"), limit=limit)
    return [step.step_key for record in records for step in instance.get_run_step_stats(record.dagster_run.run_id)
            if step.step_key in ("l1_geometry", "norm_geometry", "normalization_price", "pair_sanity")]


@pytest.mark.heavy
def test_only_what_a_change_touches_is_recomputed(write_configs, default_models, small_chatterbot, tmp_path):
    """Each edit of the config recomputes what depends on it, nothing else — as the CLI runs it
    and as the automation requests it (checked against each other at every step)."""
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    minilm = default_models["minilm-l6"]
    default_models = {name: default_models[name] for name in ("minilm-l6", "use-m3")}
    first = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1")
    use_key = load_config(tmp_path / "c1").models["use-m3"].key
    assert first.failures == [] and len(first.materialized) == 2 and len(first.encoded) == 4
    # L1 of a partition is one step that computes its three assets.
    assert l1_steps(instance) == ["l1_geometry"] * 2

    again = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1", changes=[])
    assert (again.materialized, again.encoded, again.frozen, len(again.skipped)) == ([], [], [], 2)
    assert not again.summary_built

    batch = {**default_models, "minilm-l6": {**minilm, "run": {**minilm["run"], "batch_size": 5}}}
    rerun = small_run(write_configs, small_chatterbot, batch, instance, data, "c2",
                      changes=["config/run_settings [minilm-l6]"])
    # A run setting changes no vector: nothing is encoded, only the efficiency numbers move.
    assert rerun.encoded == [] and {asset for _, _, asset in rerun.assets} == {"efficiency"}
    back = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1",
                     changes=["config/run_settings [minilm-l6]"])
    assert back.encoded == [] and {asset for _, _, asset in back.assets} == {"efficiency"}

    for field, value in (("query_prompt", "query: "), ("normalize", False), ("dimension", 128)):
        changed = {**default_models, "minilm-l6": {**minilm, field: value}}
        report = small_run(write_configs, small_chatterbot, changed, instance, data, f"c-{field}",
                           changes=["config/model_card [minilm-l6]", "config/comparison [chatterbot-small]",
                                    "config/task_comparison"])
        new_key = load_config(tmp_path / f"c-{field}").models["minilm-l6"].key
        assert report.materialized == [(new_key, "chatterbot-small")], field
        # A new prompt is a new forward pass; a new normalization or dimension cut derives the
        # card's tables from the original card's stored pass.
        tables = [(new_key, "chatterbot-small", kind) for kind in ("document", "query")]
        assert (sorted(report.encoded), sorted(report.derived)) == ((tables, []) if field == "query_prompt" else ([], tables))
        assert (use_key, "chatterbot-small") in report.skipped

    # Back to the original card: its vectors are still cached, so nothing is encoded again.
    restored = small_run(write_configs, small_chatterbot, default_models, instance, data, "c1")
    assert restored.encoded == [] and restored.skipped == [(use_key, "chatterbot-small")]

    added = {**default_models, "minilm-l6-64": {**minilm, "dimension": 64}}
    report = small_run(write_configs, small_chatterbot, added, instance, data, "c-added")
    new_key = load_config(tmp_path / "c-added").models["minilm-l6-64"].key
    assert report.materialized == [(new_key, "chatterbot-small")] and len(report.skipped) == 2
    assert report.summary_built
    assert set(pl.read_parquet(data / "comparisons" / "datasets" / "chatterbot-small" / "comparisons.parquet")["model_b"]) == {use_key, new_key}
    assert set(instance.get_dynamic_partitions(MODELS)) == set(added)
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        assert {row[0] for row in con.sql("SELECT DISTINCT model FROM leaderboard").fetchall()} == \
            {m.key for m in load_config(tmp_path / "c-added").models.values()}

    protocol = {**default_section("protocol"), "comparison": {**default_section("protocol")["comparison"], "seed": 7}}
    reseeded = small_run(write_configs, small_chatterbot, default_models, instance, data, "c-seed", protocol=protocol)
    # The comparison seed also seeds the L1 price intervals, the random pairs of L1 pair sanity
    # and the latency sample of the efficiency measurements: those and the summary move, nothing else.
    assert (reseeded.encoded, reseeded.skipped, reseeded.summary_built) == ([], [], True)
    keys = [load_config(tmp_path / "c-seed").models[m].key for m in default_models]
    assert sorted(reseeded.assets) == sorted((key, "chatterbot-small", asset) for key in keys
                                             for asset in ("norm_geometry", "normalization_price", "efficiency",
                                                           "pair_sanity"))
    assert pl.read_parquet(data / "comparisons" / "datasets" / "chatterbot-small" / "comparisons.parquet")["seed"].unique().to_list() == [7]

    protocol = {**protocol, "k_values": [1, 3, 5, 10, 20, 100]}
    deeper = small_run(write_configs, small_chatterbot, default_models, instance, data, "c-k", protocol=protocol)
    # A new cutoff changes the metrics (L2) and the price table (L1) of every model; the
    # retrieval run, the embeddings and the geometry stay.
    assert sorted(deeper.assets) == sorted((key, "chatterbot-small", asset) for key in keys
                                           for asset in ("retrieval_metrics", "normalization_price"))
    # Each partition's L1 step computed only the asset asked of it: the price (above), in one step.
    assert l1_steps(instance, limit=len(keys)) == ["l1_geometry"] * len(keys)

    # Forcing a re-materialization of a cached partition still encodes nothing.
    forced = dg.materialize(
        list(defs.assets), selection=["query_embeddings"], instance=instance,
        partition_key=model_dataset_key("use-m3", "chatterbot-small"),
        resources={"project": ProjectResource(configs_dir=str(tmp_path / "c1"), data_dir=str(data)),
                   "shard_project": ShardWorkspace(configs_dir=str(tmp_path / "c1"), data_dir=str(data)),
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
    config_sensor = automation_sensors()[0]

    def tick(configs):
        with dg.build_sensor_context(instance=instance, resources={
                "project": ProjectResource(configs_dir=str(configs), data_dir="unused")}) as context:
            return config_sensor(context)

    result = tick(folder)
    requests = {(type(r).__name__, r.partitions_def_name): sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
    assert requests == {
        ("AddDynamicPartitionsRequest", MODELS): sorted(default_models),
        ("DeleteDynamicPartitionsRequest", MODELS): ["retired"],
        ("AddDynamicPartitionsRequest", DATASETS): ["chatterbot-en"],
        # The L2 task families: each its own partition set of the default task datasets (none for the
        # families whose data is MTEB's: reranking, multi-label classification).
        **{("AddDynamicPartitionsRequest", task_datasets_name(family)): sorted(load_config(folder).family_datasets(family))
           for family in TASK_FAMILIES if load_config(folder).family_datasets(family)},
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


def test_cli_run_verdict_status_backfill_and_leaderboard(write_configs, small_chatterbot, tmp_path, capsys):
    models = {"ngrams": toy("toy_encoders:CharacterNgrams"),
              "narrow": {**toy("toy_encoders:CharacterNgrams"), "options": {"dim": 8}}}
    folder = write_configs(models=models, datasets=small_chatterbot)
    data = tmp_path / "data"
    assert main(["run", "--configs", str(folder), "--data", str(data)]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("chatterbot-small · ") and lines[0].endswith(" queries · exact search")
    assert lines[1].split() == ["model", "nDCG@10", "(95%", "CI)", "Recall@100", "MRR@10", "group"]
    verdict = printed[printed.index("\nverdict (one line per dataset"):].splitlines()
    assert verdict[2].startswith("  chatterbot-small · nDCG@10 over ") and "Δ " in verdict[2]
    assert lines[-2:] == [f"report: {(data / 'report' / 'report.html').resolve()}",
                          f"results: {(data / 'results.duckdb').resolve()} (every metric: embedpyramid leaderboard --all)"]
    assert main(["leaderboard", "--data", str(data)]) == 0
    assert capsys.readouterr().out == "\n".join(lines[:-3]) + "\n"  # the same answer, without the paths
    assert main(["leaderboard", "--all", "--data", str(data)]) == 0
    assert "MAP@100" in capsys.readouterr().out  # every metric
    assert main(["leaderboard", "--data", str(data), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {parse_measure(row["metric"]).name for row in rows} == {
        "Recall", "Hit", "MRR", "MAP", "nDCG", "P", "RPrec", "CompleteEvidence", "Judged"}
    assert main(["run", "--configs", str(folder), "--data", str(data), "--models", "nope"]) == 2
    assert "unknown models ['nope']" in capsys.readouterr().err

    # A new card: status shows it missing; backfill by its key evaluates it and the summaries only.
    second = write_configs(models={**models, "ngrams-24": {**toy("toy_encoders:CharacterNgrams"), "options": {"dim": 24}}},
                           datasets=small_chatterbot)
    new_key = load_config(second).models["ngrams-24"].key
    assert main(["status", "--configs", str(second), "--data", str(data), "--format", "json"]) == 0
    status = {(row["model"], row["level"]): (row["state"], row["why"]) for row in json.loads(capsys.readouterr().out)}
    assert status[(new_key, "l2_retrieval")][0] == "missing"
    assert status[(load_config(second).models["ngrams"].key, "l2_retrieval")] == ("fresh", "")
    # The summaries are stale: the card list is part of what the task comparison compares (status
    # registers no partition, so the new card's inputs are not listed until run adds them).
    assert status[(None, "summary")] == (
        "stale", "config/task_comparison has a new data version (comparison_report, results_db, task_comparisons)")
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
    assert len(list((data / "indexes").glob("cut-*"))) == 2
    # L4 of a partition is one step per run, whatever the number of specs it computes: the first
    # run's one step built both specs and the frontier; the second run's, the cut, then (the wave
    # after it) the frontier.
    l4_steps = [step.step_key for record in instance.get_run_records() for step in
                instance.get_run_step_stats(record.dagster_run.run_id) if step.step_key.startswith("l4_serving")]
    assert l4_steps == ["l4_serving"] * 3

    # A spec that fails fails its step after the specs after it are materialized; the frontier
    # that depends on it is not, and the next run retries only what did not materialize.
    broken = small_ann(flat={"factory": "Flat"}, cut={"factory": "Flat", "dimension": 64},
                       broken={"factory": "IVF4096,Flat"}, later={"factory": "Flat", "dimension": 128})
    folder = write_configs("c", models=models, datasets=small_chatterbot, ann=broken)
    third = run_pipeline(folder, data, instance=instance)
    (failure,) = third.failures
    assert "spec 'broken' (faiss IVF4096,Flat)" in failure and "clusters (4096)" in failure
    assert sorted(third.assets) == [(key, "chatterbot-small", "ann_later")]
    fixed = {**broken, "indexes": {**broken["indexes"], "broken": {"factory": "IVF{n},Flat"}}}
    fourth = run_pipeline(write_configs("c", models=models, datasets=small_chatterbot, ann=fixed), data, instance=instance)
    assert fourth.failures == [] and sorted(fourth.assets) == [
        (key, "chatterbot-small", "ann_broken"), (key, "chatterbot-small", "serving_frontier")]


def test_an_l2_spec_on_a_cosine_card_runs_with_a_warning_naming_both(write_configs, default_models, small_chatterbot,
                                                                       tmp_path):
    models = {"minilm-l6": default_models["minilm-l6"]}
    folder = write_configs(models=models, datasets=small_chatterbot, ann=small_ann(euclid={"factory": "Flat", "metric": "l2"}))
    instance = dg.DagsterInstance.ephemeral()
    report = run_pipeline(folder, tmp_path / "data", instance=instance)
    assert report.failures == []
    key = load_config(folder).models["minilm-l6"].key
    record = instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey(ann_asset_name("euclid")), asset_partitions=[model_dataset_key("minilm-l6", "chatterbot-small")]),
        limit=1).records[0]
    (finding,) = record.asset_materialization.metadata["findings"].value
    assert finding.startswith("spec 'euclid' (faiss Flat) overrides the card's similarity 'inner_product' with 'l2'")
    summary = pl.read_parquet(tmp_path / "data" / "serving" / "chatterbot-small" / key / "summary.parquet")
    assert summary["index_metric"].to_list() == ["l2"] and summary["reference_metric"].to_list() == ["inner_product"]
    assert finding.replace("_", "\\_") in (tmp_path / "data" / "report" / "report.md").read_text()  # Markdown-escaped


def test_a_card_that_does_not_normalize_is_searched_in_its_own_metric(write_configs, default_models, small_chatterbot,
                                                                      tmp_path):
    """Exact search and every L4 spec rank by the card's similarity: Flat matches exact exactly."""
    euclid = {**default_models["minilm-l6"], "normalize": False, "similarity": "l2"}
    folder = write_configs(models={"euclid": euclid}, datasets=small_chatterbot,
                           ann=small_ann(flat={"factory": "Flat"}, hnsw={"factory": "HNSW32", "sweep": {"efSearch": [64]}}))
    report = run_pipeline(folder, tmp_path / "data", instance=dg.DagsterInstance.ephemeral())
    assert report.failures == []
    config, store = load_config(folder), ArtifactStore(tmp_path / "data")
    model = config.models["euclid"]
    frozen = open_frozen(store.dataset_dir("chatterbot-small"))
    _, queries = read_embeddings(cached_embedding_path(store, model, frozen, "query"))
    doc_ids, documents = read_embeddings(cached_embedding_path(store, model, frozen, "document"))
    assert (np.abs(np.linalg.norm(documents, axis=1) - 1) > 0.05).all()  # raw vectors: Normalize stripped
    run = pl.read_parquet(store.run_dir("chatterbot-small", model.key) / "exact.parquet")
    distances = ((queries[:, None, :].astype(np.float64) - documents[None]) ** 2).sum(-1)
    assert run.filter(pl.col("rank") == 1)["doc_id"].to_list() == [doc_ids[i] for i in distances.argmin(axis=1)]
    summary = pl.read_parquet(tmp_path / "data" / "serving" / "chatterbot-small" / model.key / "summary.parquet")
    flat = summary.filter(pl.col("spec") == "flat").row(0, named=True)
    assert flat["index_metric"] == "l2" and flat["ann_recall"] == 1.0
    assert (flat["delta"], flat["delta_ci_low"], flat["delta_ci_high"]) == (0.0, 0.0, 0.0)
    assert flat["ann_value"] == flat["exact_value"]


def test_truncated_slice_holds_the_queries_a_short_card_cuts(write_configs, default_models, small_chatterbot, tmp_path):
    # The same model with an 8-token limit: queries (or relevant answers) of 8 tokens or more
    # are cut, and the comparison gets a `truncated` slice.
    minilm = default_models["minilm-l6"]
    models = {"minilm-l6": minilm, "minilm-short": {**minilm, "max_tokens": 8}}
    folder = write_configs(models=models, datasets=small_chatterbot)
    report = run_pipeline(folder, tmp_path / "data", instance=dg.DagsterInstance.ephemeral())
    assert report.failures == []
    compared = pl.read_parquet(tmp_path / "data" / "comparisons" / "datasets" / "chatterbot-small" / "comparisons.parquet")
    truncated = compared.filter((pl.col("slice_column") == "truncated") & (pl.col("metric") == "nDCG@10"))
    counts = dict(truncated.select("slice_value", "n").rows())
    assert set(counts) == {"yes", "no"} and counts["yes"] + counts["no"] == compared["n"].max()

    # Independently: token counts from the model's own tokenizer (with its special tokens).
    from sentence_transformers import SentenceTransformer

    config, store = load_config(folder), ArtifactStore(tmp_path / "data")
    frozen = open_frozen(store.dataset_dir("chatterbot-small"))
    tokenizer = SentenceTransformer(str(config.models["minilm-short"].source_path), device="cpu").tokenizer
    queries = pl.read_parquet(frozen.path("queries"))
    corpus = pl.read_parquet(frozen.path("corpus"))
    qrels = pl.read_parquet(frozen.path("qrels"))

    def long(texts: list[str]) -> list[bool]:
        return [len(ids) >= 8 for ids in tokenizer(texts, truncation=True, max_length=8)["input_ids"]]

    long_docs = set(corpus.filter(pl.Series(long(corpus["text"].to_list())))["doc_id"])
    expected = set(queries.filter(pl.Series(long(queries["text"].to_list())))["query_id"])
    expected |= set(qrels.filter(pl.col("doc_id").is_in(sorted(long_docs)))["query_id"])
    assert counts["yes"] == len(expected)
