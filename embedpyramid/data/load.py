"""Load a configured dataset with its loader."""

from __future__ import annotations

from embedpyramid.config import ChatterbotDataset, ProjectConfig
from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import load_chatterbot
from embedpyramid.data.frozen import RawDataset


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return load_chatterbot(spec)
    return load_beir(config.beir_path(spec), spec)
