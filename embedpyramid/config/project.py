"""A whole config folder, validated: cards, datasets, protocol and (optionally) the L4 specs, the
L5 systems and the L6 downstream settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from embedpyramid.config.ann import AnnConfig, load_ann_config
from embedpyramid.config.base import ConfigError, located, resolve_path
from embedpyramid.config.datasets import AnyDataset, BeirDataset, check_reference_models, has_data, load_datasets
from embedpyramid.config.judge import DownstreamConfig, load_downstream_config
from embedpyramid.config.models import ResolvedModel, load_models
from embedpyramid.config.protocol import Protocol, load_protocol
from embedpyramid.config.systems import SystemsConfig, load_systems_config


@dataclass(frozen=True)
class ProjectConfig:
    """A validated config folder. ``datasets`` holds the retrieval entries of ``datasets.yaml``,
    ``task_datasets`` those that declare another L2 task (sts, pair_classification,
    classification, clustering, bitext), so the retrieval graph never sees a task dataset."""

    directory: Path
    models: dict[str, ResolvedModel]
    datasets: dict[str, AnyDataset]
    protocol: Protocol
    ann: AnnConfig | None = None
    systems: SystemsConfig | None = None
    downstream: DownstreamConfig | None = None
    task_datasets: dict[str, AnyDataset] = field(default_factory=dict)

    @property
    def baseline(self) -> ResolvedModel:
        """The card every other model is compared with: ``comparison.baseline``, else the first card."""
        return self.models[self.protocol.comparison.baseline or next(iter(self.models))]

    def model_by_key(self, key: str) -> ResolvedModel:
        for model in self.models.values():
            if model.key == key:
                return model
        known = ", ".join(m.key for m in self.models.values())
        raise ConfigError(
            f"model partition {key!r} is not a card in {self.directory / 'models.yaml'} "
            f"(current cards: {known}); it was registered by an older card and is no longer evaluated"
        )

    def dataset(self, name: str) -> AnyDataset:
        try:
            return self.datasets[name]
        except KeyError:
            raise ConfigError(
                f"dataset {name!r} is not in {self.directory / 'datasets.yaml'} "
                f"(known: {', '.join(self.datasets)})"
            ) from None

    def datasets_with_data(self) -> list[str]:
        """The retrieval datasets that have data to evaluate, in file order: a ``published`` entry
        holds only published scores (the transfer analysis reads them) and is not a partition."""
        return [name for name, spec in self.datasets.items() if has_data(spec)]

    def family_datasets(self, family: str) -> list[str]:
        """The task datasets that declare ``task: <family>``, in file order."""
        return [name for name, spec in self.task_datasets.items() if spec.task == family]

    def task_dataset(self, name: str) -> AnyDataset:
        try:
            return self.task_datasets[name]
        except KeyError:
            raise ConfigError(
                f"task dataset {name!r} is not in {self.directory / 'datasets.yaml'} "
                f"(task datasets: {', '.join(self.task_datasets) or 'none'})"
            ) from None

    def beir_path(self, spec: BeirDataset) -> Path:
        return resolve_path(self.directory, spec.path)


def load_config(directory: str | Path) -> ProjectConfig:
    """Load and validate a config folder; raise ConfigError naming the file, the line and the key
    (:func:`~embedpyramid.config.base.located`)."""
    try:
        return _load_config(Path(directory).expanduser().resolve())
    except ConfigError as error:
        raise located(error) from None


def _load_config(folder: Path) -> ProjectConfig:
    if not folder.is_dir():
        raise ConfigError(f"config folder {folder} does not exist")
    models, protocol = load_models(folder), load_protocol(folder)
    baseline = protocol.comparison.baseline
    if baseline is not None and baseline not in models:
        raise ConfigError(
            f"{folder / 'protocol.yaml'}: comparison.baseline {baseline!r} is not a card in models.yaml; "
            f"allowed: {', '.join(models)}"
        )
    ann = load_ann_config(folder / "ann.yaml") if (folder / "ann.yaml").is_file() else None
    entries = load_datasets(folder)
    check_reference_models(folder / "datasets.yaml", entries, list(models))
    retrieval = {name: spec for name, spec in entries.items() if spec.task == "retrieval"}
    tasks = {name: spec for name, spec in entries.items() if spec.task != "retrieval"}
    for name, spec in retrieval.items():
        if (problem := protocol.mteb_depth_problem(spec)) is not None:
            raise ConfigError(f"{folder / 'datasets.yaml'}: datasets.{name}: {problem}")
    systems_path = folder / "systems.yaml"
    systems = load_systems_config(systems_path, models, retrieval, ann) if systems_path.is_file() else None
    judge = folder / "judge.yaml"
    downstream = load_downstream_config(judge, systems) if judge.is_file() else None
    return ProjectConfig(folder, models, retrieval, protocol, ann, systems, downstream, tasks)
