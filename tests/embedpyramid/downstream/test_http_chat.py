"""The HTTP generator and judge against a real local server: valid, slow, rate-limited and
malformed replies; the cache; and the API key in no artefact, cache file or log."""

import json
import logging
import re
from collections import Counter

import polars as pl
import pytest
from stub_server import Reply, StubServer

from embedpyramid.config import ConfigError, EndpointConfig, GeneratorConfig, JudgeConfig, MetricConventions
from embedpyramid.downstream import (
    Answer,
    ChatEndpoint,
    Context,
    HttpGenerator,
    Passage,
    build_generator,
    build_judge,
    evaluate_downstream,
    write_downstream,
)
from embedpyramid.http import HttpError

KEY = "sk-stub-5ecret-0123456789"
ENDPOINT = {"url_env": "TEST_LLM_URL", "model_env": "TEST_LLM_MODEL", "key_env": "TEST_LLM_KEY",
            "attempts": 3, "backoff_seconds": 0.25, "timeout_seconds": 0.5}
CORPUS = pl.DataFrame({"doc_id": ["d1", "d2", "d3"], "title": ["", "", ""],
                       "text": ["Paris is the capital of France.", "Berlin is in Germany.", "Rome is old."]})
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3", "q4"],
                        "text": ["capital of France?", "where is Berlin?", "how old is Rome?", "capital of Italy?"]})
QRELS = pl.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "doc_id": ["d1", "d2", "d3", "d3"], "relevance": [1] * 4},
                     schema_overrides={"relevance": pl.Int32})
RUN = pl.DataFrame({"query_id": [q for q in ["q1", "q2", "q3", "q4"] for _ in range(3)],
                    "doc_id": ["d1", "d2", "d3", "d2", "d1", "d3", "d3", "d1", "d2", "d1", "d2", "d3"],
                    "score": [0.9, 0.5, 0.1] * 4, "rank": [1, 2, 3] * 4})


def completion(content):
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


class ScriptedModel:
    """Answers like a chat model; the script decides per (role, query, attempt) what goes wrong."""

    def __init__(self):
        self.attempts = Counter()

    def __call__(self, request):
        messages = request.json["messages"]
        role = "judge" if messages[0]["content"].startswith("You grade") else "generator"
        query = re.search(r"Question: (.*)\n", messages[1]["content"]).group(1)
        self.attempts[role, query] += 1
        attempt = self.attempts[role, query]
        key = request.headers["Authorization"].removeprefix("Bearer ")
        if role == "generator":
            if query == "where is Berlin?" and attempt == 1:
                return Reply(json=completion("too late"), delay=1.5)  # slower than the 0.5 s timeout
            return Reply(json=completion("The answer is in [1], see also [7]."))
        if query == "capital of France?" and attempt == 1:
            return Reply(status=429, json={"error": "rate limited"}, headers={"Retry-After": "2"})
        if query == "how old is Rome?":
            return Reply(json=completion(f"I cannot grade this. My key is {key}."))  # malformed, echoes the key
        if query == "capital of Italy?":
            return Reply(body=b"<html>proxy error</html>")  # malformed: not JSON at all
        return Reply(json=completion('{"relevance": 4, "ranking": 5, "coverage": 3, "rationale": "fine"}'))


@pytest.fixture
def llm(monkeypatch):
    model = ScriptedModel()
    with StubServer(model) as server:
        monkeypatch.setenv("TEST_LLM_URL", server.url + "/v1")
        monkeypatch.setenv("TEST_LLM_MODEL", "stub-model")
        monkeypatch.setenv("TEST_LLM_KEY", KEY)
        yield server


def evaluate(cache_dir, waits, prompt_version="judge-v1"):
    generator = build_generator(GeneratorConfig(kind="http", endpoint=ENDPOINT), CORPUS, cache_dir=cache_dir,
                                sleep=waits.append)
    judge_config = JudgeConfig(kind="http", endpoint=ENDPOINT, prompt_version=prompt_version)
    judge = build_judge(judge_config, QRELS, 2, MetricConventions(), cache_dir=cache_dir, sleep=waits.append)
    return evaluate_downstream(RUN, QUERIES, CORPUS, QRELS, None, generator=generator, judge=judge, dataset="toy",
                               model="m@1", system="exact", k=2, conventions=MetricConventions())


