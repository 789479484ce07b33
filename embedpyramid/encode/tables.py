"""Embedding tables: one forward pass per text, encoded in resumable shards, read as a stream.

One pass. A table of texts is encoded once, by the model with its final Normalize module passed
through (the model itself when it has none): those raw vectors are the L1 table ``<kind>-raw``,
and the card's vectors (``<kind>``) are derived from them by the card's dimension cut and
normalization (:func:`~embedpyramid.encode.base.postprocess`). Because the shipped model's
Normalize module is ``x / ‖x‖``, unit(raw) is what the shipped model returns; the same forward
pass compares the module's output with unit(raw) on every text and the largest difference is
recorded (``direction_check``), for the blocking check of the raw assets.

One pass per model. A card that differs from another only by its dimension cut, normalization
or similarity runs the same forward pass: when the other card's raw table of the same input
table is stored (uncut, or cut to this card's dimension), this card's two tables are derived
from it without loading the model (:func:`same_pass_table`, :func:`derive_tables`); their
metadata name the card whose pass they come from (``derived_from``) and carry that pass's
encode seconds and direction check, which are this card's cost and check too.

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
matrix; readers stream row groups (:func:`iter_embedding_blocks`), so exact search over a
corpus larger than RAM runs block by block.

Cache. A table is addressed by (card hash, kind, input table hash): a rerun that changes
nothing about the vectors encodes nothing — unless the stored table has NaN, infinite or zero
vectors (``problems`` in its metadata): such a table is never served from the cache, so a
fixed encoder is simply run again.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from embedpyramid.config import ResolvedModel
from embedpyramid.data import ENCODED_TABLE, EncodingInputs, FrozenDataset
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
from embedpyramid.hashing import sha256_json
from embedpyramid.store import (
    ArtifactStore,
    atomic_path,
    parquet_file,
    read_table,
    read_table_metadata,
    remove_tree,
    write_parquet,
)
from embedpyramid.usage import PeakRss

BLOCK_ROWS = 65_536
"""Rows a block reader holds at a time by default (about 100 MB of 384-d float32 vectors)."""

VECTOR_PARQUET: dict[str, Any] = {
    "compression": "zstd", "use_dictionary": False, "column_encoding": {"vector.list.element": "BYTE_STREAM_SPLIT"},
}
"""How the shards and tables are written: each float's four bytes in four streams
(BYTE_STREAM_SPLIT), which zstd then compresses, and no dictionary. pyarrow's default builds a
dictionary of the vectors' values, nearly all distinct, in every row group until it overflows.
Against that default (``benchmarks/bench_tables.py``, 384-d): at 1,000 rows 0.64x the size,
written in 0.27x and read in 0.67x the CPU; at 100,000 rows in 4,096-row groups 0.82x, 0.56x and
0.68x."""

STRIPPED_NOTE = (
    "normalize: false on a model that ships a Normalize module: the module was stripped, so the card's "
    "vectors are the model's raw, unnormalized output"
)


@dataclass(frozen=True)
class EmbeddingTable:
    """A cached embedding table: its file, and the metadata stored in the Parquet schema."""

    path: Path
    metadata: dict[str, Any]
    cache_hit: bool = field(default=False, compare=False)


def _table_kind(kind: Kind, raw: bool) -> str:
    return f"{kind}-raw" if raw else kind


def table_path(store: ArtifactStore, model: ResolvedModel, kind: Kind, table_sha: str, *, raw: bool = False) -> Path:
    """Where the vectors of ``kind`` texts of one input table under a card live (content-addressed)."""
    return store.embedding_path(model.card_hash, _table_kind(kind, raw), table_sha)


def cached_embedding_path(
    store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset, kind: Kind, *, raw: bool = False
) -> Path:
    """Where the vectors of ``kind`` texts of a frozen dataset under a card live (content-addressed)."""
    return table_path(store, model, kind, frozen.table_sha(ENCODED_TABLE[kind]), raw=raw)


def shard_directory(store: ArtifactStore, model: ResolvedModel, kind: Kind, table_sha: str) -> Path:
    """The hidden folder holding the finished shards of an unfinished pass."""
    raw = table_path(store, model, kind, table_sha, raw=True)
    return raw.with_name(f".{raw.stem}.shards-{model.card.run.shard_size}")


def response_cache_directory(store: ArtifactStore) -> Path:
    """Where remote backends cache their answers (one file per text, shared by every card)."""
    return store.root / "cache" / "api"


def vectors_to_table(
    ids: Sequence[str], vectors: np.ndarray, metadata: dict[str, Any] | None = None,
    token_counts: np.ndarray | None = None,
) -> pa.Table:
    """``id, vector`` (fixed-size float32 list) and ``tokens`` (per text, capped at the model's
    max length; null when the backend has no tokenizer), with ``metadata`` in the schema."""
    dim = vectors.shape[1]
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim)
    tokens = pa.nulls(len(ids), pa.int64()) if token_counts is None else pa.array(token_counts, pa.int64())
    table = pa.table({"id": pa.array(ids, pa.string()), "vector": column, "tokens": tokens})
    if metadata is None:
        return table
    return table.replace_schema_metadata({"embedpyramid": json.dumps(metadata, sort_keys=True, default=str)})


def _vector_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, column.type.list_size)


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    """Read a whole embedding table as (ids, float32 matrix)."""
    table = read_table(path, columns=["id", "vector"])
    return table.column("id").to_pylist(), _vector_matrix(table.column("vector"))


def iter_embedding_blocks(path: Path, block_rows: int) -> Iterator[tuple[list[str], np.ndarray]]:
    """(ids, float32 vectors) of consecutive blocks of ``block_rows`` rows (the last may be
    shorter), in table order. The file is read one row group (one shard) at a time — pyarrow's
    own re-batching reader keeps what it read, so it is not used — and only one block and one
    row group are in memory at a time."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    pending = 0
    with parquet_file(path) as parquet:
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=["id", "vector"])
            ids.extend(table.column("id").to_pylist())
            parts.append(_vector_matrix(table.column("vector")))
            pending += table.num_rows
            while pending >= block_rows:
                vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
                yield ids[:block_rows], vectors[:block_rows]
                ids, parts, pending = ids[block_rows:], [vectors[block_rows:]], pending - block_rows
    if pending:
        yield ids, np.concatenate(parts) if len(parts) > 1 else parts[0]


