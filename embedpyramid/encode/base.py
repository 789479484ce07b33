"""What every encoder backend shares: the protocol, batching, the card's dimension cut and
normalization, and the errors.

Every backend yields raw float32 vectors; the card's dimension cut and normalization are applied
by :func:`postprocess`, the same way for all of them, so that a card means the same thing
whatever serves it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from embedpyramid.config import HubSource, ResolvedModel
from embedpyramid.hub import HubError, download

Kind = Literal["query", "document"]
Progress = Callable[[int, int], None]
PLURAL: dict[Kind, str] = {"query": "queries", "document": "documents"}


class EncodeError(RuntimeError):
    """A model could not be loaded or returned unusable vectors; the message names the card."""


def model_folder(model: ResolvedModel) -> tuple[Path, str]:
    """Where a local card's model files are, and how to name them in a message: the source's
    folder, or the cache's snapshot of a hub repository at the card's commit (downloaded first
    when online and missing)."""
    source = model.card.source
    if isinstance(source, HubSource):
        commit = model.source_identity["commit"]
        try:
            return download(source.hub, commit, where=f"model card {model.name!r}"), f"{source.hub} @ {commit[:12]}"
        except HubError as error:
            raise EncodeError(str(error)) from None
    assert model.source_path is not None, f"model card {model.name!r} has no local files"
    return model.source_path, str(model.source_path)


class Encoder(Protocol):
    """What a backend provides: raw vectors for texts of one kind, and what it knows of itself."""

    description: dict[str, Any]

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray: ...

    def token_counts(self, texts: Sequence[str]) -> np.ndarray | None:
        """Tokens per text as the model sees them (capped at its max length), if known."""
        ...

    def without_normalize_layer(self) -> Encoder:
        """The same model without a final Normalize module (itself when there is none); the
        stripped form is a :class:`RawPass`."""
        ...


class RawPass(Encoder, Protocol):
    """A model with its final Normalize module passed through: it returns the vectors the module
    receives, and while :meth:`measure_directions` is open it compares, in the same forward
    pass, each batch's shipped output with unit(raw)."""

    def measure_directions(self) -> AbstractContextManager[DirectionCheck]: ...


@dataclass
class DirectionCheck:
    """What a raw pass measured while it encoded: the texts, and the largest |unit(raw) −
    shipped output| among them (0 when stripping Normalize changed only the norms)."""

    texts: int = 0
    max_abs_difference: float = 0.0

    def add(self, raw: np.ndarray, shipped: np.ndarray) -> None:
        self.texts += len(raw)
        self.max_abs_difference = max(self.max_abs_difference, direction_difference(raw, shipped))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (float32); zero rows stay zero and NaN rows stay NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.array(vectors, dtype=np.float32), where=norms > 0)


def direction_difference(raw: np.ndarray, shipped: np.ndarray) -> float:
    """max |unit(raw) − unit(shipped)| over all vectors: 0 when stripping Normalize (or skipping
    normalization) changed only the norms, not the directions."""
    if raw.shape != shipped.shape:
        return float("inf")
    return float(np.abs(unit_rows(raw) - unit_rows(shipped)).max(initial=0.0))


def postprocess(vectors: np.ndarray, dimension: int | None, normalize: bool, name: str) -> np.ndarray:
    """Apply the card's dimension cut (truncate, Matryoshka style) then its L2 normalization.

    Zero vectors stay zero and NaN vectors stay NaN, so the blocking checks report what the
    model actually returned.
    """
    if dimension is not None:
        if dimension > vectors.shape[1]:
            raise EncodeError(f"model card {name!r}: dimension {dimension} exceeds the model's {vectors.shape[1]}")
        vectors = vectors[:, :dimension]
    if normalize:
        vectors = unit_rows(vectors)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def thread_limit(threads: int | None) -> AbstractContextManager[Any]:
    """Limit BLAS/OpenMP pools (and torch, when a backend has loaded it) to ``threads``."""
    if threads is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")  # only a backend that runs on torch has imported it
    if torch is not None:
        torch.set_num_threads(threads)
    return threadpool_limits(limits=threads)


def encode_batches(
    encoder: Encoder, texts: Sequence[str], kind: Kind, batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Raw vectors of ``texts`` in input order, encoded ``batch_size`` at a time.

    Texts are batched longest first, so each batch pads to similar lengths instead of to its
    longest text: far less padding than batching in table order on corpora of mixed lengths. The order is sentence-transformers'
    own within one ``encode`` call (numpy's default argsort of the negated character counts,
    which does not keep ties in table order), so over the same texts the batches are those of
    ``model.encode`` and so are its vectors, to the last bit. A stable sort put texts of equal
    length in other batches: 28 of bench_peers' 1,748 texts then came out up to 1e-7 from
    ``model.encode``'s. ``progress`` receives the texts done so far.
    """
    order = np.argsort([-len(text) for text in texts])
    chunks: list[np.ndarray] = []
    for offset in range(0, len(texts), batch_size):
        chunks.append(encoder.encode([texts[i] for i in order[offset : offset + batch_size]], kind))
        if progress is not None:
            progress(min(offset + batch_size, len(texts)))
    ordered = np.concatenate(chunks) if chunks else np.zeros((0, 0), np.float32)
    vectors = np.empty_like(ordered)
    vectors[order] = ordered
    return vectors


def encode_texts(
    encoder: Encoder, batch_size: int, texts: Sequence[str], kind: Kind, *, threads: int | None = None,
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Encode in memory: (raw vectors in input order, seconds, tokens per text or None when the
    backend has no tokenizer). The pipeline encodes through :func:`embedpyramid.encode.embed_table`
    (sharded and resumable); this is the bare path benchmarks compare it with."""
    start = time.perf_counter()
    with thread_limit(threads):
        vectors = encode_batches(encoder, texts, kind, batch_size)
    return vectors, time.perf_counter() - start, encoder.token_counts(texts)
