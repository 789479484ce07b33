import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from embedpyramid.config import MetricConventions, load_config, parse_measure
from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.config.systems import load_systems_config
from embedpyramid.retrieval.metrics import evaluate_run
from embedpyramid.retrieval.search import exact_topk, run_table
from embedpyramid.store import ArtifactStore, read_frame, read_table_metadata
from embedpyramid.systems import (
    DatasetTables,
    DevSplit,
    KeyedVectors,
    evaluate_system,
    read_system_run,
    read_system_summary,
    reference_run_path,
    system_comparisons,
    write_system,
)

DATASET = "chatterbot-small"


@pytest.fixture(scope="module")
def evaluated(write_configs_session: Path, chatterbot_tables: DatasetTables, encode, tmp_path_factory):
    """Every default system on a few chatterbot categories with the two real default models."""
    config = load_config(write_configs_session)
    systems, tables = config.systems, chatterbot_tables
    measures, conventions = config.protocol.measures(), config.protocol.conventions(config.dataset(DATASET))
    store = ArtifactStore(tmp_path_factory.mktemp("data"))
    vectors = {
        card: (KeyedVectors(tables.query_ids, encode(card, tables.query_texts, "query")),
               KeyedVectors(tables.doc_ids, encode(card, tables.doc_texts, "document")))
        for card in ("minilm-l6", "use-m3")
    }
    results, per_query = {}, []
    bm25 = evaluate_system("bm25", systems, dataset=DATASET, model_key=None, tables=tables, measures=measures,
                           conventions=conventions)
    write_system(bm25, store)
    results[("none", "bm25")] = bm25
    for card, (queries, documents) in vectors.items():
        key = config.models[card].key
        scores, indices = exact_topk(queries.vectors, documents.vectors, config.protocol.depth)
        exact = run_table(tables.query_ids, tables.doc_ids, scores, indices)
        run_dir = store.run_dir(DATASET, key)
        run_dir.mkdir(parents=True)
        exact_path = run_dir / "exact.parquet"
        pl.from_arrow(exact).write_parquet(exact_path)
        exact_scores = evaluate_run(pl.from_arrow(exact), tables.qrels, measures, conventions,
                                    query_ids=tables.query_ids).per_query
        per_query.append(exact_scores.select(pl.lit(DATASET).alias("dataset"), pl.lit(key).alias("model"),
                                             pl.lit("exact").alias("system"), "query_id", "metric", "value"))
        for name in systems.systems:
            if not systems.applies_to(name, card) or name.startswith("hnsw"):
                continue
            spec = systems.system(name)
            stages = {ref: read_frame(reference_run_path(store, systems, DATASET, key, ref)) for ref in spec.references()}
            by = getattr(spec, "by", None)
            result = evaluate_system(name, systems, dataset=DATASET, model_key=key, tables=tables, measures=measures,
                                     conventions=conventions, first_stages=stages,
                                     rerank_vectors=vectors[by] if by else None)
            write_system(result, store)
            results[(key, name)] = result
    per_query += [r.scored.per_query for r in results.values()]
    return config, store, results, pl.concat(per_query)


def test_every_system_has_the_exact_runs_queries_and_metrics(evaluated):
    config, _, results, per_query = evaluated
    assert {model for model, _ in results} == {"none", *(config.models[card].key for card in ("minilm-l6", "use-m3"))}
    minilm = config.models["minilm-l6"].key
    assert {name for model, name in results if model == minilm} == {
        "rrf", "weighted-minmax", "weighted-zscore", "rerank-by-use-m3"}
    exact = per_query.filter((pl.col("system") == "exact") & (pl.col("model") == minilm))
    for (model, name), result in results.items():
        table = result.scored.per_query
        assert table.columns == ["dataset", "model", "system", "query_id", "metric", "value"]
        assert set(table["system"]) == {name} and set(table["model"]) == {model}
        assert table.select("query_id", "metric").sort("query_id", "metric").equals(
            exact.select("query_id", "metric").sort("query_id", "metric"))


def test_summaries_record_settings_hash_depths_and_latency(evaluated):
    config, store, results, _ = evaluated
    minilm = config.models["minilm-l6"].key
    rrf = read_system_summary(store, DATASET, minilm, "rrf").row(0, named=True)
    assert rrf["system_hash"] == config.systems.hashes["rrf"]
    assert rrf["inputs"] == "bm25,exact" and rrf["candidate_depth"] == 100 and rrf["output_depth"] == 100
    assert json.loads(rrf["settings"])["k"] == 60
    sampled = min(200, rrf["n_queries"])  # latency_queries, or every query of a smaller dataset
    assert rrf["latency_queries"] == sampled and rrf["latency_scope"] == f"sample of {sampled} queries (seed 42)"
    assert 0 < rrf["p50_ms"] <= rrf["p95_ms"]
    weighted = results[(minilm, "weighted-minmax")].summary.row(0, named=True)
    assert weighted["weights"] == "[0.5, 0.5]" and weighted["tuned_on"] == "fixed weights (no dev split)"
    bm25 = results[("none", "bm25")].summary.row(0, named=True)
    settings = json.loads(bm25["settings"])
    assert (settings["k1"], settings["b"], settings["method"]) == (1.2, 0.75, "lucene")
    assert settings["tokenizer"]["stemmer"] == "english" and settings["bm25s"]
    assert bm25["latency_scope"] == "every query" and bm25["latency_queries"] == bm25["n_queries"]
    rerank = results[(minilm, "rerank-by-use-m3")].summary.row(0, named=True)
    assert rerank["candidate_depth"] == 100 and rerank["candidates_per_query"] == 100


