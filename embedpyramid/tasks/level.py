"""Pyramid L2, the task families other than retrieval, for one (model, dataset): read the frozen
task tables, evaluate the dataset's task on a model's vectors, compare two models, and write and
read the results through the artifact store.

Results live under ``<data>/tasks/<dataset>/<model key>/`` as four Parquet tables —
``per_item``, ``predictions``, ``summary``, ``per_seed`` (see :mod:`embedpyramid.tasks.common`)
— each carrying the task and its settings (seeds included) in its schema metadata, so the
numbers never travel without them.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from embedpyramid.config import (
    TASK_FAMILIES,
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    DatasetEntry,
    MultilabelClassificationSettings,
    PairClassificationSettings,
    RerankingSettings,
    ResolvedModel,
    StsSettings,
)
from embedpyramid.config.tasks import FAMILY_FUNCTIONS
from embedpyramid.data import EncodingInputs, FrozenDataset, TaskError, task_encoding_inputs
from embedpyramid.data.mteb_retrieval import QUERY_PREFIX
from embedpyramid.encode import EmbeddingTable, Encoder, Kind, Progress, embed_table, read_embeddings, table_path
from embedpyramid.hashing import sha256_json
from embedpyramid.store import ArtifactStore, read_frame, read_table_metadata, write_parquet
from embedpyramid.tasks.common import TaskResult
from embedpyramid.vectors import TextVectors

RESULT_TABLES = ("per_item", "predictions", "summary", "per_seed")
PAIR_SEPARATOR = " ⟷ "
"""Between the two texts of a pair where an item's text is shown (regression lists)."""


def _family_function(task: str, role: str) -> Callable[..., Any]:
    """The family's ``role`` function (:data:`~embedpyramid.config.tasks.FAMILY_FUNCTIONS`), its
    module imported now."""
    module, _, name = FAMILY_FUNCTIONS[task][role].partition(":")
    return getattr(importlib.import_module(module), name)


def tasks_dir(store: ArtifactStore, dataset: str, model_key: str) -> Path:
    return store.root / "tasks" / dataset / model_key


def task_text_kind(spec: DatasetEntry) -> Kind:
    """The prompt a task dataset's texts are encoded with: its settings' ``text_kind``."""
    return spec.task_settings.text_kind if spec.task_settings is not None else "query"


def task_encoding_parts(frozen: FrozenDataset, spec: DatasetEntry) -> list[tuple[Kind, EncodingInputs]]:
    """The texts of a frozen task dataset to encode, by the card prompt each takes: every text with
    the prompt of :func:`task_text_kind`, addressed by the texts table's hash; or, for a dataset
    whose texts have a ``role`` (reranking), the queries with the query prompt and the documents
    with the document prompt, each part addressed by the texts table's hash and its role."""
    inputs = task_encoding_inputs(frozen)
    if spec.task != "reranking":
        return [(task_text_kind(spec), inputs)]
    roles = read_frame(frozen.path("texts"), columns=["text_id", "role"])
    role_of = dict(zip(roles["text_id"], roles["role"], strict=True))
    parts: list[tuple[Kind, EncodingInputs]] = []
    for kind in ("query", "document"):
        rows = [row for row, text_id in enumerate(inputs.ids) if role_of[text_id] == kind]
        parts.append((kind, EncodingInputs([inputs.ids[row] for row in rows], [inputs.texts[row] for row in rows],
                                           sha256_json({"texts": inputs.table_sha, "role": kind}))))
    return parts


def encode_task_texts(store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset, spec: DatasetEntry,
                      encoder: Callable[[], Encoder], progress: Progress | None = None) -> list[EmbeddingTable]:
    """The card's vectors of every text of a frozen task dataset, through the content-addressed
    embedding cache, one table per part of :func:`task_encoding_parts` (encoded with its prompt on
    a miss; ``encoder`` is a factory, so a hit never loads the model)."""
    return [embed_table(store, model, kind, inputs, encoder, progress)
            for kind, inputs in task_encoding_parts(frozen, spec)]


def task_vectors(store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset, spec: DatasetEntry) -> TextVectors:
    """The vectors :func:`encode_task_texts` wrote for this card and dataset, read from the cache."""
    ids: list[str] = []
    blocks = []
    for kind, inputs in task_encoding_parts(frozen, spec):
        path = table_path(store, model, kind, inputs.table_sha)
        if not path.is_file():
            raise TaskError(f"{model.key} has no vectors of {frozen.directory.name}'s texts ({path} does not exist): "
                            f"materialize {spec.task}_embeddings for this partition first")
        found, vectors = read_embeddings(path)
        ids += found
        blocks.append(vectors)
    return TextVectors(ids, blocks[0] if len(blocks) == 1 else np.concatenate(blocks))


