"""Encoder backends and content-addressed, sharded embedding tables.

Backends, one module each: ``sentence_transformer`` (installed package, local path, or a hub
repository at a commit), ``static_model`` (model2vec), ``entry_point`` (a python
``module:callable``), and the remote ``http_api`` (OpenAI-compatible ``/v1/embeddings``) and
``bedrock`` (Amazon Bedrock, Titan-style requests, boto3 as an optional extra) on a shared
``remote`` base. ``base`` holds what they share; ``shards`` the single pass in resumable shards;
``tables`` the embedding tables, their cache and the streaming readers. Backend modules are imported only when a card needs them, so
nothing here imports torch until a model is loaded.
"""

from __future__ import annotations

import importlib

from embedpyramid.config import ResolvedModel
from embedpyramid.encode.base import (
    PLURAL,
    EncodeError,
    Encoder,
    Kind,
    Progress,
    encode_batches,
    encode_texts,
    postprocess,
    thread_limit,
    unit_rows,
)
from embedpyramid.encode.shards import embed_table, encode_shard, single_pass, unfinished_shards
from embedpyramid.encode.tables import (
    BLOCK_ROWS,
    EmbeddingTable,
    cached_embedding_path,
    cached_table,
    embedding_ids,
    embedding_rows,
    embedding_shape,
    iter_embedding_blocks,
    read_embedding_metadata,
    read_embeddings,
    read_token_counts,
    response_cache_directory,
    shard_directory,
    table_path,
    table_problems,
    vector_problems,
    vectors_to_table,
)

BACKENDS: dict[str, str] = {
    "sentence-transformers": "embedpyramid.encode.sentence_transformer:SentenceTransformerEncoder",
    "model2vec": "embedpyramid.encode.static_model:Model2VecEncoder",
    "entry-point": "embedpyramid.encode.entry_point:EntryPointEncoder",
    "http": "embedpyramid.encode.http_api:HttpEncoder",
    "bedrock": "embedpyramid.encode.bedrock:BedrockEncoder",
}


def load_encoder(model: ResolvedModel) -> Encoder:
    """Load the card's model with its backend (the backend's module is imported here)."""
    module, _, name = BACKENDS[model.card.backend].partition(":")
    return getattr(importlib.import_module(module), name)(model)


__all__ = [
    "BACKENDS",
    "BLOCK_ROWS",
    "PLURAL",
    "EmbeddingTable",
    "EncodeError",
    "Encoder",
    "Kind",
    "Progress",
    "cached_embedding_path",
    "cached_table",
    "embed_table",
    "embedding_ids",
    "embedding_rows",
    "embedding_shape",
    "encode_batches",
    "encode_shard",
    "encode_texts",
    "iter_embedding_blocks",
    "load_encoder",
    "postprocess",
    "read_embedding_metadata",
    "read_embeddings",
    "read_token_counts",
    "response_cache_directory",
    "shard_directory",
    "single_pass",
    "table_path",
    "table_problems",
    "thread_limit",
    "unfinished_shards",
    "unit_rows",
    "vector_problems",
    "vectors_to_table",
]
