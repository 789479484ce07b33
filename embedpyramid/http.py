"""JSON over HTTP for remote models, generators and judges: retries with backoff, a request
rate, a response cache on disk, and secrets kept out of every message.

Remote backends (embedding APIs, chat endpoints) share one client so that they behave the
same under failure: a retryable answer (timeouts, connection resets, HTTP 408/425/429/5xx) is
retried with exponential backoff, honouring ``Retry-After`` in both its forms (delta-seconds
and HTTP-date); anything else fails at once with an :class:`HttpError` that names the
endpoint, the request's context (e.g. the batch) and the status, and never carries an API key
(every message passes through :func:`redact`). The transport is ``requests`` and the retry
decisions are urllib3's :class:`~urllib3.util.Retry` (which errors and statuses to retry, when
retries run out, how to read ``Retry-After``); only the waits follow :class:`RetryPolicy`, and
they go through an injectable ``sleep`` so that tests record them without waiting. The two
libraries are imported by the first client, not by this module: the importers of the encoders
(the Dagster definitions, a warm run with nothing to do) need not pay for them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from threading import Lock, local
from typing import TYPE_CHECKING, Any

from embedpyramid.hashing import sha256_json
from embedpyramid.store import read_json, write_json

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_BODY_CHARS = 300

if TYPE_CHECKING:
    import requests
    from urllib3.util import Retry


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
    injectable so tests need not wait. One ``requests`` session per client keeps connections
    alive between requests; POST is retried because every caller's request is idempotent (an
    embedding, a completion at temperature 0).
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(None))
    sleep: Callable[[float], None] = time.sleep
    attempts_made: int = field(default=0, init=False)
    retries_made: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._session = _retrying_session(self.policy, self._before_retry)
        self._session.headers.update({"Content-Type": "application/json", **self.headers})
        self._counts = Lock()
        self._call = local()  # attempts of the post under way in this thread

    def post(self, payload: Any, *, context: str) -> Any:
        """The JSON answer to ``payload``; ``context`` (e.g. ``"batch 3 (texts 192-255)"``) names
        the request in errors. Raises :class:`HttpError` when it fails for good."""
        import requests  # already loaded by the session

        self._call.attempts = 0
        self._start_attempt()
        try:
            response = self._session.post(self.url, data=json.dumps(payload).encode("utf-8"),
                                          timeout=self.policy.timeout_seconds)
        except requests.RequestException as error:
            status, problem, answer = None, _no_answer(error), None
        else:
            status, problem, answer = _decoded(response)
        if problem is None:
            return answer
        attempts = self._call.attempts
        raise HttpError(
            redact(f"POST {self.url} ({context}) failed after {attempts} attempt{'s' * (attempts > 1)}: "
                   f"{problem}", self.secrets),
            status=status,
        )

    def _start_attempt(self) -> None:
        self.limiter.wait()
        self._call.attempts += 1
        with self._counts:
            self.attempts_made += 1

    def _before_retry(self, seconds: float) -> None:
        with self._counts:
            self.retries_made += 1
        self.sleep(seconds)
        self._start_attempt()


def _retrying_session(policy: RetryPolicy, before_retry: Callable[[float], None]) -> requests.Session:
    """A session whose requests urllib3 retries as ``policy`` says, handing each wait to
    ``before_retry``."""
    import requests
    from requests.adapters import HTTPAdapter

    retry = _policy_retry()(total=policy.attempts - 1, connect=None, read=None, status=None, other=None,
                            allowed_methods=frozenset({"POST"}), status_forcelist=RETRYABLE_STATUSES,
                            respect_retry_after_header=True, raise_on_status=False, policy=policy,
                            before_retry=before_retry)
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@cache
def _policy_retry() -> type[Retry]:
    """urllib3's :class:`~urllib3.util.Retry` with :class:`RetryPolicy`'s waits, defined on first
    use (see the module docstring)."""
    from urllib3.exceptions import InvalidHeader
    from urllib3.util import Retry

    class PolicyRetry(Retry):
        """urllib3's retry decisions with :class:`RetryPolicy`'s waits: the first retry already
        waits ``backoff_seconds`` (urllib3 would retry at once), a parsable ``Retry-After`` (even
        ``0``) replaces the computed wait, both capped at ``max_backoff_seconds``. Instead of
        sleeping itself it hands each wait to ``before_retry``."""

        RETRY_AFTER_STATUS_CODES = RETRYABLE_STATUSES  # a Retry-After never makes another status retryable

        def __init__(self, *args: Any, policy: RetryPolicy | None = None,
                     before_retry: Callable[[float], None] | None = None, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.policy = policy or RetryPolicy()
            self.before_retry = before_retry or time.sleep

        def new(self, **kw: Any) -> PolicyRetry:
            retry = super().new(**kw)
            retry.policy, retry.before_retry = self.policy, self.before_retry
            return retry

        def get_backoff_time(self) -> float:
            return self.policy.wait(len(self.history), None)

        def sleep(self, response: Any = None) -> None:
            retry_after = None
            if response is not None and self.respect_retry_after_header:
                try:
                    retry_after = self.get_retry_after(response)
                except InvalidHeader:  # neither seconds nor a date: the computed backoff
                    retry_after = None
            self.before_retry(self.policy.wait(len(self.history), retry_after))

    return PolicyRetry


def _decoded(response: requests.Response) -> tuple[int, str | None, Any]:
    """(status, problem or None, decoded answer) of the last attempt's response."""
    status, raw = response.status_code, response.content
    if status >= 400:
        return status, f"HTTP {status}: {raw.decode('utf-8', 'replace')[:_BODY_CHARS]}", None
    try:
        return status, None, json.loads(raw)
    except json.JSONDecodeError:
        snippet = raw[:_BODY_CHARS].decode("utf-8", "replace")
        return status, f"HTTP {status} with a body that is not JSON: {snippet!r}", None


def _no_answer(error: requests.RequestException) -> str:
    """What went wrong when no response came back; urllib3 wraps the last failure in a
    ``MaxRetryError`` whose ``reason`` it is."""
    reason = error.args[0] if error.args else error
    reason = getattr(reason, "reason", reason)
    return f"no answer ({type(reason).__name__}: {reason})"


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