def test_written_artefacts_read_back_with_their_conventions(evaluated):
    config, store, results, _ = evaluated
    minilm = config.models["minilm-l6"].key
    run = read_system_run(store, DATASET, minilm, "rrf")
    assert run.columns == ["query_id", "rank", "doc_id", "score"]
    assert run.equals(pl.from_arrow(results[(minilm, "rrf")].run))
    manifest = read_table_metadata(store.metrics_path(DATASET, minilm, "rrf"))
    assert manifest["conventions"]["gain"] == "linear"
    assert manifest["system"]["system_hash"] == config.systems.hashes["rrf"]
    assert (store.root / "systems" / DATASET / "none" / "bm25" / "run.trec").is_file()
    # Scores strictly decrease by rank except where tied, and ties are in doc_id order.
    ordered = run.sort("query_id", "rank")
    assert ordered.equals(run.sort(["query_id", "score", "doc_id"], descending=[False, True, False]))


def test_rerank_by_the_other_model_is_that_models_order_of_the_candidates(evaluated):
    config, store, results, _ = evaluated
    minilm = config.models["minilm-l6"].key
    exact = read_frame(store.run_dir(DATASET, minilm) / "exact.parquet")
    reranked = pl.from_arrow(results[(minilm, "rerank-by-use-m3")].run)
    for query in exact["query_id"].unique().head(5):
        before = exact.filter(pl.col("query_id") == query)["doc_id"].to_list()
        after = reranked.filter(pl.col("query_id") == query)["doc_id"].to_list()
        assert sorted(before) == sorted(after)


def test_system_verdicts_against_dense_exact(evaluated, small_frozen):
    config, _, results, per_query = evaluated
    queries = read_frame(small_frozen.path("queries"))
    settings = ComparisonSettings(baseline="unused", n_resamples=1000, n_permutations=1000, slice_columns=("category",))
    table = system_comparisons(per_query, queries, settings, metrics=["nDCG@10"])
    overall = table.filter(pl.col("slice_column") == "all")
    # Per model: bm25, rrf, the two weighted fusions and its rerank by the other model.
    assert len(overall) == 2 * 5
    assert set(overall["verdict"]) <= {"better", "worse", "no detectable difference"}
    assert (overall["n"] == len(queries)).all()  # every chatterbot query has a relevant answer
    expected = {}
    for (model, name), result in results.items():
        mean = result.scored.per_query.filter(pl.col("metric") == "nDCG@10")["value"].mean()
        for key in ([model] if model != "none" else [config.models[card].key for card in ("minilm-l6", "use-m3")]):
            exact = per_query.filter((pl.col("model") == key) & (pl.col("system") == "exact")
                                     & (pl.col("metric") == "nDCG@10"))["value"].mean()
            expected[(key, name)] = mean - exact
    observed = dict(zip(zip(overall["model"], overall["system_b"], strict=True), overall["mean_delta"], strict=True))
    assert observed == pytest.approx(expected)


def toy_tables(query_ids: list[str], relevant: list[str]) -> DatasetTables:
    qrels = pl.DataFrame({"query_id": query_ids, "doc_id": relevant, "relevance": [1] * len(query_ids)},
                         schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})
    return DatasetTables(query_ids, ["text"] * len(query_ids), ["a", "b", "c"], ["a", "b", "c"], qrels)