def evaluate_task(spec: DatasetEntry, frozen: FrozenDataset, vectors: TextVectors, *, dataset: str,
                  model: str, similarity: str = "cosine") -> TaskResult:
    """Evaluate a frozen task dataset's declared task on one model's vectors of its texts, under
    the protocol of its settings (``project`` or ``mteb``) and the card's ``similarity``."""
    settings = spec.task_settings
    if spec.task not in TASK_FAMILIES:
        raise TaskError(f"dataset {dataset!r}: task {spec.task!r} is not evaluated here (retrieval has its own level)")
    evaluate = _family_function(spec.task, "evaluate")
    if spec.task in ("classification", "clustering", "multilabel_classification"):
        texts = read_frame(frozen.path("texts"))
        texts = texts.select("text_id", "label", *(["split"] if "split" in texts.columns else []))
        assert isinstance(settings, ClassificationSettings | ClusteringSettings | MultilabelClassificationSettings)
        return evaluate(texts, vectors, settings, dataset=dataset, model=model, similarity=similarity)
    pairs = read_frame(frozen.path("pairs"))
    assert isinstance(settings, StsSettings | PairClassificationSettings | BitextSettings | RerankingSettings)
    return evaluate(pairs, vectors, settings, dataset=dataset, model=model, similarity=similarity)


def compare_task(task: str, predictions_a: pl.DataFrame, predictions_b: pl.DataFrame, *, n_resamples: int = 10_000,
                 confidence: float = 0.95, seed: int = 42, groups: dict[str, str] | None = None) -> pl.DataFrame:
    """Paired statistic-bootstrap comparisons (b − a) of the task's whole-set statistics."""
    if task not in TASK_FAMILIES:
        raise TaskError(f"task {task!r} has no statistic comparisons; allowed: {', '.join(TASK_FAMILIES)}")
    return _family_function(task, "compare")(predictions_a, predictions_b, n_resamples=n_resamples, confidence=confidence, seed=seed,
                          groups=groups)


def task_items(frozen: FrozenDataset, spec: DatasetEntry) -> pl.DataFrame:
    """The items of a task dataset as the paired comparisons read queries: ``query_id`` (the
    pair or text id; a reranking dataset's query id), ``text`` (a pair's two texts joined by
    :data:`PAIR_SEPARATOR`; a reranking query's text) and the dataset's slice and group columns."""
    texts = read_frame(frozen.path("texts"))
    extra = list(dict.fromkeys([*spec.slices, *([spec.group_column] if spec.group_column else [])]))
    if spec.task == "reranking":
        queries = texts.filter(pl.col("role") == "query")
        return queries.select(pl.col("text_id").str.strip_prefix(QUERY_PREFIX).alias("query_id"), "text", *extra)
    if "pairs" not in frozen.manifest["tables"]:
        return texts.select(pl.col("text_id").alias("query_id"), "text", *extra)
    lookup = dict(zip(texts["text_id"], texts["text"], strict=True))
    pairs = read_frame(frozen.path("pairs"))
    shown = [lookup[a] + PAIR_SEPARATOR + lookup[b] for a, b in zip(pairs["text_id_1"], pairs["text_id_2"], strict=True)]
    return pairs.select(pl.col("pair_id").alias("query_id"), *extra).insert_column(1, pl.Series("text", shown))


def task_groups(items: pl.DataFrame, spec: DatasetEntry) -> dict[str, str] | None:
    """Item id → resampling group from :func:`task_items`, when the dataset names a group column."""
    if spec.group_column is None:
        return None
    return dict(zip(items["query_id"], items[spec.group_column].cast(pl.String), strict=True))


def write_task_result(result: TaskResult, directory: Path) -> Path:
    """Write the four result tables atomically, each with the task and settings in its metadata."""
    metadata = {"embedpyramid": json.dumps({"task": result.task, "settings": result.settings}, sort_keys=True,
                                           default=str)}
    for name in RESULT_TABLES:
        table = getattr(result, name).to_arrow().replace_schema_metadata(metadata)
        write_parquet(table, directory / f"{name}.parquet")
    return directory


def read_task_result(directory: Path) -> TaskResult:
    """A result written by :func:`write_task_result`."""
    frames = {name: read_frame(directory / f"{name}.parquet") for name in RESULT_TABLES}
    meta: dict[str, Any] = read_table_metadata(directory / "summary.parquet")
    return TaskResult(meta["task"], frames["per_item"], frames["predictions"], frames["summary"], frames["per_seed"],
                      meta["settings"])
