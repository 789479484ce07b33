"""The single pass: one forward pass per text, encoded in resumable shards.

One pass. A table of texts is encoded once, by the model with its final Normalize module passed
through (the model itself when it has none): those raw vectors are the L1 table ``<kind>-raw``,
and the card's vectors (``<kind>``) are derived from them (:mod:`embedpyramid.encode.tables`).
Because the shipped model's Normalize module is ``x / ‖x‖``, unit(raw) is what the shipped model
returns; the same forward pass compares the module's output with unit(raw) on every text and
the largest difference is recorded (``direction_check``), for the blocking check of the raw
assets.

Shards. The pass encodes ``run.shard_size`` texts at a time (in table order; longest first
within a shard) and writes each shard atomically under a hidden folder named by the raw
table, ``.{kind}-raw-<table>.shards-<size>/``. A killed encode resumes from the last finished
shard; a shard's batches are the same in every run, so a resumed table is bit-identical to an
uninterrupted one. When every shard is there, both tables are written shard by shard (one
Parquet row group each) and the shards are removed.

Many workers. A shard is a unit of work of its own (:func:`unfinished_shards`,
:func:`encode_shard`): the shards of one table can be encoded by several processes or machines
at once, each writing only its shard files, and :func:`single_pass` then finds them finished and
writes the tables. The shard files are content-addressed and written atomically, and a shard's
batches are fixed, so two workers that encode the same shard write the same bytes; the table is
the same however the shards were spread.

Memory. Encoding holds the table's ids and texts and one shard of vectors, never the N × d
matrix.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from embedpyramid.config import ResolvedModel
from embedpyramid.data import EncodingInputs
from embedpyramid.encode.base import (
    EncodeError,
    Encoder,
    Kind,
    Progress,
    RawPass,
    encode_batches,
    postprocess,
    thread_limit,
)
from embedpyramid.encode.remote import RemoteEncoder
from embedpyramid.encode.tables import (
    VECTOR_PARQUET,
    EmbeddingTable,
    cached_table,
    derive_tables,
    merge_stats,
    response_cache_directory,
    row_groups,
    row_stats,
    same_pass_table,
    shard_directory,
    tables_metadata,
    vectors_to_table,
    write_pair,
)
from embedpyramid.hashing import sha256_json
from embedpyramid.store import ArtifactStore, read_table_metadata, remove_tree, write_parquet
from embedpyramid.usage import PeakRss


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

    ``encoder`` is a factory, so a cache hit never loads the model. A miss derives both tables
    from another card's raw table of the same forward pass when one is stored, and otherwise
    runs the single pass, which writes both the raw and the card's table (see the module
    docstring); ``raw`` picks which one is returned. ``progress(done, total)`` is called after every batch.
    """
    cached = cached_table(store, model, kind, inputs, raw=raw)
    if cached is not None:
        return cached
    same_pass = same_pass_table(store, model, kind, inputs)
    if same_pass is not None:
        return derive_tables(store, model, kind, inputs, same_pass)[raw]
    written = single_pass(store, model, kind, inputs, encoder(), progress)
    return written[raw]


@dataclass(frozen=True)
class _Shard:
    index: int
    start: int
    stop: int
    path: Path


def _shards(directory: Path, n_texts: int, size: int) -> list[_Shard]:
    return [_Shard(i, start, min(start + size, n_texts), directory / f"{i:05d}.parquet")
            for i, start in enumerate(range(0, n_texts, size))]


def _finished(shard: _Shard, ids_sha: str) -> dict[str, Any] | None:
    """The metadata of a shard written completely for exactly these ids, else None (also for a
    shard written before shards recorded their direction check: it is encoded again)."""
    if not shard.path.is_file():
        return None
    try:
        metadata = read_table_metadata(shard.path)
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None
    return metadata if metadata.get("ids_sha256") == ids_sha and "direction" in metadata else None


def _threads_in_use(model: ResolvedModel) -> int:
    torch = sys.modules.get("torch")
    return model.card.run.threads or (torch.get_num_threads() if torch is not None else os.cpu_count() or 1)


def _table_shards(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs) -> list[_Shard]:
    if not inputs.ids:
        raise EncodeError(f"model card {model.name!r}: no {kind} texts to encode")
    directory = shard_directory(store, model, kind, inputs.table_sha)
    return _shards(directory, len(inputs.ids), model.card.run.shard_size)


