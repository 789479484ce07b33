"""Content hashes: the data versions and cache keys of every artefact."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def sha256_json(value: Any) -> str:
    """sha256 of the canonical JSON of ``value`` (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_table(table: pa.Table) -> str:
    """sha256 of a table's normalized content: column names, types and values in row order.

    Independent of Parquet encoding, compression and row-group layout, so re-freezing identical
    data gives the identical hash.
    """
    import pyarrow as pa  # here: hashing a config (sha256_json) needs no Arrow

    digest = hashlib.sha256()
    digest.update(str(table.schema.remove_metadata()).encode("utf-8"))
    for batch in table.combine_chunks().to_batches():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema.remove_metadata()) as writer:
            writer.write_batch(batch)
        digest.update(sink.getvalue().to_pybytes())
    return digest.hexdigest()
