"""Encoder backends and content-addressed embedding tables.

Backends: sentence-transformers (installed package, local path, or hub id + revision from the
local cache), model2vec static models, and a python entry point ``module:callable``. Every
backend yields raw float32 vectors; the card's dimension cut and normalization are applied
here, the same way for all of them, so that a card means the same thing whatever serves it.

An embedding table is cached under (eval card hash, query|document, input table hash): a
rerun with nothing that changes a vector encodes nothing.
"""

from __future__ import annotations

import copy
import importlib
import json
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa
from tqdm.auto import tqdm

from embedpyramid.config import HubSource, ResolvedModel
from embedpyramid.data import ENCODED_TABLE, EncodingInputs, FrozenDataset
from embedpyramid.store import ArtifactStore, read_table, read_table_metadata, write_parquet

Kind = Literal["query", "document"]
Progress = Callable[[int, int], None]
PLURAL: dict[Kind, str] = {"query": "queries", "document": "documents"}


class EncodeError(RuntimeError):
    """A model could not be loaded or returned unusable vectors; the message names the card."""


class Encoder(Protocol):
    """What a backend provides: raw vectors for texts of one kind, and what it knows of itself."""

    description: dict[str, Any]

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray: ...

    def token_counts(self, texts: Sequence[str]) -> np.ndarray | None:
        """Tokens per text as the model sees them (capped at its max length), if known."""
        ...

    def without_normalize_layer(self) -> Encoder:
        """The same model without a final Normalize module (itself when there is none)."""
        ...


class SentenceTransformerEncoder:
    def __init__(self, model: ResolvedModel):
        from sentence_transformers import SentenceTransformer

        card, where = model.card, f"model card {model.name!r}"
        if isinstance(card.source, HubSource):
            location, revision = card.source.hub, card.source.revision
        else:
            location, revision = str(model.source_path), None
        try:
            self.model = SentenceTransformer(location, device=card.run.device, revision=revision, local_files_only=True)
        except Exception as error:
            raise EncodeError(
                f"{where}: cannot load sentence-transformers model from {location!r}"
                f"{' @ ' + revision if revision else ''}: {error}. Hub models load only from the local cache."
            ) from error
        modules = [type(module).__name__ for module in self.model]
        pooling = next((m for m in self.model if type(m).__name__ == "Pooling"), None)
        backend_pooling = getattr(pooling, "pooling_mode", None)
        if card.pooling != "backend" and card.pooling != backend_pooling:
            raise EncodeError(
                f"{where}: pooling is {card.pooling!r} in the card but the model pools with {backend_pooling!r}; "
                "set pooling to the model's mode (or 'backend') so the card records what produced the vectors"
            )
        if card.max_tokens is not None:
            self.model.max_seq_length = card.max_tokens
        self.model.tokenizer.truncation_side = card.truncation_side
        if card.dtype != "float32":
            import torch

            self.model.to(getattr(torch, card.dtype))
        self.prompts = {"query": card.query_prompt or None, "document": card.document_prompt or None}
        self.batch_size = card.run.batch_size
        self.description = {
            "modules": modules,
            "normalize_layer": bool(modules) and modules[-1] == "Normalize",
            "pooling": backend_pooling,
            "max_tokens": self.model.max_seq_length,
            "native_dimension": self.model.get_embedding_dimension(),
        }

    def without_normalize_layer(self) -> Encoder:
        """A copy whose module list stops before the final Normalize, sharing the weights.

        With a Normalize module ``normalize_embeddings=False`` is a silent no-op: only the
        stripped model shows the raw norms.
        """
        if not self.description["normalize_layer"]:
            return self
        from sentence_transformers import SentenceTransformer

        stripped = copy.copy(self)
        stripped.model = SentenceTransformer(modules=list(self.model)[:-1], device=str(self.model.device))
        stripped.model.max_seq_length = self.model.max_seq_length
        stripped.description = {**self.description, "modules": self.description["modules"][:-1],
                                "normalize_layer": False, "stripped": ["Normalize"]}
        return stripped

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        vectors = self.model.encode(
            list(texts), prompt=self.prompts[kind], batch_size=self.batch_size,
            convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.model.tokenizer(list(texts), truncation=True, max_length=self.model.max_seq_length)
        return np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)


