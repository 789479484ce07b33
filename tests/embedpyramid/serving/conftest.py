"""Synthetic clustered embeddings for the L4 tests: unit vectors around a few hundred centres."""

from collections.abc import Callable

import numpy as np
import pytest

from embedpyramid.config import IndexSpec

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
