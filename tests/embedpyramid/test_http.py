"""The shared JSON client against a real local server: retries, backoff, rate, cache, secrets."""

import time
from email.utils import formatdate

import pytest
from stub_server import Reply, StubServer

from embedpyramid.http import HttpError, JsonClient, RateLimiter, ResponseCache, RetryPolicy, redact, secret_from_env

KEY = "sk-test-0123456789"
FAST = RetryPolicy(attempts=4, backoff_seconds=0.5, max_backoff_seconds=8.0, timeout_seconds=5.0)


def client(url: str, waits: list[float], **kwargs) -> JsonClient:
    return JsonClient(url, headers={"Authorization": f"Bearer {KEY}"}, secrets=(KEY,), policy=FAST,
                      sleep=waits.append, **kwargs)


def test_a_valid_answer_is_decoded_and_the_request_carries_the_payload():
    with StubServer(lambda request: Reply(json={"echo": request.json})) as server:
        answer = client(server.url + "/v1/x", []).post({"input": ["a", "b"]}, context="batch 0")
    assert answer == {"echo": {"input": ["a", "b"]}}
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_rate_limited_and_failing_answers_are_retried_with_backoff_and_retry_after():
    script = iter([Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "3"}),
                   Reply(status=503, json={"error": "busy"}), Reply(status=500, json={}), Reply(json={"ok": 1})])
    waits: list[float] = []
    with StubServer(lambda request: next(script)) as server:
        http = client(server.url, waits)
        assert http.post({}, context="batch 1") == {"ok": 1}
    assert waits == [3.0, 1.0, 2.0]  # Retry-After first, then 0.5 * 2**1, 0.5 * 2**2
    assert (http.attempts_made, http.retries_made) == (4, 3)



def test_a_retry_after_date_is_a_wait_until_that_date_and_an_unreadable_one_falls_back_to_backoff():
    def two_seconds_ahead() -> Reply:
        # HTTP dates are whole seconds: the date is set at the start of a second, so the client's
        # wait is two seconds less the reply's own latency, however long the server took to start.
        time.sleep(1.0 - time.time() % 1.0)
        return Reply(status=503, json={}, headers={"Retry-After": formatdate(int(time.time()) + 2, usegmt=True)})

    script = iter([two_seconds_ahead, Reply(status=429, json={}, headers={"Retry-After": "soon"}),
                   Reply(status=429, json={}, headers={"Retry-After": "60"}), Reply(json={"ok": 1})])
    waits: list[float] = []

    def reply(request: object) -> Reply:
        step = next(script)
        return step() if callable(step) else step

    with StubServer(reply) as server:
        http = client(server.url, waits)
        assert http.post({}, context="batch 4") == {"ok": 1}
    assert 1.0 < waits[0] <= 2.0  # until the date, less the part of the second already gone
    assert waits[1:] == [1.0, 8.0]  # the computed backoff, then Retry-After capped at max_backoff_seconds
    assert (http.attempts_made, http.retries_made) == (4, 3)

def test_a_client_error_fails_at_once_naming_context_and_status_but_never_the_key():
    with (StubServer(lambda request: Reply(status=401, json={"error": f"bad key {KEY}"})) as server,
          pytest.raises(HttpError) as raised):
        client(server.url, []).post({}, context="batch 7 (texts 448-511)")
    message = str(raised.value)
    assert raised.value.status == 401 and "batch 7 (texts 448-511)" in message and "HTTP 401" in message
    assert "after 1 attempt:" in message and KEY not in message and "***" in message


def test_retries_run_out_and_a_body_that_is_not_json_is_a_clear_error():
    with (StubServer(lambda request: Reply(status=502, body=b"<html>gateway</html>")) as server,
          pytest.raises(HttpError, match=r"failed after 4 attempts: HTTP 502")):
        client(server.url, []).post({}, context="batch 2")
    with StubServer(lambda request: Reply(body=b"not json")) as server, pytest.raises(HttpError, match="not JSON"):
        client(server.url, []).post({}, context="batch 3")


def test_a_slow_server_times_out_and_is_retried():
    calls = []

    def slow_then_fast(request):
        calls.append(1)
        return Reply(json={"ok": True}, delay=3.0 if len(calls) == 1 else 0.0)

    policy = RetryPolicy(attempts=2, backoff_seconds=0.0, timeout_seconds=1.5)
    with StubServer(slow_then_fast) as server:
        http = JsonClient(server.url, policy=policy, sleep=lambda s: None)
        assert http.post({}, context="batch 0") == {"ok": True}
    assert http.retries_made == 1


def test_rate_limiter_spaces_requests():
    now, waits = [100.0], []

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(120, clock=lambda: now[0], sleep=sleep)  # one request per 0.5 s
    for _ in range(3):
        limiter.wait()
    assert waits == [0.5, 0.5]
    unlimited = RateLimiter(None, clock=lambda: now[0], sleep=sleep)
    unlimited.wait(), unlimited.wait()
    assert waits == [0.5, 0.5]


def test_response_cache_round_trips_and_counts(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    key = ResponseCache.key("card-hash", "https://api.example/v1/embeddings", "some text")
    assert cache.get(key) is None
    cache.put(key, {"embedding": [0.5, -0.25]})
    assert cache.get(key) == {"embedding": [0.5, -0.25]}
    assert (cache.hits, cache.misses) == (1, 1)
    assert ResponseCache.key("a", "b") != ResponseCache.key("b", "a")


def test_secrets_come_from_the_environment_and_are_redacted(monkeypatch):
    monkeypatch.delenv("EMBEDPYRAMID_TEST_KEY", raising=False)
    with pytest.raises(HttpError, match="EMBEDPYRAMID_TEST_KEY is not set"):
        secret_from_env("EMBEDPYRAMID_TEST_KEY", "model card 'titan'")
    monkeypatch.setenv("EMBEDPYRAMID_TEST_KEY", KEY)
    assert secret_from_env("EMBEDPYRAMID_TEST_KEY", "model card 'titan'") == KEY
    assert redact(f"Authorization: Bearer {KEY}", [KEY, ""]) == "Authorization: Bearer ***"