def embedding_rows(path: Path) -> int:
    """Number of vectors in a table, from its footer."""
    return embedding_shape(path)[0]


def embedding_shape(path: Path) -> tuple[int, int]:
    """(vectors, dimension) of a table, from its footer and schema: no vector is read."""
    with parquet_file(path) as parquet:
        return parquet.metadata.num_rows, parquet.schema_arrow.field("vector").type.list_size


def embedding_ids(path: Path) -> list[str]:
    """The ids of a table in row order, without its vectors."""
    return read_table(path, columns=["id"]).column("id").to_pylist()


def read_token_counts(path: Path) -> np.ndarray | None:
    """Tokens per text of an embedding table, or None when the backend has no tokenizer."""
    column = read_table(path, columns=["tokens"]).column("tokens")
    return None if column.null_count == len(column) else column.to_numpy()


def read_embedding_metadata(path: Path) -> dict[str, Any]:
    return read_table_metadata(path)


def _row_stats(vectors: np.ndarray) -> dict[str, Any]:
    """NaN/inf rows, all-zero rows, and the norm range of the finite rows."""
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(vectors[finite], axis=1)
    return {
        "non_finite": int((~finite).sum()),
        "zero": int((np.abs(vectors[finite]).sum(axis=1) == 0).sum()),
        "norm_min": float(norms.min()) if len(norms) else None,
        "norm_max": float(norms.max()) if len(norms) else None,
    }


def _merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    mins = [s["norm_min"] for s in stats if s["norm_min"] is not None]
    maxs = [s["norm_max"] for s in stats if s["norm_max"] is not None]
    return {"non_finite": sum(s["non_finite"] for s in stats), "zero": sum(s["zero"] for s in stats),
            "norm_min": min(mins, default=None), "norm_max": max(maxs, default=None)}


def stats_problems(stats: dict[str, Any]) -> list[str]:
    """Blocking-check findings of merged row statistics (empty when sound)."""
    problems = []
    if stats["non_finite"]:
        problems.append(f"{stats['non_finite']} vectors contain NaN or inf")
    if stats["zero"]:
        problems.append(f"{stats['zero']} vectors are all zeros")
    return problems


