"""Pyramid L5 on the artifact store: gather what one system reads, run it, write it.

:func:`evaluate_stored_system` is what an L5 asset calls. It reads the system's inputs where the
rest of the pyramid left them — the model's exact run (L2), another system's run, an L4 index
searched at the candidate depth (``ann:`` references: the index the L4 asset built for the
spec's first seed, loaded, never rebuilt), the reranking card's embedding tables (read from the
content-addressed cache, where that card's own embedding assets wrote them: a rerank never
encodes them, and says which partition to materialize when they are missing) and the dev
split's runs — then :func:`~embedpyramid.systems.level.evaluate_system` and
:func:`~embedpyramid.systems.level.write_system`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.config.system_kinds import BiEncoderSystem
from embedpyramid.config.systems import EXACT, AnnReference, parse_ann_reference
from embedpyramid.data import FrozenDataset, open_frozen
from embedpyramid.encode import (
    Encoder,
    Kind,
    cached_embedding_path,
    embedding_ids,
    read_embedding_metadata,
    read_embeddings,
)
from embedpyramid.retrieval.search import search_metric
from embedpyramid.store import ArtifactStore, read_frame
from embedpyramid.systems.first_stage import ann_first_stage
from embedpyramid.systems.level import (
    DatasetTables,
    DevSplit,
    SystemResult,
    evaluate_system,
    reference_run_path,
    write_system,
)
from embedpyramid.systems.rerank import KeyedVectors


def evaluate_stored_system(
    config: ProjectConfig, store: ArtifactStore, name: str, dataset: str, frozen: FrozenDataset,
    model: ResolvedModel | None = None, encoder: Callable[[ResolvedModel], Encoder] | None = None,
) -> tuple[SystemResult, dict[str, Path]]:
    """Run system ``name`` of ``systems.yaml`` on ``dataset`` for ``model`` (None for a
    model-independent system) from the stored inputs, and write it. ``encoder(card)`` loads a
    card's encoder: a bi-encoder rerank times its ``by`` card's query encoding with it (its
    vectors are read from the cache)."""
    systems = config.systems
    if systems is None:
        raise ValueError(f"{config.directory / 'systems.yaml'} does not exist: there is no L5 system {name!r}")
    spec = systems.system(name)
    if model is None and not systems.model_independent(name):
        raise ValueError(f"system {name!r} reads a model's run: give the model")
    model = None if systems.model_independent(name) else model
    tables = DatasetTables.from_frozen(frozen)
    first_stages = _first_stages(config, store, name, dataset, frozen, model)
    dev = None
    if (dev_name := systems.settings.dev_datasets.get(dataset)) is not None:
        dev_directory = store.dataset_dir(dev_name)
        if not (dev_directory / "manifest.json").is_file():
            raise ValueError(f"system {name!r}: the dev split {dev_name!r} of {dataset!r} is not frozen yet; run "
                             f"`embedpyramid run --datasets {dev_name}` first")
        dev_frozen = open_frozen(dev_directory)
        dev = DevSplit(dev_name, DatasetTables.from_frozen(dev_frozen),
                       _first_stages(config, store, name, dev_name, dev_frozen, model))
    rerank_vectors, encode_query = None, None
    if isinstance(spec, BiEncoderSystem):
        by = config.models[spec.by]
        if encoder is None:
            raise ValueError(f"system {name!r} reranks by card {spec.by!r}: give an encoder loader")
        rerank_vectors = (_by_card_vectors(store, name, by, dataset, frozen, "query"),
                          _by_card_vectors(store, name, by, dataset, frozen, "document"))

        def encode_query(text: str) -> np.ndarray:
            return encoder(by).encode([text], "query")[0]

    protocol = config.protocol
    result = evaluate_system(
        name, systems, dataset=dataset, model_key=None if model is None else model.key, tables=tables,
        measures=protocol.measures(), conventions=protocol.conventions(config.dataset(dataset)),
        first_stages=first_stages, rerank_vectors=rerank_vectors, encode_query=encode_query, dev=dev,
    )
    return result, write_system(result, store)


def _by_card_vectors(store: ArtifactStore, name: str, by: ResolvedModel, dataset: str, frozen: FrozenDataset,
                     kind: Kind) -> KeyedVectors:
    """The ``by`` card's vectors of the dataset's ``kind`` texts, read from the cache its own
    embedding asset wrote: a rerank never encodes another card's tables."""
    path = cached_embedding_path(store, by, frozen, kind)
    if not path.is_file():
        raise ValueError(
            f"system {name!r} reranks by card {by.name!r}, whose {kind} vectors of {dataset!r} are not materialized "
            f"({path} does not exist): materialize {kind}_embeddings for the partition model {by.name!r} × dataset "
            f"{dataset!r} first (`embedpyramid run` does so before the partitions that read it)"
        )
    return KeyedVectors(*read_embeddings(path))


def _first_stages(
    config: ProjectConfig, store: ArtifactStore, name: str, dataset: str, frozen: FrozenDataset,
    model: ResolvedModel | None,
) -> dict[str, pl.DataFrame]:
    """Each reference of the system as a run: stored runs read, ``ann:`` ones searched."""
    systems = config.systems
    assert systems is not None
    runs = {}
    for reference in systems.system(name).references():
        if (parsed := parse_ann_reference(reference)) is not None:
            assert model is not None, "an ann: first stage belongs to a model"
            runs[reference] = _ann_run(config, store, model, frozen, parsed, systems.ann_references()[reference])
            continue
        path = reference_run_path(store, systems, dataset, None if model is None else model.key, reference)
        if not path.is_file():
            producer = "exact_topk" if reference == EXACT else f"the system {reference!r}"
            raise ValueError(f"system {name!r} reads {reference!r} on {dataset!r}, but {path} does not exist: "
                             f"materialize {producer} for this partition first")
        runs[reference] = read_frame(path)
    return runs


def _ann_run(config: ProjectConfig, store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset,
             reference: AnnReference, depth: int) -> pl.DataFrame:
    """The run of the L4 index the reference names (its first build seed), at ``depth``."""
    from embedpyramid.serving.index import index_complete, load_index
    from embedpyramid.serving.level import stored_index_path
    from embedpyramid.serving.specs import build_seeds, resolve_metric
    from embedpyramid.serving.vectors import TableVectors

    assert config.ann is not None and config.systems is not None
    settings, systems = config.ann.settings, config.systems.settings
    spec, _ = resolve_metric(config.ann.spec(reference.spec), search_metric(model.similarity, model.card.normalize),
                             model.card.normalize)
    document_path = cached_embedding_path(store, model, frozen, "document")
    if (skipped := spec.cut_beyond(int(read_embedding_metadata(document_path)["dim"]))) is not None:
        raise ValueError(f"ann:{reference.spec} is not built for {model.key}: {skipped}; read another spec or "
                         "the exact run for this card")
    path = stored_index_path(store, model, document_path, spec, build_seeds(spec, settings)[0])
    if not index_complete(path):
        raise ValueError(f"the index of ann:{reference.spec} for {model.key} is not built ({path}): materialize "
                         f"its L4 asset first")
    query_ids, queries = read_embeddings(cached_embedding_path(store, model, frozen, "query"))
    doc_ids, documents = embedding_ids(document_path), TableVectors(document_path)
    run, _ = ann_first_stage(load_index(path, spec), reference, queries, query_ids, doc_ids, depth=depth,
                             batch_size=settings.batch_size, latency_queries=systems.latency_queries,
                             seed=systems.seed, threads=settings.threads, documents=documents)
    return run