def _shard_ids(inputs: EncodingInputs, shard: _Shard) -> tuple[list[str], str]:
    ids = list(inputs.ids[shard.start : shard.stop])
    return ids, sha256_json(ids)


def unfinished_shards(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs) -> list[int]:
    """The shards of (card, kind, input table) still to encode, by index: none when the table is
    stored and sound (:func:`cached_table`) or derives from another card's pass
    (:func:`same_pass_table`), else every shard not yet written completely."""
    if cached_table(store, model, kind, inputs) is not None or same_pass_table(store, model, kind, inputs) is not None:
        return []
    return [shard.index for shard in _table_shards(store, model, kind, inputs)
            if _finished(shard, _shard_ids(inputs, shard)[1]) is None]


def _prepared(store: ArtifactStore, loaded: Encoder) -> Encoder:
    """The encoder of the raw pass (``loaded`` without its Normalize module), with a remote
    backend's answer cache attached."""
    if isinstance(loaded, RemoteEncoder):
        loaded.attach_cache(response_cache_directory(store))
    return loaded.without_normalize_layer()


def encode_shard(
    store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs, loaded: Encoder, index: int,
    progress: Progress | None = None,
) -> bool:
    """Encode shard ``index`` of the raw pass and write it, unless it is already finished or the
    tables are written (a late worker then leaves no orphan shard); returns whether it was encoded
    now. ``progress(done, total)`` counts the shard's texts."""
    shards = _table_shards(store, model, kind, inputs)
    if not 0 <= index < len(shards):
        raise EncodeError(f"model card {model.name!r}: {kind} table {inputs.table_sha[:12]} has {len(shards)} "
                          f"shards of {model.card.run.shard_size}; there is no shard {index}")
    shard = shards[index]
    ids, ids_sha = _shard_ids(inputs, shard)
    if _finished(shard, ids_sha) is not None or cached_table(store, model, kind, inputs) is not None:
        return False

    def shard_progress(done: int, _total: int) -> None:
        if progress is not None:
            progress(done - shard.start, shard.stop - shard.start)

    stripped = _prepared(store, loaded)
    _encode_shard(stripped, stripped is not loaded, model, kind, inputs.texts, shard, ids, ids_sha, shard_progress,
                  len(inputs.ids))
    return True


def single_pass(
    store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs, loaded: Encoder,
    progress: Progress | None = None,
) -> dict[bool, EmbeddingTable]:
    """Encode the shards of ``inputs`` that are not finished yet (by this process or any other)
    and write the raw and the card's tables; returns both, keyed by ``raw``."""
    shards = _table_shards(store, model, kind, inputs)
    stripped = _prepared(store, loaded)
    total, resumed = len(inputs.ids), 0
    shard_metadata = []
    for shard in shards:
        ids, ids_sha = _shard_ids(inputs, shard)
        finished = _finished(shard, ids_sha)
        if finished is not None:
            resumed += 1
        else:
            finished = _encode_shard(stripped, stripped is not loaded, model, kind, inputs.texts, shard, ids, ids_sha,
                                     progress, total)
        shard_metadata.append(finished)
        if progress is not None:
            progress(shard.stop, total)
    tables = _write_tables(store, model, kind, inputs, loaded, stripped, shards, shard_metadata, resumed)
    remove_tree(shards[0].path.parent)
    return tables


