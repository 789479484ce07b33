"""Dataset loaders and freezing: corpus, queries and qrels as normalized Parquet tables.

One module per source format (``chatterbot``, ``beir``, ``squad``); ``gold_answers`` derives the L6
reference answers; ``frozen`` holds the normalized tables,
their manifest and the data version; ``load`` dispatches a configured dataset to its loader.
"""

from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import chatterbot_directory, load_chatterbot
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    ENCODED_TABLE,
    GOLD_ANSWERS_SCHEMA,
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
from embedpyramid.data.gold_answers import dataset_gold_answers, gold_answers_from_relevant_documents
from embedpyramid.data.load import load_configured_dataset
from embedpyramid.data.squad import load_squad

__all__ = [
    "CORPUS_SCHEMA",
    "ENCODED_TABLE",
    "GOLD_ANSWERS_SCHEMA",
    "QRELS_SCHEMA",
    "TABLES",
    "DataError",
    "EncodingInputs",
    "FrozenDataset",
    "RawDataset",
    "chatterbot_directory",
    "dataset_gold_answers",
    "dataset_version",
    "document_texts",
    "encoding_inputs",
    "freeze_dataset",
    "gold_answers_from_relevant_documents",
    "load_beir",
    "load_chatterbot",
    "load_configured_dataset",
    "load_squad",
    "open_frozen",
    "select_query_columns",
    "table_hashes",
    "verify_frozen",
]
