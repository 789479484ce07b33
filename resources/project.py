"""Typed resources: the project (config folder + artifact store) and the encoder registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.data import FrozenDataset, open_frozen
from embedpyramid.encode import Encoder, load_encoder
from embedpyramid.store import ArtifactStore
from pipelines.partitions import split_key


@dataclass(frozen=True)
class Partition:
    """What a (model, dataset) asset works on: the config, the store, the card, the frozen data."""

    config: ProjectConfig
    store: ArtifactStore
    model: ResolvedModel
    dataset: str
    frozen: FrozenDataset


class ProjectResource(dg.ConfigurableResource):
    """One config folder and one data folder: everything a run reads and writes."""

    configs_dir: str
    data_dir: str

    _config: ProjectConfig | None = PrivateAttr(default=None)

    @property
    def config(self) -> ProjectConfig:
        if self._config is None:
            self._config = load_config(self.configs_dir)
        return self._config

    @property
    def store(self) -> ArtifactStore:
        return ArtifactStore(Path(self.data_dir).expanduser().resolve())

    def partition(self, context: dg.AssetExecutionContext) -> Partition:
        """The card and the frozen dataset of the current (model, dataset) partition."""
        model_key, dataset = split_key(context)
        store = self.store
        return Partition(self.config, store, self.config.model_by_key(model_key), dataset,
                         open_frozen(store.dataset_dir(dataset)))


class EncoderRegistry(dg.ConfigurableResource):
    """Loads each model once per process, keyed by its eval card hash."""

    _loaded: dict[str, Encoder] = PrivateAttr(default_factory=dict)

    def encoder(self, model: ResolvedModel) -> Encoder:
        if model.card_hash not in self._loaded:
            self._loaded[model.card_hash] = load_encoder(model)
        return self._loaded[model.card_hash]
