"""Load a configured dataset with its loader."""

from __future__ import annotations

from embedpyramid.config import BeirDataset, ChatterbotDataset, ProjectConfig, SquadDataset
from embedpyramid.config.base import resolve_path
from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import load_chatterbot
from embedpyramid.data.frozen import DataError, RawDataset
from embedpyramid.data.squad import load_squad


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return load_chatterbot(spec)
    if isinstance(spec, BeirDataset):
        return load_beir(config.beir_path(spec), spec)
    if isinstance(spec, SquadDataset):
        return load_squad(resolve_path(config.directory, spec.path), spec)
    raise DataError(
        f"dataset {name!r} is published scores only (loader: published): there are no tables to freeze; "
        "it stands in for a public benchmark in the transfer analysis"
    )
