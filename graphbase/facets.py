"""The config facets: every fragment of the config folder that numbers depend on, with its version.

A facet is cut from a loaded :class:`~embedpyramid.config.ProjectConfig` (and, for a dataset, the
size and mtime of its source files); the sha256 of the fragment is its version. Dagster sees each
facet as an observable source asset under ``config/`` (:mod:`graphbase.freshness` observes them
and reads Dagster's stale status). This module imports no Dagster, so a command that only needs
the versions (the warm start, :mod:`graphbase.warm`) does not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from embedpyramid.config import MtebDataset, ProjectConfig
from embedpyramid.config.base import resolve_path
from embedpyramid.config.tasks import TASK_FAMILIES
from embedpyramid.current_inputs import ann_asset_name, system_asset_name, task_datasets_name
from embedpyramid.data import mteb_hub_identity, source_files
from embedpyramid.hashing import sha256_json

if TYPE_CHECKING:
    import dagster as dg

CONFIG = "config"


@dataclass(frozen=True)
class Facet:
    """A fragment of the config folder that numbers depend on, as an external Dagster asset.

    ``fragment(config, partition)`` cuts the fragment out of a loaded config (``partition`` is
    the card name or dataset for partitioned facets, None otherwise); its sha256 is the data
    version. ``partitioned_by`` is ``"model"``, ``"dataset"``, a task family (its datasets, e.g.
    ``"bitext"``) or None.
    """

    name: str
    description: str
    fragment: Callable[[ProjectConfig, str | None], Any]
    partitioned_by: str | None = None

    @property
    def key(self) -> dg.AssetKey:
        import dagster as dg

        return dg.AssetKey([CONFIG, self.name])

    def partitions(self, config: ProjectConfig) -> list[str | None]:
        if self.partitioned_by == "model":
            return list(config.models)
        if self.partitioned_by == "dataset":
            return config.datasets_with_data()
        if self.partitioned_by in TASK_FAMILIES:
            return config.family_datasets(self.partitioned_by)
        return [None]

    def version(self, config: ProjectConfig, partition: str | None) -> tuple[str, Any]:
        """(data version, fragment) for one partition."""
        fragment = self.fragment(config, partition)
        return sha256_json(fragment), fragment


L3_FIELDS = ("role", "confirmatory_metric", "reference", "mteb_results")
"""A dataset entry's transfer settings: the references and transfer facets, not its source."""


def _comparison_settings(config: ProjectConfig, dataset: str) -> dict[str, Any]:
    # Imported here: the statistics stack is not needed to build the definitions.
    from embedpyramid.config.comparison import comparison_settings

    return comparison_settings(config, dataset).model_dump()


def _dataset_source(config: ProjectConfig, dataset: str | None) -> dict[str, Any]:
    """A dataset's entry as the loader reads it, and the size and mtime of its source files.

    Touching a file without changing it makes the source look new; the re-freeze then yields
    the same content hash, so nothing downstream moves.
    """
    spec = config.dataset(str(dataset))
    entry = spec.model_dump(mode="json", exclude={"drop_self_hits", "group_column", "retrieval", *L3_FIELDS})
    try:
        files = [[str(path), path.stat().st_size, path.stat().st_mtime_ns] for path in source_files(config, str(dataset))]
    except (OSError, ValueError) as error:
        files = [f"unreadable: {error}"]
    hub = mteb_hub_identity(config, spec, str(dataset)) if isinstance(spec, MtebDataset) else None
    return {"entry": entry, "files": files, **({"hub": hub} if hub else {})}


MODEL_CARD = Facet(
    "model_card",
    "Each model's eval card: everything that changes a vector (backend, source and its version, prompts, "
    "pooling, normalization, dimension, dtype, max tokens, truncation side). The data version is the card "
    "hash; run settings (batch size, device, threads) are left out.",
    lambda config, name: config.models[str(name)].hashed_fields(),
    "model",
)
DATASET_SOURCE = Facet(
    "dataset_source",
    "Where each dataset is read from: its datasets.yaml entry (loader, path, split, categories, slices) and "
    "the size and modification time of its source files.",
    _dataset_source,
    "dataset",
)
def _search(config: ProjectConfig, _: str | None) -> dict[str, Any]:
    # Listed only when some dataset follows MTEB, so a config without one keeps its version.
    mteb = [name for name, spec in config.datasets.items() if spec.retrieval_protocol == "mteb"]
    return {"depth": config.protocol.depth, **({"ties_at_cut_last": mteb} if mteb else {})}


