"""The ``http`` backend: OpenAI-compatible ``/v1/embeddings`` endpoints.

Request: ``POST url`` with ``{"model": ..., "input": [texts], "dimensions": n?}`` and the key
from the card's ``api.key_env`` as a bearer token. Answer: ``{"data": [{"index": i, "embedding":
[...]}, ...], "usage": {"prompt_tokens": n}}``; items are put back in ``index`` order. The API
reports tokens per request: they are split over its texts in proportion to their characters
(:func:`~embedpyramid.encode.remote.allocate_tokens`), so the total stays exact.
Retries with backoff on 408/425/429/5xx and the request rate come from
:class:`embedpyramid.http.JsonClient`.
"""

from __future__ import annotations

from typing import Any

from embedpyramid.config import HttpSource, ResolvedModel
from embedpyramid.encode.base import EncodeError
from embedpyramid.encode.remote import Answer, RemoteEncoder, allocate_tokens
from embedpyramid.http import HttpError, JsonClient, RetryPolicy, secret_from_env


class HttpEncoder(RemoteEncoder):
    def __init__(self, model: ResolvedModel):
        super().__init__(model, request_size=model.card.run.batch_size)
        source = model.card.source
        assert isinstance(source, HttpSource)
        self.source = source
        key = ""
        if self.api.key_env is not None:
            try:
                key = secret_from_env(self.api.key_env, f"model card {model.name!r}")
            except HttpError as error:
                raise EncodeError(str(error)) from None
        self.client = JsonClient(
            source.url, headers={"Authorization": f"Bearer {key}"} if key else {}, secrets=(key,) if key else (),
            policy=RetryPolicy(attempts=self.api.max_attempts, timeout_seconds=self.api.timeout_seconds),
        )

    def _request(self, texts: list[str], context: str) -> Answer:
        payload: dict[str, Any] = {"model": self.source.model, "input": texts}
        if self.source.dimensions is not None:
            payload["dimensions"] = self.source.dimensions
        retries_before = self.client.retries_made
        try:
            answer = self.client.post(payload, context=context)
        except HttpError as error:
            raise EncodeError(f"model card {self.name!r}: {error}") from None
        finally:
            self.usage.retries += self.client.retries_made - retries_before
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise self.fail(context, "the answer has no 'data' list of objects")
        if all(isinstance(item.get("index"), int) for item in data):
            if sorted(item["index"] for item in data) != list(range(len(data))):
                raise self.fail(context, f"the answer's indexes {sorted(item['index'] for item in data)} are not "
                                         f"0..{len(data) - 1}")
            data = sorted(data, key=lambda item: item["index"])
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        total = usage.get("prompt_tokens", usage.get("total_tokens"))
        tokens = allocate_tokens(total, texts) if isinstance(total, int) and len(data) == len(texts) else [None] * len(data)
        return Answer([item.get("embedding") for item in data], tokens)