def toy_run(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame({"query_id": [r[0] for r in rows], "rank": list(range(1, len(rows) + 1)),
                         "doc_id": [r[1] for r in rows], "score": [r[2] for r in rows]})


def test_weighted_fusion_chooses_its_weight_on_the_dev_split_only(tmp_path: Path):
    (tmp_path / "systems.yaml").write_text(
        "settings: {dev_datasets: {toy: toy-dev}, latency_queries: 5}\n"
        "systems:\n  lexical: {kind: bm25}\n"
        "  mix: {kind: weighted, inputs: [lexical, exact], sweep: [0.0, 0.5, 1.0], tune_metric: nDCG@10}\n"
    )
    systems = load_systems_config(tmp_path / "systems.yaml", {}, {"toy": None, "toy-dev": None})
    # Dev: lexical ranks c (2.0), a (1.0); exact ranks a (0.9), b (0.8), c (0.1). Min-max: lexical c 1, a 0;
    # exact a 1, b 0.875, c 0. w = 0: c third, nDCG@10 = 1/log2(4) = 0.5; w = 0.5: a and c tie at 0.5, and
    # the default tie rule takes the expected value over their two orders: (1/log2(3) + 1) / 2; w = 1: c
    # first: 1.0. The dev split picks w = 1.
    dev = DevSplit("toy-dev", toy_tables(["v0"], ["c"]), {
        "lexical": toy_run([("v0", "c", 2.0), ("v0", "a", 1.0)]),
        "exact": toy_run([("v0", "a", 0.9), ("v0", "b", 0.8), ("v0", "c", 0.1)]),
    })
    test_runs = {"lexical": toy_run([("q0", "b", 1.0)]), "exact": toy_run([("q0", "a", 1.0), ("q0", "b", 0.5)])}
    result = evaluate_system("mix", systems, dataset="toy", model_key="m@1", tables=toy_tables(["q0"], ["a"]),
                             measures=[parse_measure("nDCG@10")], conventions=MetricConventions(),
                             first_stages=test_runs, dev=dev)
    assert result.sweep["value"].to_list() == pytest.approx([0.5, (1 / np.log2(3) + 1.0) / 2, 1.0])
    row = result.summary.row(0, named=True)
    assert row["weights"] == "[1.0, 0.0]" and row["tuned_on"] == "dev split toy-dev"
    # On the test split only the lexical run counts now: b first.
    assert pl.from_arrow(result.run)["doc_id"].to_list()[0] == "b"
    other_corpus = DevSplit("toy-dev", DatasetTables(["v0"], ["t"], ["x"], ["x"], dev.tables.qrels), dev.first_stages)
    with pytest.raises(ValueError, match="dev split 'toy-dev' has a different corpus"):
        evaluate_system("mix", systems, dataset="toy", model_key="m@1", tables=toy_tables(["q0"], ["a"]),
                        measures=[parse_measure("nDCG@10")], conventions=MetricConventions(),
                        first_stages=test_runs, dev=other_corpus)


def test_a_missing_input_run_is_named(tmp_path: Path):
    (tmp_path / "systems.yaml").write_text("systems:\n  fuse: {kind: rrf, inputs: [exact, other]}\n"
                                           "  other: {kind: bm25}\n")
    systems = load_systems_config(tmp_path / "systems.yaml", {}, {})
    with pytest.raises(ValueError, match="system 'fuse' reads 'other', which was not given; given: \\['exact'\\]"):
        evaluate_system("fuse", systems, dataset="toy", model_key="m@1", tables=toy_tables(["q0"], ["a"]),
                        measures=[parse_measure("nDCG@10")], conventions=MetricConventions(),
                        first_stages={"exact": toy_run([("q0", "a", 1.0)])})
    with pytest.raises(ValueError, match="reads the evaluated model's run: give the model key"):
        evaluate_system("fuse", systems, dataset="toy", model_key=None, tables=toy_tables(["q0"], ["a"]),
                        measures=[parse_measure("nDCG@10")], conventions=MetricConventions())


def test_a_configured_cross_encoder_is_loaded_and_recorded(tmp_path: Path, seeded_cross_encoder: Path):
    from sentence_transformers import CrossEncoder

    (tmp_path / "systems.yaml").write_text(
        f"systems:\n  ce: {{kind: cross-encoder, first_stage: exact, top_n: 2, max_length: 64, "
        f"source: {{path: '{seeded_cross_encoder}'}}}}\n"
    )
    systems = load_systems_config(tmp_path / "systems.yaml", {}, {})
    tables = DatasetTables(["q0"], ["Where do cats sleep?"], ["a", "b", "c"],
                           ["Cats sleep on the sofa.", "Stocks fell.", "Bananas are yellow."],
                           toy_tables(["q0"], ["a"]).qrels)
    result = evaluate_system("ce", systems, dataset="toy", model_key="m@1", tables=tables,
                             measures=[parse_measure("nDCG@10")], conventions=MetricConventions(),
                             first_stages={"exact": toy_run([("q0", "b", 0.9), ("q0", "c", 0.8), ("q0", "a", 0.1)])})
    run = pl.from_arrow(result.run)
    assert sorted(run["doc_id"].to_list()) == ["b", "c"]  # top 2 of the first stage only
    direct = CrossEncoder(str(seeded_cross_encoder), device="cpu", max_length=64, local_files_only=True)
    import torch

    logits = direct.predict([("Where do cats sleep?", tables.doc_texts[1 if d == "b" else 2]) for d in run["doc_id"]],
                            activation_fn=torch.nn.Identity(), convert_to_numpy=True)
    assert np.allclose(run["score"].to_numpy(), logits, atol=1e-5)
    settings = json.loads(result.summary["settings"][0])
    assert settings["location"] == str(seeded_cross_encoder) and settings["activation"] == "none (raw logits)"
    assert result.summary["latency_scope"][0] == "every query"