class Model2VecEncoder:
    def __init__(self, model: ResolvedModel):
        from model2vec import StaticModel

        card = model.card
        location = card.source.hub if isinstance(card.source, HubSource) else str(model.source_path)
        try:
            self.model = StaticModel.from_pretrained(location, normalize=False)
        except Exception as error:
            raise EncodeError(f"model card {model.name!r}: cannot load model2vec model from {location!r}: {error}") from error
        self.max_tokens = card.max_tokens
        self.prompts = {"query": card.query_prompt, "document": card.document_prompt}
        self.batch_size = card.run.batch_size
        self.description = {"modules": ["StaticModel"], "normalize_layer": False, "pooling": "mean (static)",
                            "max_tokens": card.max_tokens, "native_dimension": int(self.model.dim)}

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        prompt = self.prompts[kind]
        vectors = self.model.encode(
            [prompt + text for text in texts], max_length=self.max_tokens, batch_size=self.batch_size,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.model.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return np.array([min(len(item.ids), self.max_tokens or len(item.ids)) for item in encoded], dtype=np.int64)

    def without_normalize_layer(self) -> Encoder:
        return self


class EntryPointEncoder:
    """``module:callable`` called once with the card's options; the result has ``encode(texts)``
    or is itself callable on a list of texts and returns an (n, dim) array."""

    def __init__(self, model: ResolvedModel):
        card = model.card
        module_name, _, attribute = (card.entry_point or "").partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as error:
            raise EncodeError(
                f"model card {model.name!r}: entry point {card.entry_point!r} cannot be imported: {error}; "
                "install the package that provides it"
            ) from error
        instance = target(**card.options)
        self._encode = instance.encode if hasattr(instance, "encode") else instance
        if not callable(self._encode):
            raise EncodeError(f"model card {model.name!r}: {card.entry_point!r}(**options) is neither callable nor has encode()")
        self.name = model.name
        self.prompts = {"query": card.query_prompt, "document": card.document_prompt}
        self.description = {"modules": [card.entry_point], "normalize_layer": None, "pooling": "backend",
                            "max_tokens": None, "native_dimension": None}

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        prompt = self.prompts[kind]
        vectors = np.asarray(self._encode([prompt + text for text in texts]), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EncodeError(
                f"model card {self.name!r}: the entry point returned shape {vectors.shape} for {len(texts)} texts; "
                "it must return one row per text"
            )
        return vectors

    def token_counts(self, texts: Sequence[str]) -> None:
        return None

    def without_normalize_layer(self) -> Encoder:
        return self


BACKENDS: dict[str, Callable[[ResolvedModel], Encoder]] = {
    "sentence-transformers": SentenceTransformerEncoder,
    "model2vec": Model2VecEncoder,
    "entry-point": EntryPointEncoder,
}


def load_encoder(model: ResolvedModel) -> Encoder:
    return BACKENDS[model.card.backend](model)


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
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=vectors.copy(), where=norms > 0)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _thread_limit(threads: int | None):
    if threads is None:
        return nullcontext()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    return threadpool_limits(limits=threads)


def encode_texts(
    encoder: Encoder, model: ResolvedModel, texts: Sequence[str], kind: Kind, progress: Progress | None = None,
    *, normalize: bool | None = None,
) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Encode in batches with a progress bar; return (vectors in input order, seconds, tokens
    per text or None when the backend has no tokenizer).

    ``normalize`` overrides the card's normalization (raw vectors are never normalized).

    Texts are batched longest first, so each batch pads to similar lengths (as
    sentence-transformers does within one call); on short-answer corpora this is ~5x faster
    than batching in table order.
    """
    batch_size = model.card.run.batch_size
    order = np.argsort([-len(text) for text in texts], kind="stable")
    chunks: list[np.ndarray] = []
    start = time.perf_counter()
    with _thread_limit(model.card.run.threads), tqdm(total=len(texts), desc=f"encode {model.key} {PLURAL[kind]}", unit="text") as bar:
        for offset in range(0, len(texts), batch_size):
            batch = [texts[i] for i in order[offset : offset + batch_size]]
            chunks.append(encoder.encode(batch, kind))
            bar.update(len(batch))
            if progress is not None:
                progress(offset + len(batch), len(texts))
    seconds = time.perf_counter() - start
    counts = encoder.token_counts(texts)
    ordered = np.concatenate(chunks) if chunks else np.zeros((0, 0), np.float32)
    vectors = np.empty_like(ordered)
    vectors[order] = ordered
    normalize = model.card.normalize if normalize is None else normalize
    return postprocess(vectors, model.card.dimension, normalize, model.name), seconds, counts


@dataclass(frozen=True)
class EmbeddingTable:
    """A cached embedding table: its file, and the metadata stored in the Parquet schema."""

    path: Path
    metadata: dict[str, Any]
    cache_hit: bool = field(default=False, compare=False)


def vectors_to_table(
    ids: Sequence[str], vectors: np.ndarray, metadata: dict[str, Any], token_counts: np.ndarray | None = None
) -> pa.Table:
    """``id, vector`` (fixed-size float32 list) and ``tokens`` (per text, capped at the model's
    max length; null when the backend has no tokenizer), with ``metadata`` in the schema."""
    dim = vectors.shape[1]
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim)
    tokens = pa.nulls(len(ids), pa.int64()) if token_counts is None else pa.array(token_counts, pa.int64())
    table = pa.table({"id": pa.array(ids, pa.string()), "vector": column, "tokens": tokens})
    return table.replace_schema_metadata({"embedpyramid": json.dumps(metadata, sort_keys=True, default=str)})


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    """Read an embedding table as (ids, float32 matrix) without copying the vector column."""
    table = read_table(path)
    column = table.column("vector").combine_chunks()
    dim = column.type.list_size
    vectors = column.values.to_numpy(zero_copy_only=False).reshape(-1, dim)
    return table.column("id").to_pylist(), vectors


def read_token_counts(path: Path) -> np.ndarray | None:
    """Tokens per text of an embedding table, or None when the backend has no tokenizer."""
    column = read_table(path, columns=["tokens"]).column("tokens")
    return None if column.null_count == len(column) else column.to_numpy()


def read_embedding_metadata(path: Path) -> dict[str, Any]:
    return read_table_metadata(path)


def _cache_kind(kind: Kind, raw: bool) -> str:
    return f"{kind}-raw" if raw else kind


def cached_embedding_path(
    store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset, kind: Kind, *, raw: bool = False
) -> Path:
    """Where the vectors of ``kind`` texts of a frozen dataset under a card live (content-addressed)."""
    return store.embedding_path(model.card_hash, _cache_kind(kind, raw), frozen.table_sha(ENCODED_TABLE[kind]))


def embed_table(
    store: ArtifactStore,
    model: ResolvedModel,
    kind: Kind,
    inputs: EncodingInputs,
    encoder: Callable[[], Encoder],
    progress: Progress | None = None,
    *,
    raw: bool = False,
) -> EmbeddingTable:
    """Return the cached table for (card, kind, input table), encoding only on a cache miss.

    ``encoder`` is a factory, so a cache hit never loads the model. ``raw`` vectors come from
    the model without its final Normalize module and are not normalized (the card's dimension
    cut still applies); they are cached beside the card's vectors. A model with no Normalize
    module to strip gives both from one pass: encoding one also stores the other.
    """
    path = store.embedding_path(model.card_hash, _cache_kind(kind, raw), inputs.table_sha)
    if path.is_file():
        return EmbeddingTable(path, read_embedding_metadata(path), cache_hit=True)
    loaded = encoder()
    stripped = loaded.without_normalize_layer()
    backend = stripped if raw else loaded
    vectors, seconds, token_counts = encode_texts(backend, model, inputs.texts, kind, progress, normalize=False)
    shared_pass = stripped is loaded  # nothing to strip: the raw and the card's vectors share this pass
    tables: dict[bool, np.ndarray] = {}  # is_raw -> vectors
    if raw or shared_pass:
        tables[True] = vectors
    if not raw or shared_pass:
        tables[False] = postprocess(vectors, None, model.card.normalize, model.name)
    tokens = None if token_counts is None else int(token_counts.sum())
    written = {}
    for is_raw, table in tables.items():
        metadata = {
            "model": model.name, "model_key": model.key, "card_hash": model.card_hash, "kind": kind,
            "raw": is_raw, "input_table_sha256": inputs.table_sha, "rows": len(inputs.ids), "dim": int(table.shape[1]),
            "normalized": model.card.normalize and not is_raw, "seconds": seconds, "tokens": tokens,
            "texts_per_second": len(inputs.ids) / seconds if seconds > 0 else None,
            "tokens_per_second": tokens / seconds if tokens and seconds > 0 else None,
            "card": model.hashed_fields(), "run_settings": model.card.run.model_dump(),
            "backend": (stripped if is_raw else loaded).description,
        }
        target = store.embedding_path(model.card_hash, _cache_kind(kind, is_raw), inputs.table_sha)
        write_parquet(vectors_to_table(inputs.ids, table, metadata, token_counts), target)
        written[is_raw] = EmbeddingTable(target, metadata, cache_hit=False)
    return written[raw]


def vector_problems(vectors: np.ndarray, expected_rows: int, expected_dim: int) -> list[str]:
    """Blocking-check findings: wrong shape, NaN/inf rows, all-zero rows (empty when sound)."""
    problems = []
    if vectors.shape != (expected_rows, expected_dim):
        problems.append(f"shape {vectors.shape} != expected ({expected_rows}, {expected_dim})")
        return problems
    non_finite = int((~np.isfinite(vectors)).any(axis=1).sum())
    zero = int((np.abs(vectors).sum(axis=1) == 0).sum())
    if non_finite:
        problems.append(f"{non_finite} vectors contain NaN or inf")
    if zero:
        problems.append(f"{zero} vectors are all zeros")
    return problems


def direction_difference(raw: np.ndarray, shipped: np.ndarray) -> float:
    """max |unit(raw) − unit(shipped)| over all vectors: 0 when stripping Normalize (or skipping
    normalization) changed only the norms, not the directions."""

    def unit(vectors: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    if raw.shape != shipped.shape:
        return float("inf")
    return float(np.abs(unit(raw) - unit(shipped)).max(initial=0.0))