def vector_problems(vectors: np.ndarray, expected_rows: int, expected_dim: int) -> list[str]:
    """Blocking-check findings of an in-memory matrix: wrong shape, NaN/inf rows, all-zero rows."""
    if vectors.shape != (expected_rows, expected_dim):
        return [f"shape {vectors.shape} != expected ({expected_rows}, {expected_dim})"]
    return stats_problems(_row_stats(vectors))


def table_problems(path: Path, expected_ids: Sequence[str], expected_dim: int, block_rows: int = BLOCK_ROWS) -> list[str]:
    """Blocking-check findings of a stored table, read block by block: ids that differ from the
    input table, a wrong dimension, NaN/inf rows, all-zero rows."""
    stats, offset, problems = [], 0, []
    for ids, vectors in iter_embedding_blocks(path, block_rows):
        if vectors.shape[1] != expected_dim:
            return [f"{path}: dimension {vectors.shape[1]} != expected {expected_dim}"]
        if ids != list(expected_ids[offset : offset + len(ids)]) and not problems:
            problems.append(f"ids in {path} do not match the input table from row {offset}")
        stats.append(_row_stats(vectors))
        offset += len(ids)
    if offset != len(expected_ids):
        problems.append(f"{path} holds {offset} vectors for {len(expected_ids)} texts")
    return problems + (stats_problems(_merge_stats(stats)) if stats else [])


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


def cached_table(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs, *,
                 raw: bool = False) -> EmbeddingTable | None:
    """The stored table for (card, kind, input table) when it can be served (it exists and its
    vectors have no problems), else None."""
    target = table_path(store, model, kind, inputs.table_sha, raw=raw)
    if target.is_file():
        metadata = read_embedding_metadata(target)
        if metadata.get("problems") == []:
            return EmbeddingTable(target, metadata, cache_hit=True)
    return None


def same_pass_table(store: ArtifactStore, model: ResolvedModel, kind: Kind,
                    inputs: EncodingInputs) -> tuple[EmbeddingTable, EmbeddingTable] | None:
    """The stored raw and card tables of another card with this card's forward pass
    (:meth:`~embedpyramid.config.ResolvedModel.same_pass_hashes`) for the same input table, when
    its raw vectors have no problems; else None."""
    for card_hash in model.same_pass_hashes():
        paths = [store.embedding_path(card_hash, _table_kind(kind, raw), inputs.table_sha) for raw in (True, False)]
        if all(path.is_file() for path in paths):
            raw_table, card_table = (EmbeddingTable(path, read_embedding_metadata(path)) for path in paths)
            if raw_table.metadata.get("problems") == []:
                return raw_table, card_table
    return None


_TABLE_FIELDS = ("raw", "normalized", "backend", "notes", "dim", "problems", "norms", "unit_vectors")
"""Metadata that describe one table; the rest describe the pass both tables come from."""


def derive_tables(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs,
                  same_pass: tuple[EmbeddingTable, EmbeddingTable]) -> dict[bool, EmbeddingTable]:
    """Write the card's raw and card tables from another card's tables of the same forward pass
    (:func:`same_pass_table`) by this card's cut and normalization, encoding nothing; returns
    both, keyed by ``raw``."""
    raw_source, card_source = same_pass
    source = raw_source.metadata
    common = {key: value for key, value in source.items() if key not in _TABLE_FIELDS}
    common.update({
        "model": model.name, "model_key": model.key, "card_hash": model.card_hash, "similarity": model.similarity,
        "card": model.hashed_fields(), "run_settings": model.card.run.model_dump(),
        "derived_from": source.get("derived_from") or {"model_key": source["model_key"],
                                                       "card_hash": source["card_hash"]},
    })
    stats: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for _ids, vectors, _counts in _row_groups([raw_source.path]):
        for is_raw in (True, False):
            stats[is_raw].append(_row_stats(postprocess(vectors, model.card.dimension, model.card.normalize and not is_raw,
                                                        model.name)))
    card_backend = {key: value for key, value in card_source.metadata["backend"].items()
                    if key not in ("normalize_layer_stripped", "vectors")}
    metadata = _tables_metadata(model, common, {is_raw: _merge_stats(stats[is_raw]) for is_raw in (True, False)},
                                {True: source["backend"], False: card_backend},
                                model.card.dimension or source["dim"], f"the raw pass of {common['derived_from']['model_key']}")
    return _write_pair(store, model, kind, inputs, _row_groups([raw_source.path]), metadata)


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
        "stats": {"raw": _row_stats(postprocess(vectors, model.card.dimension, False, model.name)),
                  "card": _row_stats(postprocess(vectors, model.card.dimension, model.card.normalize, model.name))},
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
    stats = {is_raw: _merge_stats([m["stats"]["raw" if is_raw else "card"] for m in shard_metadata])
             for is_raw in (True, False)}
    metadata = _tables_metadata(model, common, stats, {True: stripped.description, False: loaded.description},
                                card.dimension or shard_metadata[0]["dim"], "the raw pass")
    return _write_pair(store, model, kind, inputs, _row_groups([shard.path for shard in shards]), metadata)


