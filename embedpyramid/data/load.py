"""Load a configured dataset with its loader."""

from __future__ import annotations

import pyarrow.compute as pc

from embedpyramid.config import BeirDataset, ChatterbotDataset, ProjectConfig, SquadDataset
from embedpyramid.config.base import resolve_path
from embedpyramid.data.beir import load_beir, qrels_path
from embedpyramid.data.chatterbot import load_chatterbot
from embedpyramid.data.frozen import DataError, RawDataset
from embedpyramid.data.squad import load_squad


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader.

    A dataset none of whose judgements reaches the protocol's ``relevance_threshold`` is refused
    here: every query would be excluded from every metric, and nothing downstream could be priced.
    """
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        raw, judgements = load_chatterbot(spec), f"chatterbot-corpus {spec.language}"
    elif isinstance(spec, BeirDataset):
        raw, judgements = load_beir(config.beir_path(spec), spec), str(qrels_path(config.beir_path(spec), spec))
    elif isinstance(spec, SquadDataset):
        path = resolve_path(config.directory, spec.path)
        raw, judgements = load_squad(path, spec), str(path)
    else:
        raise DataError(
            f"dataset {name!r} is published scores only (loader: published): there are no tables to freeze; "
            "it stands in for a public benchmark in the transfer analysis"
        )
    threshold = config.protocol.relevance_threshold
    grades = raw.qrels.column("relevance")
    if pc.max(grades).as_py() < threshold:
        present = ", ".join(str(grade) for grade in pc.unique(grades).sort().to_pylist())
        raise DataError(
            f"{judgements}: dataset {name!r} has no judgement with grade >= {threshold} (grades present: {present}), "
            "so every query would be excluded; add relevant judgements or lower relevance_threshold in protocol.yaml"
        )
    return raw
