"""Typed resources: the project (config folder + artifact store) and the encoder registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from embedpyramid.config import ConfigError, ProjectConfig, ResolvedModel, load_config
from embedpyramid.data import FrozenDataset, open_frozen
from embedpyramid.encode import Encoder, load_encoder
from embedpyramid.store import ArtifactStore
from graphbase.partitions import split_key
from graphbase.pools import card_pool, pool_slot


@lru_cache(maxsize=8)
def _load_config(folder: Path, stamps: tuple[tuple[str, int], ...]) -> ProjectConfig:
    """``stamps`` (each file's name and mtime) only key the cache: an edit reloads the folder."""
    return load_config(folder)


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
    _lock: Any = PrivateAttr(default=None)

    @property
    def config(self) -> ProjectConfig:
        """The validated config folder, parsed once per process until one of its files changes
        (Dagster initializes resources per step)."""
        folder = Path(self.configs_dir).expanduser().resolve()
        stamps = tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*.yaml")))
        return _load_config(folder, stamps)

    @property
    def store(self) -> ArtifactStore:
        """The data folder: a local path or a URL (s3://, gs://, memory://, file://)."""
        return ArtifactStore.at(self.data_dir)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """A run's step holds the data folder's lock while it runs (one writer per data folder,
        whoever launched the run); a sensor or schedule evaluation, which writes nothing, does not."""
        if context.run is None or context.instance is None:
            return
        from graphbase.home import DataFolderLock

        run = context.run
        lock = DataFolderLock(self.store.root, context.instance, notify=context.log.info if context.log else print,
                              holder=f"run {run.run_id} ({run.job_name})")
        lock.acquire()
        self._lock = lock

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def partition(self, context: dg.OpExecutionContext | dg.AssetExecutionContext) -> Partition:
        """The current card and the frozen dataset of the (card name, dataset) partition."""
        name, dataset = split_key(context)
        config, store = self.config, self.store
        if name not in config.models:
            raise ConfigError(f"model partition {name!r} is not a card in {config.directory / 'models.yaml'} "
                              f"(cards: {', '.join(config.models)}); it is no longer evaluated")
        return Partition(config, store, config.models[name], dataset, open_frozen(store.dataset_dir(dataset)))


class ShardWorkspace(ProjectResource):
    """The project for the steps that plan and encode the shards of one embedding table: it takes
    no data-folder lock, so the shards of a table encode at once in several processes. Such a step
    reads the config and the frozen dataset and writes only its own shard file, atomically and
    content-addressed (:mod:`embedpyramid.encode.tables`); the step that writes the tables takes
    the lock."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        return None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        return None


class EncoderRegistry(dg.ConfigurableResource):
    """Loads each model once per process, keyed by its eval card hash, and holds a slot of the
    model's pool while a step runs it (:mod:`graphbase.pools`)."""

    _loaded: dict[str, Encoder] = PrivateAttr(default_factory=dict)

    def encoder(self, model: ResolvedModel) -> Encoder:
        if model.card_hash not in self._loaded:
            self._loaded[model.card_hash] = load_encoder(model)
        return self._loaded[model.card_hash]

    @contextmanager
    def slot(self, context: dg.OpExecutionContext | dg.AssetExecutionContext, pool: str) -> Iterator[None]:
        """Hold a slot of ``pool`` for this step until the block ends (waiting for one first)."""
        with pool_slot(context.instance, pool, context.run.run_id, context.get_step_execution_context().step.key,
                       context.log.info):
            yield

    @contextmanager
    def on_demand(self, context: dg.OpExecutionContext | dg.AssetExecutionContext,
                  model: ResolvedModel) -> Iterator[Callable[[], Encoder]]:
        """The card's encoder as a factory for this step: its first call takes a slot of the card's
        pool (:func:`graphbase.pools.card_pool`), held until the block ends; a step that never
        calls it (every table a cache hit) holds none."""
        with ExitStack() as held:
            claimed: list[str] = []

            def load() -> Encoder:
                if not claimed:
                    claimed.append(card_pool(model))
                    held.enter_context(self.slot(context, claimed[0]))
                return self.encoder(model)

            yield load
