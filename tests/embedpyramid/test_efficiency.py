import polars as pl
import pytest

from embedpyramid.config import load_config
from embedpyramid.efficiency import (
    EFFICIENCY_SCHEMA,
    cost_axis,
    cost_quality_svg,
    efficiency_frame,
    efficiency_row,
    pareto_front,
    query_latency,
)
from embedpyramid.encode import load_encoder


def table_metadata(rows: int, seconds: float, tokens: int | None, usage: dict | None = None) -> dict:
    return {"rows": rows, "seconds": seconds, "tokens": tokens, "dim": 384, "threads": 2, "batch_size": 64,
            "peak_rss_bytes": 10 * rows, "api_usage": usage}


SEARCH = {"metric": "inner_product", "queries_per_second": 1500.0, "threads": 2}


def usage(requests: int, tokens: int, billed: int, cached: int = 0) -> dict:
    return {"requests": requests, "retries": 1, "texts_sent": 0, "texts_cached": cached, "tokens_billed": billed,
            "tokens": tokens, "texts_without_tokens": 0, "request_seconds": [0.1, 0.2, 0.3, 0.4]}


def test_a_local_card_costs_device_seconds_priced_only_when_asked(write_configs, default_models):
    priced = {**default_models["minilm-l6"], "run": {**default_models["minilm-l6"]["run"], "price_per_device_hour": 3.6}}
    config = load_config(write_configs(models={"local": default_models["minilm-l6"], "priced": priced}))
    documents, queries = table_metadata(1000, 20.0, 50_000), table_metadata(200, 2.0, 4_000)
    row = efficiency_row(config.models["priced"], "d", documents, queries, SEARCH, None)
    assert row["documents_per_second"] == 50.0 and row["document_tokens_per_second"] == 2500.0
    assert row["queries_per_second_encoded"] == 100.0 and row["query_tokens_per_second"] == 2000.0
    assert row["device_seconds"] == 22.0 and row["cost_basis"] == "device-seconds"
    assert row["cost"] == pytest.approx(3.6 * 22 / 3600) and row["reembed_cost"] == pytest.approx(3.6 * 20 / 3600)
    assert row["bytes_per_vector"] == 384 * 4 and row["corpus_vector_bytes"] == 1000 * 384 * 4
    assert row["search_qps"] == 1500.0 and row["encode_peak_rss_bytes"] == 10_000
    unpriced = efficiency_row(config.models["local"], "d", documents, queries, SEARCH, None)
    assert unpriced["cost"] is None and unpriced["reembed_device_seconds"] == 20.0
    assert set(row) == set(EFFICIENCY_SCHEMA)


def test_a_remote_card_costs_its_price_times_the_tokens_the_api_reported(write_configs):
    card = {"backend": "http", "source": {"url": "https://api.example.com/v1/embeddings", "model": "m"},
            "api": {"price_per_million_tokens": 0.5}, "run": {"batch_size": 16}}
    model = load_config(write_configs(models={"api": card})).models["api"]
    documents = table_metadata(1000, 30.0, None, usage(63, 80_000, 60_000, cached=250))
    queries = table_metadata(100, 3.0, None, usage(7, 1_000, 1_000))
    row = efficiency_row(model, "d", documents, queries, SEARCH, None)
    assert row["cost_basis"] == "api tokens" and row["device"] == "remote" and row["device_seconds"] is None
    assert row["cost"] == pytest.approx(0.5 * 81_000 / 1e6) and row["reembed_cost"] == pytest.approx(0.5 * 80_000 / 1e6)
    assert (row["api_requests"], row["api_retries"], row["texts_from_cache"], row["tokens_billed"]) == (70, 2, 250, 61_000)
    # Batch-1 timing would bill the API: the request latency seen during the encode is reported instead.
    assert row["latency_p50_ms"] == pytest.approx(250.0) and "per API request at batch 16" in row["latency_basis"]


def test_query_latency_is_batch_one_warm_and_repeated(write_configs):
    card = {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 8}}
    encoder = load_encoder(load_config(write_configs(models={"toy": card})).models["toy"])
    latency = query_latency(encoder, [f"query {i}" for i in range(30)], queries=10, repeats=3, seed=1)
    assert encoder._encode.__self__.calls == 1 + 10 * 3  # one warm-up call, then each query alone, 3 times
    assert 0 < latency.p50_ms <= latency.p95_ms and (latency.queries, latency.repeats, latency.seed) == (10, 3, 1)


def test_pareto_front_keeps_the_models_nothing_beats_on_both():
    table = pl.DataFrame({"model": ["a", "b", "c", "d", "e"], "cost": [1.0, 2.0, 3.0, 2.0, 5.0],
                          "quality": [0.30, 0.50, 0.45, 0.40, 0.60]})
    assert pareto_front(table, "cost", "quality")["model"].to_list() == ["a", "b", "e"]
    svg = cost_quality_svg(table, "cost", "quality", title="t", xlabel="cost", ylabel="nDCG@10")
    assert svg.startswith("<svg") and svg.count("<circle") == 5 and "<polyline" in svg


def test_the_cost_axis_is_money_only_when_every_model_has_a_price():
    frame = efficiency_frame([])
    assert frame.schema == pl.Schema(EFFICIENCY_SCHEMA)
    priced = pl.DataFrame({"reembed_cost": [0.1, 0.2], "document_seconds": [1.0, 2.0]})
    assert cost_axis(priced)[0] == "reembed_cost"
    assert cost_axis(priced.with_columns(pl.Series("reembed_cost", [0.1, None])))[0] == "document_seconds"
