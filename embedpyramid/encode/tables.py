"""Embedding tables: where they live, how they are written and read, what they hold.

Two tables per (card, kind, input table): ``<kind>-raw`` holds the L1 raw vectors (the model's
output without its final Normalize module), ``<kind>`` the card's vectors, derived from them by
the card's dimension cut and normalization (:func:`~embedpyramid.encode.base.postprocess`).
Both are written from the same raw row groups (:func:`write_pair`), one Parquet row group per
shard of the pass that made them (:mod:`embedpyramid.encode.shards`), with the pass's cost, row
statistics and problems in the schema metadata.

One pass per model. A card that differs from another only by its dimension cut, normalization
or similarity runs the same forward pass: when the other card's raw table of the same input
table is stored (uncut, or cut to this card's dimension), this card's two tables are derived
from it without loading the model (:func:`same_pass_table`, :func:`derive_tables`); their
metadata name the card whose pass they come from (``derived_from``) and carry that pass's
encode seconds and direction check, which are this card's cost and check too.

Memory. Readers stream row groups (:func:`iter_embedding_blocks`), so exact search over a corpus
larger than RAM runs block by block.

Cache. A table is addressed by (card hash, kind, input table hash): a rerun that changes
nothing about the vectors encodes nothing — unless the stored table has NaN, infinite or zero
vectors (``problems`` in its metadata): such a table is never served from the cache
(:func:`cached_table`), so a fixed encoder is simply run again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from embedpyramid.config import ResolvedModel
from embedpyramid.data import ENCODED_TABLE, EncodingInputs, FrozenDataset
from embedpyramid.encode.base import Kind, postprocess
from embedpyramid.store import ArtifactStore, atomic_path, parquet_file, read_table, read_table_metadata

BLOCK_ROWS = 65_536
"""Rows a block reader holds at a time by default (about 100 MB of 384-d float32 vectors)."""

VECTOR_PARQUET: dict[str, Any] = {
    "compression": "zstd", "use_dictionary": False, "column_encoding": {"vector.list.element": "BYTE_STREAM_SPLIT"},
}
"""How the shards and tables are written: each float's four bytes in four streams
(BYTE_STREAM_SPLIT), which zstd then compresses, and no dictionary. pyarrow's default builds a
dictionary of the vectors' values, nearly all distinct, in every row group until it overflows:
larger files, written and read with more CPU (``benchmarks/bench_tables.py`` compares the two)."""

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


def row_stats(vectors: np.ndarray) -> dict[str, Any]:
    """NaN/inf rows, all-zero rows, and the norm range of the finite rows."""
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(vectors[finite], axis=1)
    return {
        "non_finite": int((~finite).sum()),
        "zero": int((np.abs(vectors[finite]).sum(axis=1) == 0).sum()),
        "norm_min": float(norms.min()) if len(norms) else None,
        "norm_max": float(norms.max()) if len(norms) else None,
    }


def merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
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
    return stats_problems(row_stats(vectors))


def table_problems(path: Path, expected_ids: Sequence[str], expected_dim: int, block_rows: int = BLOCK_ROWS) -> list[str]:
    """Blocking-check findings of a stored table, read block by block: ids that differ from the
    input table, a wrong dimension, NaN/inf rows, all-zero rows."""
    stats, offset, problems = [], 0, []
    for ids, vectors in iter_embedding_blocks(path, block_rows):
        if vectors.shape[1] != expected_dim:
            return [f"{path}: dimension {vectors.shape[1]} != expected {expected_dim}"]
        if ids != list(expected_ids[offset : offset + len(ids)]) and not problems:
            problems.append(f"ids in {path} do not match the input table from row {offset}")
        stats.append(row_stats(vectors))
        offset += len(ids)
    if offset != len(expected_ids):
        problems.append(f"{path} holds {offset} vectors for {len(expected_ids)} texts")
    return problems + (stats_problems(merge_stats(stats)) if stats else [])


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
    for _ids, vectors, _counts in row_groups([raw_source.path]):
        for is_raw in (True, False):
            stats[is_raw].append(row_stats(postprocess(vectors, model.card.dimension, model.card.normalize and not is_raw,
                                                        model.name)))
    card_backend = {key: value for key, value in card_source.metadata["backend"].items()
                    if key not in ("normalize_layer_stripped", "vectors")}
    metadata = tables_metadata(model, common, {is_raw: merge_stats(stats[is_raw]) for is_raw in (True, False)},
                                {True: source["backend"], False: card_backend},
                                model.card.dimension or source["dim"], f"the raw pass of {common['derived_from']['model_key']}")
    return write_pair(store, model, kind, inputs, row_groups([raw_source.path]), metadata)


def tables_metadata(model: ResolvedModel, common: dict[str, Any], stats: dict[bool, dict[str, Any]],
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


def row_groups(paths: Sequence[Path]) -> Iterator[tuple[list[str], np.ndarray, np.ndarray | None]]:
    """(ids, raw vectors, token counts or None) of each row group of ``paths`` in order: the
    shards of a pass, or a stored raw table (one row group per shard)."""
    for path in paths:
        with parquet_file(path) as parquet:
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group)
                tokens = table.column("tokens")
                yield (table.column("id").to_pylist(), _vector_matrix(table.column("vector")),
                       None if tokens.null_count == len(tokens) else tokens.to_numpy())


def write_pair(store: ArtifactStore, model: ResolvedModel, kind: Kind, inputs: EncodingInputs,
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