def _tables_metadata(model: ResolvedModel, common: dict[str, Any], stats: dict[bool, dict[str, Any]],
                     backends: dict[bool, dict[str, Any]], dim: int, origin: str) -> dict[bool, dict[str, Any]]:
    """The metadata of the raw (True) and the card's (False) table: ``common`` (the pass), each
    table's row statistics and backend description, and what the card's vectors derive from."""
    card = model.card
    shipped_layer = bool(backends[False].get("normalize_layer"))
    metadata: dict[bool, dict[str, Any]] = {}
    for is_raw in (True, False):
        normalized = card.normalize and not is_raw
        backend = dict(backends[is_raw])
        notes = []
        if not is_raw and shipped_layer and not card.normalize:
            backend["normalize_layer_stripped"] = True
            notes.append(STRIPPED_NOTE)
        if not is_raw:
            backend["vectors"] = f"derived from {origin}: dimension cut" + (", then L2 normalization" if normalized else "")
        table_stats = stats[is_raw]
        metadata[is_raw] = {
            **common, "raw": is_raw, "normalized": normalized, "backend": backend, "notes": notes, "dim": dim,
            "problems": stats_problems(table_stats), "norms": {"min": table_stats["norm_min"], "max": table_stats["norm_max"]},
            "unit_vectors": table_stats["norm_min"] is not None and abs(table_stats["norm_min"] - 1) < 1e-4
            and abs(table_stats["norm_max"] - 1) < 1e-4,
        }
    return metadata


def _row_groups(paths: Sequence[Path]) -> Iterator[tuple[list[str], np.ndarray, np.ndarray | None]]:
    """(ids, raw vectors, token counts or None) of each row group of ``paths`` in order: the
    shards of a pass, or a stored raw table (one row group per shard)."""
    for path in paths:
        with parquet_file(path) as parquet:
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group)
                tokens = table.column("tokens")
                yield (table.column("id").to_pylist(), _vector_matrix(table.column("vector")),
                       None if tokens.null_count == len(tokens) else tokens.to_numpy())


def _write_pair(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs,
                parts: Iterator[tuple[list[str], np.ndarray, np.ndarray | None]],
                metadata: dict[bool, dict[str, Any]]) -> dict[bool, EmbeddingTable]:
    """Write the raw and the card's table from the pass's raw ``parts`` (one row group each),
    atomically; returns both, keyed by ``raw``."""
    card = model.card
    targets = {is_raw: table_path(store, model, kind, inputs.table_sha, raw=is_raw) for is_raw in (True, False)}
    with atomic_path(targets[True]) as raw_temporary, atomic_path(targets[False]) as card_temporary:
        writers: dict[bool, pq.ParquetWriter] = {}
        for ids, vectors, counts in parts:
            for is_raw, temporary in ((True, raw_temporary), (False, card_temporary)):
                part = vectors_to_table(ids, postprocess(vectors, card.dimension, card.normalize and not is_raw,
                                                         model.name), metadata[is_raw], counts)
                if is_raw not in writers:
                    writers[is_raw] = pq.ParquetWriter(temporary, part.schema, **VECTOR_PARQUET)
                writers[is_raw].write_table(part)
        for writer in writers.values():
            writer.close()
    return {is_raw: EmbeddingTable(targets[is_raw], metadata[is_raw]) for is_raw in (True, False)}


def _sum_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    total = {key: sum(u[key] for u in usages) for key in usages[0] if key != "request_seconds"}
    total["request_seconds"] = [s for u in usages for s in u["request_seconds"]]
    return total

