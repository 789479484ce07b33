"""Load a configured dataset with its loader, and name the files it reads."""

from __future__ import annotations

from pathlib import Path

from embedpyramid.config import ChatterbotDataset, ProjectConfig
from embedpyramid.data.beir import load_beir
from embedpyramid.data.chatterbot import chatterbot_directory, load_chatterbot
from embedpyramid.data.frozen import RawDataset


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return load_chatterbot(spec)
    return load_beir(config.beir_path(spec), spec)


def source_files(config: ProjectConfig, name: str) -> list[Path]:
    """The files dataset ``name`` is read from (those that exist): its installed chatterbot-corpus
    language folder, or a BEIR folder's corpus, queries and qrels of the split."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return sorted(chatterbot_directory(spec.language).glob("*.yml"))
    folder = config.beir_path(spec)
    candidates = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{spec.split}.tsv"]
    return [path for path in candidates if path.is_file()]