def test_valid_slow_rate_limited_and_malformed_replies_end_to_end(llm, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    waits: list[float] = []
    result = evaluate(tmp_path / "cache", waits)

    # Rate limited: the judge of q1 waited the server's Retry-After; slow: the generator of q2 timed out once.
    assert 2.0 in waits and 0.25 in waits
    assert result.manifest["traffic"]["generator"]["retries"] == 1
    # Citations: [1] is the top passage, [7] names no passage of the 2-deep context.
    answers = {row["query_id"]: row for row in result.answers.iter_rows(named=True)}
    assert answers["q1"]["citations"] == ["d1"] and answers["q1"]["invalid_citations"] == ["[7]"]
    assert answers["q2"]["citations"] == ["d2"]
    # Grades only where the judge answered with valid grades; both malformed replies recorded and counted.
    judge_rows = result.per_query.filter(pl.col("metric").str.starts_with("judge:"))
    assert sorted(set(judge_rows["query_id"])) == ["q1", "q2"]
    assert judge_rows.filter(pl.col("query_id") == "q1").sort("metric")["value"].to_list() == [3.0, 5.0, 4.0]
    assert result.manifest["counts"]["judge_malformed"] == 2
    malformed = result.judgements.filter(pl.col("malformed").is_not_null()).unique("query_id").sort("query_id")
    assert malformed["query_id"].to_list() == ["q3", "q4"]
    assert "no JSON object" in malformed["malformed"][0] and "not JSON" in malformed["malformed"][1]
    assert "***" in malformed["response"][0]  # the echoed key, redacted but kept for audit
    assert sum("malformed reply recorded" in r.message for r in caplog.records) == 2
    # Every query keeps its answer metrics, and the qrels judge grades the same answers for kappa.
    assert set(result.per_query.filter(pl.col("metric") == "answer:citation_precision")["query_id"]) == {"q1", "q2", "q3", "q4"}
    assert [row["criterion"] for row in result.manifest["agreement"]] == ["relevance", "ranking", "coverage"]
    assert result.judgements.filter(pl.col("query_id") == "q1")["reference_grade"].to_list() == [5, 5, 5]
    assert result.manifest["judge"]["model"] == "stub-model" and result.manifest["judge"]["temperature"] == 0.0

    write_downstream(result, tmp_path / "artefacts")
    everything = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in everything) and any("cache" in p.parts for p in everything)
    for path in everything:
        assert KEY.encode() not in path.read_bytes(), f"the API key leaked into {path}"
    assert KEY not in caplog.text


def test_a_rerun_asks_only_what_was_not_cached_and_a_new_prompt_version_asks_again(llm, tmp_path):
    evaluate(tmp_path / "cache", [])
    before = len(llm.requests)
    rerun = evaluate(tmp_path / "cache", [])
    # Only the judge of q4 is asked again: a body that is not JSON is never cached.
    assert len(llm.requests) - before == 1
    assert rerun.manifest["traffic"]["judge"]["cache_hits"] == 3
    evaluate(tmp_path / "cache", [], prompt_version="judge-v2")
    assert len(llm.requests) - before - 1 == 4


def test_missing_environment_and_refused_keys_fail_clearly_without_the_key(monkeypatch, tmp_path):
    monkeypatch.delenv("TEST_LLM_URL", raising=False)
    with pytest.raises(ConfigError, match="TEST_LLM_URL is not set"):
        build_generator(GeneratorConfig(kind="http", endpoint=ENDPOINT), CORPUS)
    with StubServer(lambda request: Reply(status=401, json={"error": f"invalid key {KEY}"})) as server:
        endpoint = ChatEndpoint(server.url, "stub", KEY, EndpointConfig(**ENDPOINT), sleep=lambda s: None)
        generator = HttpGenerator(endpoint, max_tokens=10, prompt_version="v")
        context = Context("q1", "?", (Passage("d1", 1, "text"),))
        with pytest.raises(HttpError) as raised:
            generator.answer(context)
    assert raised.value.status == 401 and "generator, query q1" in str(raised.value) and KEY not in str(raised.value)


def test_a_reply_that_is_not_a_chat_completion_is_a_malformed_answer(tmp_path):
    with StubServer(lambda request: Reply(json={"unexpected": True})) as server:
        endpoint = ChatEndpoint(server.url + "/v1/chat/completions", "stub", KEY, cache_dir=tmp_path)
        assert endpoint.url == server.url + "/v1/chat/completions"
        answer = HttpGenerator(endpoint, max_tokens=10, prompt_version="v").answer(
            Context("q1", "?", (Passage("d1", 1, "text"),)))
    assert answer == Answer("q1", "", malformed=answer.malformed) and "no choices[0].message.content" in answer.malformed
    body = json.loads(server.requests[0].body)
    assert body["temperature"] == 0.0 and body["model"] == "stub" and body["max_tokens"] == 10
