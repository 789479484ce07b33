"""Dataset loaders and freezing: corpus, queries and qrels as normalized Parquet tables.

One module per source format (``chatterbot``, ``beir``, ``squad``; for the other L2 task
families ``question_pairs`` (chatterbot pairs), ``gensim_data`` (Lee STS, mini newsgroups),
``sts_files`` (STS Benchmark csv, plain tsv/jsonl), ``django_bitext``, ``mteb_files`` (any
family's MTEB task data, on disk — save_to_disk folders, hub snapshots, Parquet/JSONL — or on the
hub) and ``mteb_retrieval`` (MTEB's retrieval layout: retrieval and reranking tasks)); ``gold_answers``
derives the L6 reference answers; ``frozen`` holds the normalized tables, their manifest and the
data version; ``load`` dispatches a configured dataset to its loader.
"""

from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import (
    chatterbot_directory,
    load_chatterbot,
    load_chatterbot_questions,
    read_conversations,
)
from embedpyramid.data.django_bitext import load_django_bitext
from embedpyramid.data.frozen import (
    CORPUS_SCHEMA,
    ENCODED_TABLE,
    GOLD_ANSWERS_SCHEMA,
    PAIRS_SCHEMA,
    QRELS_SCHEMA,
    TABLES,
    TEXTS_SCHEMA,
    DataError,
    EncodingInputs,
    FrozenDataset,
    RawDataset,
    TaskError,
    TaskTables,
    dataset_version,
    document_lengths,
    document_texts,
    encoding_inputs,
    freeze_dataset,
    freeze_task_dataset,
    open_frozen,
    select_query_columns,
    table_hashes,
    task_encoding_inputs,
    task_tables,
    trec_id_problem,
    verify_frozen,
    verify_task_frozen,
)
from embedpyramid.data.gensim_data import load_lee, load_mini_newsgroups
from embedpyramid.data.gold_answers import dataset_gold_answers, gold_answers_from_relevant_documents
from embedpyramid.data.load import load_configured_dataset, load_task_dataset, mteb_hub_identity, source_files
from embedpyramid.data.mteb_files import find_layout, load_mteb_task
from embedpyramid.data.question_pairs import load_chatterbot_pairs
from embedpyramid.data.squad import load_squad
from embedpyramid.data.sts_files import load_sts_file

__all__ = [
    "CORPUS_SCHEMA",
    "ENCODED_TABLE",
    "GOLD_ANSWERS_SCHEMA",
    "QRELS_SCHEMA",
    "TABLES",
    "DataError",
    "EncodingInputs",
    "FrozenDataset",
    "PAIRS_SCHEMA",
    "RawDataset",
    "TEXTS_SCHEMA",
    "TaskError",
    "TaskTables",
    "chatterbot_directory",
    "dataset_gold_answers",
    "dataset_version",
    "document_lengths",
    "document_texts",
    "encoding_inputs",
    "freeze_dataset",
    "gold_answers_from_relevant_documents",
    "freeze_task_dataset",
    "load_beir",
    "load_chatterbot",
    "load_chatterbot_pairs",
    "load_chatterbot_questions",
    "load_configured_dataset",
    "load_squad",
    "load_django_bitext",
    "find_layout",
    "load_lee",
    "load_mteb_task",
    "load_mini_newsgroups",
    "load_sts_file",
    "load_task_dataset",
    "mteb_hub_identity",
    "open_frozen",
    "read_conversations",
    "select_query_columns",
    "source_files",
    "table_hashes",
    "task_encoding_inputs",
    "task_tables",
    "verify_frozen",
    "trec_id_problem",
    "verify_task_frozen",
]
