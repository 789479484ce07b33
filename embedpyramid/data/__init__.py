"""Dataset loaders and freezing: corpus, queries and qrels as normalized Parquet tables.

One module per source format (``chatterbot``, ``beir``); ``frozen`` holds the normalized tables,
their manifest and the data version; ``load`` dispatches a configured dataset to its loader.
"""

from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import chatterbot_directory, load_chatterbot
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    ENCODED_TABLE,
    QRELS_SCHEMA,
    TABLES,
    DataError,
    EncodingInputs,
    FrozenDataset,
    RawDataset,
    dataset_version,
    document_texts,
    encoding_inputs,
    freeze_dataset,
    open_frozen,
    select_query_columns,
    table_hashes,
    verify_frozen,
)
from embedpyramid.data.load import load_configured_dataset, source_files

__all__ = [
    "CORPUS_SCHEMA",
    "ENCODED_TABLE",
    "QRELS_SCHEMA",
    "TABLES",
    "DataError",
    "EncodingInputs",
    "FrozenDataset",
    "RawDataset",
    "chatterbot_directory",
    "dataset_version",
    "document_texts",
    "encoding_inputs",
    "freeze_dataset",
    "load_beir",
    "load_chatterbot",
    "load_configured_dataset",
    "open_frozen",
    "select_query_columns",
    "source_files",
    "table_hashes",
    "verify_frozen",
]