def _encode_shard(
    stripped: Encoder, strips: bool, model: ResolvedModel, kind: Kind, texts: Sequence[str], shard: _Shard,
    ids: list[str], ids_sha: str, progress: Progress | None, total: int,
) -> dict[str, Any]:
    """Encode one shard (``stripped``: a :class:`RawPass` when ``strips``) and write it, with its
    metadata: its cost, row statistics and direction check (None when nothing is stripped)."""
    run = model.card.run
    shard_texts = texts[shard.start : shard.stop]
    usage_before = stripped.usage.copy() if isinstance(stripped, RemoteEncoder) else None

    def batch_done(done: int) -> None:
        if progress is not None:
            progress(shard.start + done, total)

    directions = cast(RawPass, stripped).measure_directions() if strips else nullcontext()
    with PeakRss() as rss, thread_limit(run.threads), directions as direction:
        start = time.perf_counter()
        try:
            vectors = encode_batches(stripped, shard_texts, kind, run.batch_size, batch_done)
        finally:
            if isinstance(stripped, RemoteEncoder):
                stripped.flush()
        seconds = time.perf_counter() - start
        threads = _threads_in_use(model)
    token_counts = stripped.token_counts(shard_texts)
    metadata = {
        "shard": shard.index, "start": shard.start, "stop": shard.stop, "ids_sha256": ids_sha, "dim": vectors.shape[1],
        "seconds": seconds, "peak_rss_bytes": rss.peak_bytes, "threads": threads,
        "tokens": None if token_counts is None else int(token_counts.sum()),
        "stats": {"raw": row_stats(postprocess(vectors, model.card.dimension, False, model.name)),
                  "card": row_stats(postprocess(vectors, model.card.dimension, model.card.normalize, model.name))},
        "api_usage": None if usage_before is None else stripped.usage.since(usage_before).as_dict(),  # type: ignore[attr-defined]
        "direction": None if direction is None else {"texts": direction.texts,
                                                     "max_abs_difference": direction.max_abs_difference},
    }
    write_parquet(vectors_to_table(ids, vectors, metadata, token_counts), shard.path, **VECTOR_PARQUET)
    return metadata


def _direction_check(shard_metadata: list[dict[str, Any]]) -> dict[str, Any]:
    """The pass's direction check, from its shards' (each measured in the shard's forward pass;
    None where nothing was stripped)."""
    checks = [metadata["direction"] for metadata in shard_metadata]
    if all(check is None for check in checks):
        return {"sample": 0, "max_abs_difference": 0.0,
                "method": "nothing to strip: the card's vectors derive from the same pass"}
    return {"sample": sum(check["texts"] for check in checks),
            "max_abs_difference": max(check["max_abs_difference"] for check in checks),
            "method": "max |unit(raw) - shipped model output| over every text, in the same forward pass "
                      "(the final Normalize module's input and output)"}


def _write_tables(
    store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs, loaded: Encoder, stripped: Encoder,
    shards: list[_Shard], shard_metadata: list[dict[str, Any]], resumed: int,
) -> dict[bool, EmbeddingTable]:
    card = model.card
    seconds = sum(m["seconds"] for m in shard_metadata)
    token_sums = [m["tokens"] for m in shard_metadata]
    tokens = None if any(t is None for t in token_sums) else int(sum(token_sums))
    usages = [m["api_usage"] for m in shard_metadata if m["api_usage"] is not None]
    common = {
        "model": model.name, "model_key": model.key, "card_hash": model.card_hash, "kind": kind,
        "input_table_sha256": inputs.table_sha, "rows": len(inputs.ids), "similarity": model.similarity,
        "seconds": seconds, "tokens": tokens,
        "texts_per_second": len(inputs.ids) / seconds if seconds > 0 else None,
        "tokens_per_second": tokens / seconds if tokens and seconds > 0 else None,
        "peak_rss_bytes": max((m["peak_rss_bytes"] for m in shard_metadata), default=0),
        "threads": max((m["threads"] for m in shard_metadata), default=None), "device": card.run.device,
        "batch_size": card.run.batch_size, "card": model.hashed_fields(), "run_settings": card.run.model_dump(),
        "shards": {"size": card.run.shard_size, "count": len(shards), "resumed": resumed},
        "empty_ids": [i for i, text in zip(inputs.ids, inputs.texts, strict=True) if not text],
        "direction_check": _direction_check(shard_metadata),
        "api_usage": _sum_usage(usages) if usages else None,
    }
    stats = {is_raw: merge_stats([m["stats"]["raw" if is_raw else "card"] for m in shard_metadata])
             for is_raw in (True, False)}
    metadata = tables_metadata(model, common, stats, {True: stripped.description, False: loaded.description},
                                card.dimension or shard_metadata[0]["dim"], "the raw pass")
    return write_pair(store, model, kind, inputs, row_groups([shard.path for shard in shards]), metadata)


def _sum_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    total = {key: sum(u[key] for u in usages) for key in usages[0] if key != "request_seconds"}
    total["request_seconds"] = [s for u in usages for s in u["request_seconds"]]
    return total

