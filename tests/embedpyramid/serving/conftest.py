"""Synthetic clustered embeddings for the L4 tests: unit vectors around a few hundred centres."""

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from embedpyramid.config import IndexSpec
from embedpyramid.encode.tables import vectors_to_table
from embedpyramid.serving.vectors import TableVectors

Vectors = tuple[np.ndarray, np.ndarray]


def _unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def clustered() -> Callable[..., Vectors]:
    """``clustered(n_docs, n_queries, dim, seed)`` -> (documents, queries), both unit-norm float32;
    each query is a perturbed document, so its exact neighbours sit in one cluster."""

    def make(n_docs: int = 2000, n_queries: int = 100, dim: int = 32, seed: int = 0) -> Vectors:
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((max(8, n_docs // 50), dim))
        documents = _unit(centres[rng.integers(0, len(centres), n_docs)] + 0.4 * rng.standard_normal((n_docs, dim)))
        queries = _unit(documents[rng.integers(0, n_docs, n_queries)] + 0.2 * rng.standard_normal((n_queries, dim)))
        return documents, queries

    return make


@pytest.fixture
def make_spec() -> Callable[..., IndexSpec]:
    def make(name: str = "spec", **fields: object) -> IndexSpec:
        return IndexSpec.model_validate({"name": name, "seed": 42, **fields})

    return make


@pytest.fixture
def stored(tmp_path: Path) -> Callable[..., TableVectors]:
    """``stored(vectors, block_rows, row_group_rows)`` -> the vectors written as an embedding table
    (ids ``d0, d1, ...``; one row group per ``row_group_rows``, as encode shards are), read back in
    blocks of ``block_rows``."""

    def write(vectors: np.ndarray, block_rows: int, row_group_rows: int = 300) -> TableVectors:
        path = tmp_path / f"documents-{len(list(tmp_path.glob('*.parquet')))}.parquet"
        pq.write_table(vectors_to_table([f"d{i}" for i in range(len(vectors))], vectors), path,
                       row_group_size=row_group_rows)
        return TableVectors(path, block_rows)

    return write
