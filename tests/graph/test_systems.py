"""Pyramid L5 in the graph: BM25 once per dataset, fusion and rerank per model × dataset, their
rows in per_query_metrics, the comparisons, the system verdicts and the report, and freshness
per system."""

import dagster as dg
import duckdb
import pytest
from graph_helpers import default_section, plan_and_automation, quick_protocol, small_ann, toy

from embedpyramid.config import ConfigError, load_config
from embedpyramid.data import open_frozen
from embedpyramid.encode import cached_embedding_path
from embedpyramid.store import ArtifactStore, read_frame, read_json
from embedpyramid.systems.stored import evaluate_stored_system
from graphbase.dagster_internals import parent_partitions
from graphbase.instance import open_instance
from graphbase.partitions import model_dataset_key
from pipelines.graph import build_definitions
from pipelines.runner import run_pipeline
from pipelines.session import open_session


def systems_yaml(**systems) -> dict:
    settings = {**default_section("systems")["settings"], "latency_queries": 20}
    return {"settings": settings, "systems": systems}


BM25 = {"kind": "bm25", "method": "lucene", "k1": 1.2, "b": 0.75}


def rrf(k: int = 60) -> dict:
    return {"kind": "rrf", "inputs": ["bm25", "exact"], "k": k}


def query(path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_systems_with_real_models_join_the_comparisons_and_the_report_and_only_rrf_turns_stale(
        write_configs, two_real_models, small_chatterbot, tmp_path):
    systems = {"bm25": BM25, "rrf": rrf(), "rerank-by-use-m3": {
        "kind": "bi-encoder", "first_stage": "exact", "top_n": 50, "by": "use-m3"}}
    folder = write_configs(models=two_real_models, datasets=small_chatterbot,
                           protocol=quick_protocol(baseline="minilm-l6"), systems=systems_yaml(**systems))
    data = tmp_path / "data"
    instance = open_instance(data)
    report = run_pipeline(folder, data, instance=instance)
    assert report.failures == [] and report.summary_built
    config = load_config(folder)
    minilm, use = config.models["minilm-l6"].key, config.models["use-m3"].key
    db = data / "results.duckdb"

    # Every system's per-query rows are in the long table: BM25 once (model none), rrf per model,
    # the rerank by USE only for MiniLM (never a card reranked by itself).
    rows = set(query(db, "SELECT DISTINCT system, model FROM per_query_metrics WHERE system <> 'exact'"))
    assert rows == {("bm25", "none"), ("rrf", minilm), ("rrf", use), ("rerank-by-use-m3", minilm)}
    assert query(db, "SELECT count(DISTINCT system) FROM runs")[0][0] == 4
    assert {row[0] for row in query(db, "SELECT model FROM models")} == {minilm, use}

    # The models are compared within rrf too (its own Holm family), and the verdict stays exact's.
    comparisons = read_frame(data / "comparisons" / "datasets" / "chatterbot-small" / "comparisons.parquet")
    assert set(comparisons["system"].unique()) == {"exact", "rrf"}
    assert all(entry["system"] == "exact" for entry in read_json(data / "report" / "verdict.json"))

    # Each system against its model's dense exact search, Holm across models × systems.
    verdicts = query(db, "SELECT model, system_b, verdict, family_size, wins + ties + losses, n FROM system_verdicts "
                         "WHERE metric = 'nDCG@10' AND slice_column = 'all' AND family = 'confirmatory'")
    assert {(model, system) for model, system, *_ in verdicts} == {
        (minilm, "bm25"), (use, "bm25"), (minilm, "rrf"), (use, "rrf"), (minilm, "rerank-by-use-m3")}
    assert all(size == 5 and counted == n for _, _, _, size, counted, n in verdicts)
    assert {verdict for _, _, verdict, *_ in verdicts} <= {"better", "worse", "no detectable difference"}
    latency = query(db, "SELECT system, model, p50_ms, p95_ms FROM system_latency")
    assert len(latency) == 4 and all(0 < p50 <= p95 for _, _, p50, p95 in latency)

    text = (data / "report" / "report.md").read_text()
    assert "L5 hybrid and rerank systems: chatterbot-small" in text
    assert "Systems vs dense exact (nDCG@10)" in text and "Latency each stage adds" in text

    # A new RRF k changes only rrf's hash: only its partitions are stale, BM25 and the rerank stay.
    systems["rrf"] = rrf(k=30)
    write_configs(models=two_real_models, datasets=small_chatterbot,
                  protocol=quick_protocol(baseline="minilm-l6"), systems=systems_yaml(**systems))
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/system_rrf"]
    expected = {("system_rrf", str(model_dataset_key(name, "chatterbot-small"))) for name in ("minilm-l6", "use-m3")}
    assert planned == requested == expected


def test_bm25_runs_once_per_dataset_an_ann_first_stage_reads_l4_and_a_rerank_reads_the_other_cards_partition(
        write_configs, tiny, tmp_path):
    systems = {"bm25": BM25, "rrf": rrf(), "flat-rerank": {
        "kind": "bi-encoder", "first_stage": "ann:flat", "top_n": 5, "by": "wide"}}
    folder = write_configs(models={"narrow": toy(32), "wide": toy(64)}, datasets=tiny, protocol=quick_protocol(),
                           ann=small_ann(flat={"factory": "Flat"}), systems=systems_yaml(**systems))
    data = tmp_path / "data"
    instance = open_instance(data)
    report = run_pipeline(folder, data, instance=instance)
    assert report.failures == []
    config = load_config(folder)
    narrow, wide = config.models["narrow"].key, config.models["wide"].key
    # The rerank of narrow's partition reads wide's vectors, which wide's own embedding assets
    # encoded, in wide's partition, before any partition was evaluated.
    assert report.read_across == [(wide, "tiny")]
    assert sorted(report.assets[:2]) == [(wide, "tiny", "document_embeddings"), (wide, "tiny", "query_embeddings")]
    assert sorted(report.encoded) == sorted((key, "tiny", kind) for key in (narrow, wide) for kind in ("document", "query"))
    assert report.materialized == [(narrow, "tiny"), (wide, "tiny")]
    records = instance.fetch_materializations(dg.AssetKey("system_bm25"), limit=10).records
    assert [record.partition_key for record in records] == ["tiny"]
    not_applicable = instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey("system_flat_rerank"), asset_partitions=[str(model_dataset_key("wide", "tiny"))]), limit=1).records
    assert "not_applicable" in not_applicable[0].asset_materialization.metadata
    rows = set(query(data / "results.duckdb", "SELECT DISTINCT system, model FROM per_query_metrics"))
    assert ("flat-rerank", narrow) in rows and ("flat-rerank", wide) not in rows and ("bm25", "none") in rows
    summary = read_frame(data / "systems" / "tiny" / narrow / "flat-rerank" / "summary.parquet")
    assert summary["inputs"][0] == "ann:flat" and summary["system_hash"][0] == config.systems.hashes["flat-rerank"]

    # After the ranking and the verdict, the pyramid overview: L4 and L5 ran, so their lines link
    # to their sections; L6 and L3 did not, so theirs say why, unlinked.
    text = (data / "report" / "report.md").read_text()
    assert text.index("## Ranking: ") < text.index("## Verdict") < text.index("## Overview") < text.index("## Contents")
    leader = read_json(data / "report" / "verdict.json")[0]["first"]
    overview = {line["level"]: line for line in read_json(data / "report" / "overview.json")}
    assert overview["L4"]["text"].startswith(f"cheapest index of {leader} keeping ≥ 99% of exact nDCG@10: flat — ")
    assert overview["L4"]["section"] == f"L4 serving approximation: {leader} (tiny)"
    assert overview["L5"]["text"].startswith("best system ") and overview["L5"]["section"] == "L5 hybrid and rerank systems: tiny"
    assert overview["L6"]["section"] is None and overview["L3"]["section"] is None
    opening = text[text.index("## Overview"):text.index("## Contents")]
    for level, line in overview.items():
        assert (f"- [tiny · {level}: " in opening) == (line["section"] is not None)
    assert "tiny · not in this report — " in opening and "L6: no L6 grade analysis of tiny" in opening

    # BM25's k1 moves BM25's hash and the hashes of the fusions built on it: they alone turn stale.
    systems["bm25"] = {**BM25, "k1": 0.9}
    write_configs(models={"narrow": toy(32), "wide": toy(64)}, datasets=tiny, protocol=quick_protocol(),
                  ann=small_ann(flat={"factory": "Flat"}), systems=systems_yaml(**systems))
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert sorted(changes) == ["config/system_bm25", "config/system_rrf"]
    assert planned == requested == {("system_bm25", "tiny"), *(
        ("system_rrf", str(model_dataset_key(name, "tiny"))) for name in ("narrow", "wide"))}


