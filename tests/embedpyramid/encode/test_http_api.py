"""The http backend against a real HTTP server on 127.0.0.1: valid, rate-limited, failing and
malformed answers of an OpenAI-compatible /v1/embeddings endpoint."""

import time

import numpy as np
import pytest
from stub_server import Reply, StubServer
from toy_encoders import CharacterNgrams

from embedpyramid.config import load_config
from embedpyramid.data import EncodingInputs
from embedpyramid.encode import (
    EncodeError,
    embed_table,
    load_encoder,
    read_embeddings,
    response_cache_directory,
    table_path,
)
from embedpyramid.encode.remote import allocate_tokens
from embedpyramid.store import ArtifactStore

KEY = "sk-test-3f9a0c1d2e"
TEXTS = ["What is AI?", "Tell me a joke about computers, please.", "Hi", "Are you sentient?", "Why?"]
IDS = [f"q{i}" for i in range(len(TEXTS))]
DIM = 16


def embeddings_reply(request, *, reverse=True, dim=DIM) -> Reply:
    texts = request.json["input"]
    vectors = CharacterNgrams(dim).encode(texts)
    data = [{"object": "embedding", "index": i, "embedding": vectors[i].tolist()} for i in range(len(texts))]
    usage = sum(len(text.split()) + 1 for text in texts)
    return Reply(json={"object": "list", "data": data[::-1] if reverse else data, "model": request.json["model"],
                       "usage": {"prompt_tokens": usage, "total_tokens": usage}})


def http_card(url: str, **api) -> dict:
    return {"backend": "http", "source": {"url": url + "/v1/embeddings", "model": "stub-embed"},
            "query_prompt": "query: ", "api": {"key_env": "STUB_API_KEY", "price_per_million_tokens": 0.02, **api},
            "run": {"batch_size": 2}}


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("STUB_API_KEY", KEY)
    return KEY


def model_for(write_configs, card):
    return load_config(write_configs(models={"remote": card})).models["remote"]


def test_valid_answers_are_put_in_order_cached_and_cost_nothing_again(write_configs, tmp_path, api_key):
    with StubServer(embeddings_reply) as server:
        model = model_for(write_configs, http_card(server.url))
        store, inputs = ArtifactStore(tmp_path), EncodingInputs(IDS, TEXTS, "a" * 64)
        first = embed_table(store, model, "query", inputs, lambda: load_encoder(model))
        requests = list(server.requests)
        for raw in (False, True):
            table_path(store, model, "query", inputs.table_sha, raw=raw).unlink()
        again = embed_table(store, model, "query", inputs, lambda: load_encoder(model))
    assert len(requests) == 3 and len(server.requests) == 3  # 5 texts at batch 2; the rerun asked nothing
    assert {r.headers["Authorization"] for r in requests} == {f"Bearer {KEY}"}
    assert requests[0].path == "/v1/embeddings" and requests[0].json["model"] == "stub-embed"
    assert sorted(t for r in requests for t in r.json["input"]) == sorted("query: " + t for t in TEXTS)
    _, vectors = read_embeddings(first.path)
    expected = CharacterNgrams(DIM).encode(["query: " + t for t in TEXTS])
    np.testing.assert_allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)
    billed = sum(len(t.split()) + 1 for r in requests for t in r.json["input"])
    usage = first.metadata["api_usage"]
    assert (usage["requests"], usage["tokens_billed"], usage["tokens"], usage["texts_cached"]) == (3, billed, billed, 0)
    rerun = again.metadata["api_usage"]
    assert (rerun["requests"], rerun["tokens_billed"], rerun["tokens"], rerun["texts_cached"]) == (0, 0, billed, 5)
    np.testing.assert_array_equal(read_embeddings(again.path)[1], vectors)
    assert any(response_cache_directory(store).rglob("*.json"))


def test_rate_limited_answers_are_retried_after_the_wait_they_ask_for(write_configs, tmp_path, api_key):
    answers = iter([Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "0"})] * 2)

    def handler(request):
        return next(answers, None) or embeddings_reply(request)

    with StubServer(handler) as server:
        model = model_for(write_configs, http_card(server.url, max_attempts=3))
        result = embed_table(ArtifactStore(tmp_path), model, "query", EncodingInputs(IDS[:2], TEXTS[:2], "b" * 64),
                             lambda: load_encoder(model))
    assert len(server.requests) == 3 and result.metadata["api_usage"]["retries"] == 2
    assert result.metadata["problems"] == []