SEARCH = Facet(
    "search",
    "protocol.yaml depth: documents retrieved per query by exact search; and the datasets under "
    "retrieval.protocol mteb, whose search keeps the larger doc ids among documents tied at its cut.",
    _search,
)
MEASURES = Facet(
    "measures", "protocol.yaml k_values: the retrieval measures computed per query.",
    lambda config, _: [str(measure) for measure in config.protocol.measures()],
)
CONVENTIONS = Facet(
    "conventions",
    "Each dataset's metric conventions: protocol.yaml gain, relevance_threshold and ties, the dataset's "
    "drop_self_hits; or, under retrieval.protocol mteb, MTEB's conventions with the mteb version and top_k.",
    lambda config, dataset: config.protocol.conventions(config.dataset(str(dataset))).as_dict(),
    "dataset",
)
RESAMPLING = Facet(
    "resampling",
    "protocol.yaml comparison n_resamples, seed and confidence: every bootstrap interval outside the summary "
    "(L1 price, L4 deltas) and the seed of L1's random document pairs.",
    lambda config, _: config.protocol.comparison.model_dump(include={"n_resamples", "seed", "confidence"}),
)
COMPARISON = Facet(
    "comparison",
    "Each dataset's comparison settings: protocol.yaml comparison (baseline card, pairs, resampling, tests, "
    "report metric) with the dataset's slices and group column. A card added or removed reaches the summaries "
    "through their input partitions (a new partition's data version; a partition gone), so it stales the "
    "comparisons of the datasets it is evaluated on, no other.",
    lambda config, dataset: _comparison_settings(config, str(dataset)),
    "dataset",
)
ANN_SETTINGS = Facet(
    "ann_settings", "ann.yaml settings: k, measures, delta metric, timing, recall targets, threads, seed.",
    lambda config, _: config.ann.settings.model_dump(mode="json") if config.ann else None,
)
RUN_SETTINGS = Facet(
    "run_settings",
    "Each model's run settings and API settings (batch size, device, threads, latency sample, prices, request "
    "rate): they leave the vectors alone, so only the efficiency measurements depend on them.",
    lambda config, name: {"run": config.models[str(name)].card.run.model_dump(mode="json"),
                          "api": (api.model_dump(mode="json") if (api := config.models[str(name)].card.api) else None)},
    "model",
)


def _published_scores(config: ProjectConfig, dataset: str) -> dict[str, Any]:
    """A dataset's published scores as configured (typed, and the MTEB import with the size and
    mtime of the result files it reads), its role and the measure it ranks models by."""
    spec = config.task_datasets.get(dataset) or config.dataset(dataset)
    fragment = spec.model_dump(mode="json", include=set(L3_FIELDS))
    if spec.mteb_results is not None:
        folder = resolve_path(config.directory, spec.mteb_results.path)
        fragment["files"] = sorted([str(path), path.stat().st_size, path.stat().st_mtime_ns]
                                   for path in folder.rglob("*.json")) if folder.is_dir() else "missing"
    return fragment


REFERENCES = Facet(
    "references",
    "Each dataset's published scores (datasets.yaml reference and mteb_results, with the result files' sizes and "
    "times): the reproduction check of every (model, dataset) reads them.",
    _published_scores,
    "dataset",
)
TRANSFER = Facet(
    "transfer",
    "Every dataset's role (public or own), confirmatory measure and published scores, STS task datasets included "
    "(the task family the transfer ranks models on): "
    "what the L3 transfer analysis ranks and compares.",
    lambda config, _: {name: _published_scores(config, name)
                       for name in [*config.datasets, *config.family_datasets("sts")]},
)
JUDGE = Facet(
    "judge",
    "judge.yaml (context depth k, systems, generator, judge, criteria, prompts, analysis) and each dataset's "
    "gold_answers: everything L6 holds fixed across models.",
    lambda config, _: {"judge": config.downstream.model_dump(mode="json") if config.downstream else None,
                       "gold_answers": {name: spec.gold_answers for name, spec in config.datasets.items()}},
)
STATIC_FACETS = (MODEL_CARD, RUN_SETTINGS, DATASET_SOURCE, SEARCH, MEASURES, CONVENTIONS, RESAMPLING, COMPARISON,
                 REFERENCES, TRANSFER)


