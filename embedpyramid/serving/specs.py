"""What an L4 index spec (:class:`~embedpyramid.config.ann.IndexSpec`) becomes for one card:
its metric resolved against the card (:func:`resolve_metric`), the seeds it is built with, the
factory string actually built (``{n}`` resolved), and the content-addressed name of the saved
index.

A spec that names a metric overrides the card's with a warning naming both.
"""

from __future__ import annotations

import math

import faiss

from embedpyramid.config.ann import NLIST_PLACEHOLDER, AnnSettings, IndexSpec
from embedpyramid.config.models import Similarity
from embedpyramid.hashing import sha256_json

MIN_POINTS_PER_CENTROID = 39
"""FAISS k-means warns below 39 training points per centroid; ``{n}`` never asks for fewer."""

TRAINING_ROWS = 262_144
"""Most vectors a trained index (IVF, PQ, SQ, OPQ, ...) is trained on: a larger table trains on
a seeded sample of this many rows (:func:`embedpyramid.serving.index.training_rows_for`), so
training holds at most this many vectors. At ``{n}`` (4·sqrt(N) lists) that still gives FAISS's
39 points per list up to N ≈ 2.8 million; FAISS's own k-means keeps at most 256 per centroid."""

_FORMAT_VERSION = 2
"""Bumped when the layout of a saved index changes, so older files are never read as current."""

BINARY_FACTORY = "BFlat"
INT8_FACTORY = "Int8Flat"


def _equivalent(a: Similarity, b: Similarity, unit_vectors: bool) -> bool:
    """Two metrics rank alike: equal, or cosine and inner product over unit vectors."""
    return a == b or (unit_vectors and {a, b} == {"cosine", "inner_product"})


def resolve_metric(spec: IndexSpec, card_metric: Similarity, unit_vectors: bool) -> tuple[IndexSpec, str | None]:
    """The spec with its metric set for one card, and a warning when the spec overrides it.

    ``card_metric`` is the metric of the card's exact run; ``unit_vectors`` says whether the
    card normalizes (then cosine and inner product are the same ranking, and no warning is due).
    """
    if spec.metric is None:
        return spec.model_copy(update={"metric": card_metric}), None
    if _equivalent(spec.metric, card_metric, unit_vectors):
        return spec, None
    return spec, (
        f"{spec.describe()} overrides the card's similarity {card_metric!r} with {spec.metric!r}: its ANN "
        f"recall and relevance deltas against the exact run ({card_metric}) include that change of metric"
    )


def build_seeds(spec: IndexSpec, settings: AnnSettings) -> tuple[int, ...]:
    """The seeds a spec is built with: ``seeds`` consecutive ones from its seed when it is
    stochastic, else just its seed."""
    count = (spec.seeds or settings.seeds) if spec.stochastic else 1
    return tuple(spec.seed + offset for offset in range(count))


def nlist_for(n_vectors: int) -> int:
    """IVF list count for ``{n}``: round(4·sqrt(N)), clipped to [1, floor(N/39)] so every list
    has at least 39 training points (FAISS's k-means minimum)."""
    return max(1, min(round(4 * math.sqrt(n_vectors)), n_vectors // MIN_POINTS_PER_CENTROID))


def resolve_factory(spec: IndexSpec, n_vectors: int) -> str:
    """The factory string actually built: ``{n}`` replaced by :func:`nlist_for`."""
    if spec.kind == "binary":
        return BINARY_FACTORY
    if spec.kind == "int8":
        return INT8_FACTORY
    assert spec.factory is not None
    return spec.factory.replace(NLIST_PLACEHOLDER, str(nlist_for(n_vectors)))


def index_file_name(spec: IndexSpec, embeddings_sha: str, seed: int, training_rows: int = TRAINING_ROWS) -> str:
    """Content-addressed name of a saved index (a folder holding the index and its manifest):
    the spec's identity (its metric resolved), the embeddings hash, the seed, the training-set
    cap and the FAISS version. The embeddings hash fixes N, so ``{n}`` resolves the same way
    under one name, and with the seed and the cap it fixes the training sample."""
    if spec.metric is None:
        raise ValueError(f"{spec.describe()}: resolve its metric against the card first (resolve_metric)")
    digest = sha256_json({
        "spec": spec.identity(), "embeddings": embeddings_sha, "seed": seed, "training_rows": training_rows,
        "faiss": faiss.__version__, "format": _FORMAT_VERSION,
    })
    return f"{spec.name}-{digest[:20]}"