def test_without_systems_yaml_there_is_no_l5_and_clashing_names_are_refused(write_configs, tiny):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    graph = build_definitions(folder, folder.parent / "data").resolve_asset_graph()
    assert not [key for key in graph.get_all_asset_keys() if graph.get(key).group_name == "l5_systems"]
    clash = write_configs("clash", models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol(),
                          systems=systems_yaml(**{"bm25": BM25, "rrf-a": rrf(), "rrf_a": rrf()}))
    with pytest.raises(ConfigError, match="systems.rrf-a and systems.rrf_a both become the asset system_rrf_a"):
        build_definitions(clash, clash.parent / "data")


def test_a_rerank_depends_on_the_by_cards_embedding_partitions_and_a_run_of_one_card_encodes_only_those(
        write_configs, tiny, tmp_path):
    systems = {"rerank-by-wide": {"kind": "bi-encoder", "first_stage": "exact", "top_n": 5, "by": "wide"}}
    models = {"narrow": toy(32), "wide": toy(64)}
    folder = write_configs(models=models, datasets=tiny, protocol=quick_protocol(), systems=systems_yaml(**systems))
    data = tmp_path / "data"
    instance = open_instance(data)
    rerank, narrow_tiny, wide_tiny = (dg.AssetKey("system_rerank_by_wide"), str(model_dataset_key("narrow", "tiny")),
                                      str(model_dataset_key("wide", "tiny")))

    # The lineage: query_embeddings and document_embeddings [wide × tiny] → the rerank [narrow × tiny].
    session = open_session(folder, data, instance, log=lambda _line: None, verbose=False)
    graph = session.defs.resolve_asset_graph()
    assert {"query_embeddings", "document_embeddings", "exact_topk"} <= {
        key.to_user_string() for key in graph.get(rerank).parent_keys}
    freshness = session.freshness()
    assert freshness.other_partition_parents(rerank, narrow_tiny) == [
        (dg.AssetKey("document_embeddings"), wide_tiny), (dg.AssetKey("query_embeddings"), wide_tiny)]
    assert parent_partitions(freshness.view, rerank, narrow_tiny, dg.AssetKey("exact_topk")) == [narrow_tiny]
    assert freshness.other_partition_parents(rerank, wide_tiny) == []

    # `--models narrow`: wide's embeddings are materialized in wide's partition, nothing else of wide.
    report = run_pipeline(folder, data, instance=instance, models=["narrow"])
    config = load_config(folder)
    narrow, wide = config.models["narrow"].key, config.models["wide"].key
    assert report.failures == [] and report.read_across == [(wide, "tiny")]
    assert report.materialized == [(narrow, "tiny")]
    assert {asset for key, _, asset in report.assets if key == wide} == {"query_embeddings", "document_embeddings"}
    assert sorted(report.encoded) == sorted((key, "tiny", kind) for key in (narrow, wide) for kind in ("document", "query"))
    assert not instance.fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey("exact_topk"), asset_partitions=[wide_tiny]), limit=1).records
    assert ("rerank-by-wide", narrow) in set(query(data / "results.duckdb",
                                                   "SELECT DISTINCT system, model FROM per_query_metrics"))

    # A new wide card: the rerank of narrow is stale through wide's embeddings (not directly,
    # until they are re-encoded), and the runner and the automation both start with wide's vectors.
    models["wide"] = toy(80)
    write_configs(models=models, datasets=tiny, protocol=quick_protocol(), systems=systems_yaml(**systems))
    planned, requested, _ = plan_and_automation(folder, data, instance)
    assert (rerank.to_user_string(), narrow_tiny) not in planned | requested
    assert {("query_embeddings", wide_tiny), ("document_embeddings", wide_tiny)} <= planned & requested
    session = open_session(folder, data, instance, log=lambda _line: None, verbose=False)
    (state,) = session.states([rerank.to_user_string()], narrow_tiny)
    assert state.state == "stale" and not state.direct
    assert "config/model_card [wide] has a new data version" in state.causes
    again = run_pipeline(folder, data, instance=instance, models=["narrow"])
    new_wide = load_config(folder).models["wide"].key
    assert again.failures == [] and again.read_across == [(new_wide, "tiny")]
    assert {asset for key, _, asset in again.assets if key == narrow} == {"system_rerank_by_wide"}

    # The rerank never encodes: without the by card's vectors it fails and names the partition.
    config = load_config(folder)
    store = ArtifactStore.at(data)
    frozen = open_frozen(store.dataset_dir("tiny"))
    cached_embedding_path(store, config.models["wide"], frozen, "query").unlink()
    with pytest.raises(ValueError, match=r"materialize query_embeddings for the partition model 'wide' × dataset "
                                         r"'tiny' first"):
        evaluate_stored_system(config, store, "rerank-by-wide", "tiny", frozen, config.models["narrow"],
                               lambda _card: pytest.fail("a rerank must not load an encoder to encode"))