def _task_dataset(config: ProjectConfig, dataset: str | None) -> dict[str, Any]:
    """A task dataset's entry (loader, source, slices, the family's settings block) and the size
    and mtime of its source file, or of every file under its source folder (``loader: mteb``), if
    it names one; for an MTEB entry on the hub, the commit its revision names now."""
    spec = config.task_dataset(str(dataset))
    files = []
    if isinstance(path := getattr(spec, "path", None), str):
        source = resolve_path(config.directory, path)
        found = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        files = [[str(file), file.stat().st_size, file.stat().st_mtime_ns] if file.is_file() else f"missing: {file}"
                 for file in found]
    hub = mteb_hub_identity(config, spec, str(dataset)) if isinstance(spec, MtebDataset) else None
    return {"entry": spec.model_dump(mode="json", exclude={"retrieval"}), "files": files, **({"hub": hub} if hub else {})}


TASK_FACETS = tuple(Facet(
    task_datasets_name(family),
    f"Each {family} dataset's datasets.yaml entry (loader, source, slices, group column and its `{family}:` "
    "settings block with every seed) and the size and mtime of its source file: an edit makes only that "
    f"dataset's {family} partitions stale.",
    _task_dataset,
    family,
) for family in TASK_FAMILIES)
"""One facet per L2 task family, partitioned by that family's datasets."""
TASK_COMPARISON = Facet(
    "task_comparison",
    "What the task summary compares: each task dataset's comparison settings (baseline, resampling, tests, slices, "
    "group column), the datasets whose pair sanity it gathers and the cards in models.yaml. A new task dataset or "
    "card makes the summary stale; it waits until their partitions are evaluated.",
    lambda config, _: {
        "task_datasets": {name: _comparison_settings(config, name) for name in config.task_datasets},
        "datasets": list(config.datasets),
        "cards": sorted(model.key for model in config.models.values()),
    },
)


def ann_spec_facet(spec_name: str) -> Facet:
    """The facet of one index spec of ann.yaml: its asset depends on it alone among the specs."""
    return Facet(
        ann_asset_name(spec_name), f"ann.yaml indexes.{spec_name}: the index spec (factory, metric, dimension, "
        "sweep, seed).",
        lambda config, _: config.ann.spec(spec_name).model_dump(mode="json") if config.ann else None,
    )


SYSTEMS_SETTINGS = Facet(
    "systems_settings",
    "systems.yaml settings.latency_queries and seed: the latency sample of every L5 system (what changes a "
    "system's run, depth and dev splits included, is in each system's own facet).",
    lambda config, _: (config.systems.settings.model_dump(include={"latency_queries", "seed"})
                       if config.systems else None),
)


def system_facet(system_name: str) -> Facet:
    """The facet of one L5 system of systems.yaml: its version is the system's content hash
    (its settings, the card it reranks by, the L4 spec it reads and the hashes of its input
    systems), so an edit makes exactly that system and the systems built on it stale."""
    return Facet(
        system_asset_name(system_name), f"systems.yaml systems.{system_name}: the system's content hash.",
        lambda config, _: config.systems.hashes.get(system_name) if config.systems else None,
    )


def config_facets(spec_names: Sequence[str], system_names: Sequence[str] = (), *,
                  downstream: bool = False) -> list[Facet]:
    """Every facet of a config whose ann.yaml holds ``spec_names`` (none without ann.yaml) and
    whose systems.yaml holds ``system_names`` (none without systems.yaml), the task families'
    facets, and ``JUDGE`` when it has a judge.yaml (``downstream``)."""
    return [*STATIC_FACETS, *([ANN_SETTINGS] if spec_names else []), *(ann_spec_facet(name) for name in spec_names),
            *([SYSTEMS_SETTINGS] if system_names else []), *(system_facet(name) for name in system_names),
            *TASK_FACETS, TASK_COMPARISON, *([JUDGE] if downstream else [])]


def facet_deps(*facets: Facet) -> list[dg.AssetKey]:
    return [facet.key for facet in facets]


def project_facets(config: ProjectConfig) -> list[Facet]:
    """Every facet of a loaded config folder."""
    specs = [spec.name for spec in config.ann.specs] if config.ann else []
    systems = list(config.systems.systems) if config.systems else []
    return config_facets(specs, systems, downstream=config.downstream is not None)


def facet_partition(facet: Facet, model: str | None, dataset: str | None) -> str | None:
    """The partition of ``facet`` that the (card name, dataset) partition of an asset reads."""
    if facet.partitioned_by is None:
        return None
    return model if facet.partitioned_by == "model" else dataset


def facet_versions(config: ProjectConfig) -> dict[str, dict[str, str]]:
    """The version of every facet partition of ``config`` (``{facet: {partition or "": version}}``):
    what :func:`graphbase.config_observation.observe_config` compares with the versions Dagster holds."""
    return {facet.name: {partition or "": facet.version(config, partition)[0] for partition in facet.partitions(config)}
            for facet in project_facets(config)}
