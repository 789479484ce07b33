"""JSON over HTTP for remote models, generators and judges: retries with backoff, a request
rate, a response cache on disk, and secrets kept out of every message.

Remote backends (embedding APIs, chat endpoints) share one client so that they behave the
same under failure: a retryable answer (timeouts, connection resets, HTTP 408/425/429/5xx) is
retried with exponential backoff, honouring ``Retry-After``; anything else fails at once with
an :class:`HttpError` that names the endpoint, the request's context (e.g. the batch) and the
status, and never carries an API key (every message passes through :func:`redact`). Only the
standard library is used, so the core stays installable without an HTTP package.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock
from typing import Any

from embedpyramid.hashing import sha256_json
from embedpyramid.store import read_json, write_json

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_BODY_CHARS = 300


class HttpError(RuntimeError):
    """A request failed for good (not retryable, or out of attempts); the message names the
    endpoint, the context and the status, never a secret."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def secret_from_env(variable: str, where: str) -> str:
    """The value of environment variable ``variable``; a clear error naming it (never a value)
    when it is unset or empty. ``where`` says who needs it (e.g. ``model card 'titan'``)."""
    value = os.environ.get(variable, "")
    if not value:
        raise HttpError(f"{where}: environment variable {variable} is not set; export the API key there")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry: ``attempts`` in all, waiting ``backoff_seconds``
    before the first retry and doubling up to ``max_backoff_seconds`` (a ``Retry-After`` header
    replaces the computed wait, capped the same way); each attempt times out after
    ``timeout_seconds``."""

    attempts: int = 5
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 30.0
    timeout_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1; got {self.attempts}")
        if self.backoff_seconds < 0 or self.max_backoff_seconds < 0 or self.timeout_seconds <= 0:
            raise ValueError("backoff and max_backoff must be >= 0 seconds and timeout > 0 seconds")

    def wait(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        computed = self.backoff_seconds * 2 ** (retry - 1) if retry_after is None else retry_after
        return min(max(computed, 0.0), self.max_backoff_seconds)


class RateLimiter:
    """Spaces requests at least ``60 / requests_per_minute`` seconds apart (thread-safe); no
    limit when ``requests_per_minute`` is None."""

    def __init__(self, requests_per_minute: float | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if requests_per_minute is not None and requests_per_minute <= 0:
            raise ValueError(f"requests_per_minute must be positive; got {requests_per_minute}")
        self.interval = 0.0 if requests_per_minute is None else 60.0 / requests_per_minute
        self._clock, self._sleep, self._lock = clock, sleep, Lock()
        self._next = float("-inf")

    def wait(self) -> None:
        with self._lock:
            now = self._clock()
            if now < self._next:
                self._sleep(self._next - now)
                now = self._next
            self._next = now + self.interval


@dataclass
class JsonClient:
    """POSTs JSON to one endpoint and returns the decoded JSON answer.

    ``headers`` are sent with every request (an ``Authorization`` header among them);
    ``secrets`` are the strings that must never appear in an error (the API key). ``sleep`` is
    injectable so tests need not wait.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(None))
    sleep: Callable[[float], None] = time.sleep
    attempts_made: int = field(default=0, init=False)
    retries_made: int = field(default=0, init=False)

    def post(self, payload: Any, *, context: str) -> Any:
        """The JSON answer to ``payload``; ``context`` (e.g. ``"batch 3 (texts 192-255)"``) names
        the request in errors. Raises :class:`HttpError` when it fails for good."""
        body = json.dumps(payload).encode("utf-8")
        last_problem = "no attempt made"
        for attempt in range(1, self.policy.attempts + 1):
            self.limiter.wait()
            self.attempts_made += 1
            status, retry_after, problem, answer = self._attempt(body)
            if problem is None:
                return answer
            last_problem = problem
            if status is not None and status not in RETRYABLE_STATUSES:
                break
            if attempt < self.policy.attempts:
                self.retries_made += 1
                self.sleep(self.policy.wait(attempt, retry_after))
        raise HttpError(
            redact(f"POST {self.url} ({context}) failed after {attempt} attempt{'s' * (attempt > 1)}: "
                   f"{last_problem}", self.secrets),
            status=status,
        )

    def _attempt(self, body: bytes) -> tuple[int | None, float | None, str | None, Any]:
        """(status, Retry-After seconds, problem or None, decoded answer)."""
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json", **self.headers})
        try:
            with urllib.request.urlopen(request, timeout=self.policy.timeout_seconds) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")[:_BODY_CHARS]
            return error.code, _retry_after(error.headers.get("Retry-After")), f"HTTP {error.code}: {text}", None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            return None, None, f"no answer ({type(reason).__name__}: {reason})", None
        try:
            return status, None, None, json.loads(raw)
        except json.JSONDecodeError:
            snippet = raw[:_BODY_CHARS].decode("utf-8", "replace")
            return status, None, f"HTTP {status} with a body that is not JSON: {snippet!r}", None


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: fall back to the computed backoff
        return None


class ResponseCache:
    """Decoded JSON answers on disk, one file per key, written atomically: a rerun that asks the
    same question of the same endpoint costs nothing. The key is the sha256 of everything that
    determines the answer (see :meth:`key`), so nothing is cached under a name that can go stale."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(*parts: Any) -> str:
        return sha256_json(list(parts))

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        path = self.path(key)
        if not path.is_file():
            self.misses += 1
            return None
        self.hits += 1
        return read_json(path)

    def put(self, key: str, value: Any) -> None:
        write_json(value, self.path(key))