def test_requests_per_minute_spaces_the_requests(write_configs, tmp_path, api_key):
    with StubServer(embeddings_reply) as server:
        model = model_for(write_configs, http_card(server.url, requests_per_minute=600))
        start = time.perf_counter()
        embed_table(ArtifactStore(tmp_path), model, "query", EncodingInputs(IDS, TEXTS, "c" * 64),
                    lambda: load_encoder(model))
        elapsed = time.perf_counter() - start
    assert len(server.requests) == 3 and elapsed >= 0.2  # three requests at least 0.1 s apart


def test_a_failing_endpoint_is_an_error_naming_the_request_and_nothing_is_kept(write_configs, tmp_path, api_key):
    def handler(request):
        return Reply(status=503, json={"error": f"unavailable for {request.headers['Authorization']}"},
                     headers={"Retry-After": "0"})

    with StubServer(handler) as server:
        model = model_for(write_configs, http_card(server.url, max_attempts=2))
        store = ArtifactStore(tmp_path)
        with pytest.raises(EncodeError) as raised:
            embed_table(store, model, "query", EncodingInputs(IDS, TEXTS, "d" * 64), lambda: load_encoder(model))
    message = str(raised.value)
    assert message.startswith("model card 'remote': POST ") and "(request 1 (2 texts, first 'query: " in message
    assert "failed after 2 attempts: HTTP 503" in message and KEY not in message and "Bearer ***" in message
    assert not response_cache_directory(store).exists() and not list((tmp_path / "embeddings").rglob("query-*.parquet"))


@pytest.mark.parametrize(("answer", "problem"), [
    ({"object": "list"}, "the answer has no 'data' list of objects"),
    ({"data": [{"index": 0, "embedding": [0.1] * DIM}]}, "the answer holds 1 embeddings for 2 texts"),
    ({"data": [{"index": 0, "embedding": [0.1] * DIM}, {"index": 0, "embedding": [0.2] * DIM}]},
     r"the answer's indexes \[0, 0\] are not 0..1"),
    ({"data": [{"index": 0, "embedding": [0.1] * DIM}, {"index": 1, "embedding": ["x"] * DIM}]},
     "embedding 1 is not a non-empty list of numbers"),
    ({"data": [{"index": 0, "embedding": [0.1] * DIM}, {"index": 1, "embedding": []}]},
     "embedding 1 is not a non-empty list of numbers"),
    ({"data": [{"index": 0, "embedding": [float("nan")] * DIM}, {"index": 1, "embedding": [0.1] * DIM}]},
     "embedding 0 contains NaN or infinity"),
    (b"<html>gateway</html>", "HTTP 200 with a body that is not JSON"),
])
def test_malformed_or_partial_answers_are_errors_never_zero_vectors(write_configs, tmp_path, api_key, answer, problem):
    reply = Reply(body=answer) if isinstance(answer, bytes) else Reply(json=answer)
    with StubServer(lambda request: reply) as server:
        model = model_for(write_configs, http_card(server.url, max_attempts=1))
        store = ArtifactStore(tmp_path)
        with pytest.raises(EncodeError, match=problem) as raised:
            embed_table(store, model, "query", EncodingInputs(IDS[:2], TEXTS[:2], "e" * 64), lambda: load_encoder(model))
    assert "model card 'remote'" in str(raised.value) and "request 1 (2 texts" in str(raised.value)
    assert not response_cache_directory(store).exists()


def test_the_card_dimension_is_asked_for_and_checked(write_configs, tmp_path, api_key):
    with StubServer(lambda request: embeddings_reply(request, dim=8)) as server:
        card = http_card(server.url)
        card["source"]["dimensions"] = 12
        model = model_for(write_configs, card)
        with pytest.raises(EncodeError, match="embedding 0 has 8 dimensions, the card asks for 12"):
            embed_table(ArtifactStore(tmp_path), model, "query", EncodingInputs(IDS[:1], TEXTS[:1], "f" * 64),
                        lambda: load_encoder(model))
    assert server.requests[0].json["dimensions"] == 12


def test_a_missing_key_names_the_variable_not_a_value(write_configs, monkeypatch):
    monkeypatch.delenv("STUB_API_KEY", raising=False)
    model = model_for(write_configs, http_card("http://127.0.0.1:9"))
    with pytest.raises(EncodeError, match="model card 'remote': environment variable STUB_API_KEY is not set"):
        load_encoder(model)


def test_token_allocation_keeps_the_request_total():
    assert allocate_tokens(10, ["aaaa", "a", "aaaaa"]) == [4, 1, 5]
    shares = allocate_tokens(7, ["ab", "ab", "ab"])
    assert sum(shares) == 7 and max(shares) - min(shares) <= 1
