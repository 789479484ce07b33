"""An OpenAI-compatible chat endpoint (``POST <base>/chat/completions``), shared by the HTTP
generator and the HTTP judge, on the project's JSON client.

Requests go out at temperature 0 through :class:`~embedpyramid.http.JsonClient` (retries with
backoff on timeouts, 429 and 5xx, honouring ``Retry-After``; an optional request rate). Each
decoded reply is cached on disk under the sha256 of everything that determines it — endpoint
URL, model, prompt version and template hash, messages, temperature, max tokens — so a rerun asks
nothing twice and a prompt edit never reuses a stale reply. The base URL, the model and the key
come from environment variables; the key is sent only in the ``Authorization`` header and is
redacted from every error, every cached reply and everything returned.

A reply that is not a chat completion with text content (or a body that is not JSON at all) is
*malformed*: returned as such, with the reason, for the caller to record and count.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedpyramid.config import ConfigError, EndpointConfig
from embedpyramid.http import HttpError, JsonClient, RateLimiter, ResponseCache, RetryPolicy, redact, secret_from_env

TEMPERATURE = 0.0
_COMPLETIONS = "/chat/completions"


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    malformed: str | None = None
    cached: bool = False


def _required_env(variable: str, where: str, what: str) -> str:
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ConfigError(f"{where}: environment variable {variable} is not set; export the endpoint's {what} there")
    return value


class ChatEndpoint:
    """One chat model behind an OpenAI-compatible base URL (e.g. ``https://host/v1``)."""

    def __init__(self, base_url: str, model: str, key: str, settings: EndpointConfig = EndpointConfig(), *,
                 cache_dir: Path | None = None, sleep: Callable[[float], None] = time.sleep):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"chat endpoint URL {redact(base_url, [key])!r} must start with http:// or https://")
        self.url = base_url if base_url.rstrip("/").endswith(_COMPLETIONS) else base_url.rstrip("/") + _COMPLETIONS
        self.model = model
        self.secrets = (key,)
        policy = RetryPolicy(settings.attempts, settings.backoff_seconds, settings.max_backoff_seconds,
                             settings.timeout_seconds)
        self.client = JsonClient(self.url, headers={"Authorization": f"Bearer {key}"}, secrets=self.secrets,
                                 policy=policy, limiter=RateLimiter(settings.requests_per_minute), sleep=sleep)
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None

    @classmethod
    def from_environment(cls, settings: EndpointConfig, where: str, *, cache_dir: Path | None = None,
                         sleep: Callable[[float], None] = time.sleep) -> ChatEndpoint:
        """The endpoint named by ``settings``' environment variables; ``where`` (e.g. ``judge.yaml:
        judge.endpoint``) names the setting in errors."""
        return cls(_required_env(settings.url_env, where, "base URL"), _required_env(settings.model_env, where, "model name"),
                   secret_from_env(settings.key_env, where), settings, cache_dir=cache_dir, sleep=sleep)

    def describe(self) -> dict[str, Any]:
        return {"url": self.redact(self.url), "model": self.model, "temperature": TEMPERATURE}

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def counts(self) -> dict[str, int]:
        """Requests sent (attempts, retries) and cache hits/misses so far."""
        return {"attempts": self.client.attempts_made, "retries": self.client.retries_made,
                "cache_hits": self.cache.hits if self.cache else 0, "cache_misses": self.cache.misses if self.cache else 0}

    def complete(self, messages: Sequence[Mapping[str, str]], *, max_tokens: int, prompt: Mapping[str, str],
                 context: str) -> ChatReply:
        """The model's reply to ``messages``. ``prompt`` (version and template hash) goes into the
        cache key; ``context`` (e.g. ``judge, query q12``) names the request in errors. Raises
        :class:`~embedpyramid.http.HttpError` when the endpoint fails for good (not for a
        malformed reply)."""
        payload = {"model": self.model, "messages": [dict(m) for m in messages], "temperature": TEMPERATURE,
                   "max_tokens": max_tokens}
        key = ResponseCache.key("chat-completions", self.url, dict(prompt), payload)
        answer = self.cache.get(key) if self.cache else None
        cached = answer is not None
        if answer is None:
            try:
                answer = self.client.post(payload, context=context)
            except HttpError as error:
                if error.status is not None and 200 <= error.status < 300:
                    return ChatReply(None, f"the reply is not JSON: {error}")
                raise
            answer = json.loads(self.redact(json.dumps(answer)))
            if self.cache:
                self.cache.put(key, answer)
        return _content(answer, cached)


def _content(answer: Any, cached: bool) -> ChatReply:
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        snippet = json.dumps(answer)[:200]
        return ChatReply(None, f"not a chat completion (no choices[0].message.content): {snippet}", cached)
    if not isinstance(content, str) or not content.strip():
        return ChatReply(None, f"the completion's content is empty or not text: {content!r:.200}", cached)
    return ChatReply(content, None, cached)
