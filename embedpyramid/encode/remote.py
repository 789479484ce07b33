"""What the remote backends (``http``, ``bedrock``) share: prompts, the on-disk response cache,
request accounting, and the checks that turn a malformed answer into an error.

Each text's vector is cached under the sha256 of (backend, source identity, text sent): a rerun
— or another card that only changes a ranking setting — asks the API nothing again. The cache
files of one answer are written by a few threads while the next request is under way (file
creation, not the API, is the slow part on a busy disk); :meth:`RemoteEncoder.flush` waits for
them, and the single pass calls it before it writes a shard. A malformed or partial answer is an
:class:`~embedpyramid.encode.base.EncodeError` naming the request; no vector of that request is
kept or cached, and nothing is ever replaced by zeros.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from embedpyramid.config import ApiSettings, ResolvedModel
from embedpyramid.encode.base import EncodeError, Encoder, Kind
from embedpyramid.http import RateLimiter, ResponseCache

CACHE_WRITERS = 4


@dataclass
class ApiUsage:
    """Requests made and tokens counted by a remote encoder (cumulative; subtract snapshots).

    ``tokens_billed`` is what the API reported for the requests this process made;
    ``tokens`` counts every text encoded, cached ones included (their tokens were recorded when
    they were first billed), so it is the cost of encoding the same texts again without a cache.
    """

    requests: int = 0
    retries: int = 0
    texts_sent: int = 0
    texts_cached: int = 0
    tokens_billed: int = 0
    tokens: int = 0
    texts_without_tokens: int = 0
    request_seconds: list[float] = field(default_factory=list)

    def since(self, earlier: ApiUsage) -> ApiUsage:
        counts = {f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)
                  if f.name != "request_seconds"}
        return ApiUsage(**counts, request_seconds=self.request_seconds[len(earlier.request_seconds):])

    def copy(self) -> ApiUsage:
        return self.since(ApiUsage())

    def as_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "request_seconds"}
        record["request_seconds"] = [round(s, 6) for s in self.request_seconds]
        return record


@dataclass(frozen=True)
class Answer:
    """What one request returned: one embedding per text (as the API sent it) and the tokens
    per text when the API reports them (None otherwise)."""

    embeddings: list[Any]
    tokens: list[int | None]


def allocate_tokens(total: int, texts: Sequence[str]) -> list[int]:
    """Split a request's token count over its texts in proportion to their characters (largest
    remainder), so the shares sum to exactly ``total``."""
    weights = np.array([max(len(text), 1) for text in texts], dtype=np.float64)
    exact = total * weights / weights.sum()
    shares = np.floor(exact).astype(np.int64)
    for index in np.argsort(-(exact - shares), kind="stable")[: total - int(shares.sum())]:
        shares[index] += 1
    return shares.tolist()


class RemoteEncoder:
    """Base of the remote backends: subclasses implement :meth:`_request` for one request."""

    request_size: int

    def __init__(self, model: ResolvedModel, *, request_size: int):
        card = model.card
        self.name = model.name
        self.api = card.api or ApiSettings()
        self.request_size = request_size
        self.dimensions: int | None = getattr(card.source, "dimensions", None)
        self.prompts = {"query": card.query_prompt, "document": card.document_prompt}
        self.identity = {"backend": card.backend, **model.source_identity}
        self.limiter = RateLimiter(self.api.requests_per_minute)
        self.cache: ResponseCache | None = None
        self._writers: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self.usage = ApiUsage()
        self.description: dict[str, Any] = {
            "modules": [f"{card.backend}:{model.source_identity.get('model') or model.source_identity.get('bedrock')}"],
            "normalize_layer": None, "pooling": "backend", "max_tokens": None, "native_dimension": self.dimensions,
            "remote": True,
        }

    def attach_cache(self, directory: Path) -> None:
        """Cache every answered text under ``directory`` (shared by all remote cards)."""
        self.cache = ResponseCache(directory)
        self._writers = self._writers or ThreadPoolExecutor(CACHE_WRITERS, thread_name_prefix="api-cache")

    def _request(self, texts: list[str], context: str) -> Answer:
        raise NotImplementedError

    def fail(self, context: str, problem: str) -> EncodeError:
        return EncodeError(f"model card {self.name!r}: {context}: {problem}; nothing of this request was kept")

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        sent = [self.prompts[kind] + text for text in texts]
        keys = [ResponseCache.key(self.identity, text) for text in sent]
        rows: list[np.ndarray | None] = [None] * len(sent)
        if self.cache is not None:
            for position, key in enumerate(keys):
                entry = self.cache.get(key)
                if entry is not None:
                    rows[position] = np.frombuffer(base64.b64decode(entry["vector"]), dtype="<f4").astype(np.float32)
                    self.usage.texts_cached += 1
                    self._count_tokens(entry["tokens"])
        missing = [position for position, row in enumerate(rows) if row is None]
        self._request_missing(sent, keys, rows, missing)
        dims = {len(row) for row in rows if row is not None}
        if len(dims) > 1:
            raise EncodeError(f"model card {self.name!r}: the API returned vectors of dimensions {sorted(dims)}; "
                              "a card's vectors must share one dimension (set source.dimensions)")
        return np.stack(rows) if rows else np.zeros((0, 0), np.float32)  # type: ignore[arg-type]

    def flush(self) -> None:
        """Wait until every answer so far is in the cache (a failed write raises here)."""
        pending, self._pending = self._pending, []
        for write in pending:
            write.result()

    def _request_missing(self, sent: list[str], keys: list[str], rows: list[np.ndarray | None],
                         missing: list[int]) -> None:
        for start in range(0, len(missing), self.request_size):
            chunk = missing[start : start + self.request_size]
            self.usage.requests += 1
            context = f"request {self.usage.requests} ({len(chunk)} text{'s' * (len(chunk) > 1)}, first {sent[chunk[0]][:40]!r})"
            self.limiter.wait()
            began = time.perf_counter()
            answer = self._request([sent[i] for i in chunk], context)
            self.usage.request_seconds.append(time.perf_counter() - began)
            vectors = self._checked(answer.embeddings, len(chunk), context)
            self.usage.texts_sent += len(chunk)
            for position, vector, tokens in zip(chunk, vectors, answer.tokens, strict=True):
                rows[position] = vector
                self.usage.tokens_billed += tokens or 0
                self._count_tokens(tokens)
                if self.cache is not None and self._writers is not None:
                    encoded = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                    self._pending.append(self._writers.submit(self.cache.put, keys[position],
                                                              {"vector": encoded, "tokens": tokens}))

    def _count_tokens(self, tokens: int | None) -> None:
        if tokens is None:
            self.usage.texts_without_tokens += 1
        else:
            self.usage.tokens += tokens

    def _checked(self, embeddings: Any, expected: int, context: str) -> list[np.ndarray]:
        if not isinstance(embeddings, list) or len(embeddings) != expected:
            count = len(embeddings) if isinstance(embeddings, list) else "no"
            raise self.fail(context, f"the answer holds {count} embeddings for {expected} texts")
        vectors = []
        for position, embedding in enumerate(embeddings):
            values = np.asarray(embedding) if isinstance(embedding, list) else np.asarray([])
            if values.ndim != 1 or values.size == 0 or values.dtype.kind not in "iuf":
                raise self.fail(context, f"embedding {position} is not a non-empty list of numbers")
            if not np.isfinite(values).all():
                raise self.fail(context, f"embedding {position} contains NaN or infinity")
            if self.dimensions is not None and len(values) != self.dimensions:
                raise self.fail(context, f"embedding {position} has {len(values)} dimensions, the card asks for "
                                         f"{self.dimensions}")
            vectors.append(values.astype(np.float32))
        return vectors

    def token_counts(self, texts: Sequence[str]) -> None:
        return None

    def without_normalize_layer(self) -> Encoder:
        return self
