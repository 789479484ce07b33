"""Where L1 writes a partition's results, apart from the code that computes them: the pair-sanity
assets and the summaries that read the L1 folder do not import the normalization price."""

from __future__ import annotations

from pathlib import Path

from embedpyramid.store import ArtifactStore

PAIR_SANITY_FILE = "pair_sanity.json"
"""The pair-sanity result (:mod:`embedpyramid.geometry.pair_sanity`) in a partition's L1 folder."""


def l1_dir(store: ArtifactStore, dataset: str, model_key: str) -> Path:
    return store.root / "geometry" / dataset / model_key
