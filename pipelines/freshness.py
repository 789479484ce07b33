"""One notion of "stale": Dagster's own, read by the UI, the automation and the CLI alike.

Everything a number depends on reaches Dagster as a version:

- **code**: every asset's ``code_version`` is derived from the source it runs
  (:func:`embedpyramid.code_version.function_version`: its module and the ``embedpyramid`` modules
  its function imports, transitively), so editing core code stales exactly the assets that run it.
- **data**: every asset returns a content hash as its data version (or Dagster derives one from
  its inputs), so re-freezing identical data moves nothing downstream.
- **config**: every fragment of the config folder that changes a number is a *facet*, an
  observable source asset under ``config/`` (group ``config``) whose data version is the sha256
  of the fragment: the card of each model (its data version *is* the card hash), the source of each
  dataset, the search depth, the measures, each dataset's metric conventions, the resampling
  settings, the comparison settings, the ANN settings and each index spec, each task dataset's
  entry (one facet per L2 task family) and the task summary's settings, the L5 latency sample and
  each L5 system (its content hash), and judge.yaml. Facets are partitioned like their fragment
  (per card name, per dataset, per task family's dataset, or not at all), so an edit makes
  exactly the right partitions stale, with the cause "config/<facet> [partition] has a new data
  version".

An asset declares what its numbers depend on by listing facets among its deps::

    @dg.asset(deps=["exact_topk", *facet_deps(MEASURES, CONVENTIONS)],
              code_version=function_version(__file__, "retrieval_metrics"), ...)

and a new pyramid level with a new kind of setting adds one :class:`Facet` (a name, what it
means, how to cut it from a :class:`~embedpyramid.config.ProjectConfig`, how it is partitioned)
to ``STATIC_FACETS``. Nothing else is needed: the CLI and the config sensor report the facets'
current versions as observations (:func:`observe_config`, only when a version changed), and
Dagster's stale status (:func:`asset_states`) does the rest — the UI's "Unsynced", the
:class:`StaleCondition` of the automation and ``embedpyramid run`` / ``status`` all read it.

Dagster exposes that status only through ``CachingStaleStatusResolver`` (the class behind the
UI's GraphQL ``staleStatus``), an internal API: hence the pin ``dagster<1.14``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._time import get_current_datetime

from embedpyramid.config import ProjectConfig
from embedpyramid.config.base import resolve_path
from embedpyramid.data import source_files
from embedpyramid.hashing import sha256_json
from pipelines.partitions import (
    TASK_FAMILIES,
    ann_asset_name,
    dataset_partitions,
    model_partitions,
    system_asset_name,
    task_dataset_partitions,
    task_datasets_name,
)

CONFIG = "config"
State = Literal["fresh", "stale", "missing", "failed"]


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
        return dg.AssetKey([CONFIG, self.name])

    def source_asset(self) -> dg.SourceAsset:
        """The observable source asset; observing it (the UI's "Observe sources") reads the
        config folder of the ``project`` resource."""
        partitions = {"model": model_partitions, "dataset": dataset_partitions, None: None,
                      **task_dataset_partitions}[self.partitioned_by]

        def observe(context: dg.OpExecutionContext) -> dg.DataVersion | dg.DataVersionsByPartition:
            config = context.resources.project.config
            versions = {partition: self.version(config, partition)[0] for partition in self.partitions(config)}
            return dg.DataVersionsByPartition(versions) if self.partitioned_by else dg.DataVersion(versions[None])

        observe.__doc__ = self.description
        with warnings.catch_warnings():
            # Observable source assets are beta in Dagster 1.13; they are what makes Dagster read
            # observed versions as the current version of an external asset.
            warnings.simplefilter("ignore", dg.BetaWarning)
            return dg.observable_source_asset(
                key=self.key, description=self.description, group_name=CONFIG, partitions_def=partitions,
                required_resource_keys={"project"},
            )(observe)

    def partitions(self, config: ProjectConfig) -> list[str | None]:
        if self.partitioned_by == "model":
            return list(config.models)
        if self.partitioned_by == "dataset":
            return config.datasets_with_data()
        if self.partitioned_by in task_dataset_partitions:
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
    from embedpyramid.stats.compare import comparison_settings

    return asdict(comparison_settings(config, dataset))


def _dataset_source(config: ProjectConfig, dataset: str | None) -> dict[str, Any]:
    """A dataset's entry as the loader reads it, and the size and mtime of its source files.

    Touching a file without changing it makes the source look new; the re-freeze then yields
    the same content hash, so nothing downstream moves.
    """
    entry = config.dataset(str(dataset)).model_dump(mode="json", exclude={"drop_self_hits", "group_column", *L3_FIELDS})
    try:
        files = [[str(path), path.stat().st_size, path.stat().st_mtime_ns] for path in source_files(config, str(dataset))]
    except (OSError, ValueError) as error:
        files = [f"unreadable: {error}"]
    return {"entry": entry, "files": files}


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
SEARCH = Facet(
    "search", "protocol.yaml depth: documents retrieved per query by exact search.",
    lambda config, _: {"depth": config.protocol.depth},
)
MEASURES = Facet(
    "measures", "protocol.yaml k_values: the retrieval measures computed per query.",
    lambda config, _: [str(measure) for measure in config.protocol.measures()],
)
CONVENTIONS = Facet(
    "conventions",
    "Each dataset's metric conventions: protocol.yaml gain and relevance_threshold, the dataset's drop_self_hits.",
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
    "protocol.yaml comparison (baseline, pairs, resampling, tests, slices, report metric) with each dataset's "
    "slices and group column, and the cards in models.yaml.",
    lambda config, _: {
        "datasets": {name: _comparison_settings(config, name) for name in config.datasets},
        "report_metric": config.protocol.comparison.report_metric,
        "cards": sorted(model.key for model in config.models.values()),
    },
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
    and mtime of its source file, if it names one."""
    spec = config.task_dataset(str(dataset))
    files = []
    if isinstance(path := getattr(spec, "path", None), str):
        source = resolve_path(config.directory, path)
        files = [[str(source), source.stat().st_size, source.stat().st_mtime_ns] if source.is_file()
                 else f"missing: {source}"]
    return {"entry": spec.model_dump(mode="json"), "files": files}


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


def observe_config(instance: dg.DagsterInstance, config: ProjectConfig) -> list[str]:
    """Report each facet version of ``config`` that differs from the latest one Dagster holds, as
    an observation carrying the fragment; return what changed ("config/measures", ...)."""
    changed = []
    for event in config_observations(instance, config):
        instance.report_runless_asset_event(event)
        changed.append(event.asset_key.to_user_string() + (f" [{event.partition}]" if event.partition else ""))
    return changed


def config_observations(instance: dg.DagsterInstance, config: ProjectConfig) -> list[dg.AssetObservation]:
    """The observations that would bring Dagster's facet versions up to date with ``config``."""
    specs = [spec.name for spec in config.ann.specs] if config.ann else []
    systems = list(config.systems.systems) if config.systems else []
    events = []
    for facet in config_facets(specs, systems, downstream=config.downstream is not None):
        for partition in facet.partitions(config):
            version, fragment = facet.version(config, partition)
            record = instance.get_latest_data_version_record(facet.key, True, partition)
            recorded = record.event_log_entry.tags.get(DATA_VERSION_TAG) if record and record.event_log_entry.tags else None
            if recorded != version:
                events.append(dg.AssetObservation(
                    asset_key=facet.key, partition=partition, tags={DATA_VERSION_TAG: version},
                    metadata={"fragment": dg.MetadataValue.json(fragment),
                              "config_folder": dg.MetadataValue.path(str(config.directory))},
                ))
    return events


@dataclass(frozen=True)
class AssetState:
    """Dagster's view of one asset partition: fresh, stale (with the root causes), missing, or
    failed (its latest materialization attempt failed)."""

    asset: str
    partition: str | None
    state: State
    causes: tuple[str, ...] = ()

    @property
    def needs_work(self) -> bool:
        return self.state != "fresh"


def graph_view(instance: dg.DagsterInstance, asset_graph: Any) -> AssetGraphView:
    """A read view of the instance at this moment (what the automation daemon evaluates on)."""
    return AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance, asset_graph=asset_graph,
    )


def _cause_text(cause: Any, asset: dg.AssetKey, partition: str | None) -> str:
    """"config/measures has a new data version", or just "has a new code version" for the asset itself."""
    if cause.asset_key == asset and cause.partition_key == partition:
        return cause.reason
    where = f" [{cause.partition_key}]" if cause.partition_key else ""
    return f"{cause.asset_key.to_user_string()}{where} {cause.reason}"


def asset_states(view: AssetGraphView, asset_partitions: Iterable[tuple[dg.AssetKey, str | None]]) -> list[AssetState]:
    """The state of each (asset, partition) — None for an unpartitioned asset — as the UI's stale
    status shows it, plus "failed" where the latest attempt failed. One resolver serves them all,
    so shared upstreams are read once."""
    resolver = CachingStaleStatusResolver(view.instance, view.asset_graph, view)
    states = []
    for asset, partition in asset_partitions:
        status = resolver.get_status(asset, partition)
        causes: tuple[str, ...] = ()
        if status == StaleStatus.STALE:
            state: State = "stale"
            causes = tuple(sorted({_cause_text(cause, asset, partition)
                                   for cause in resolver.get_stale_root_causes(asset, partition)}))
        else:
            state = "missing" if status == StaleStatus.MISSING else "fresh"
        if _latest_attempt_failed(view.instance, asset, partition):
            state = "failed"
        states.append(AssetState(asset.to_user_string(), partition, state, causes))
    return states


def _latest_attempt_failed(instance: dg.DagsterInstance, asset: dg.AssetKey, partition: str | None) -> bool:
    records_filter = dg.AssetRecordsFilter(asset, asset_partitions=[partition] if partition else None)
    failed = instance.fetch_failed_materializations(records_filter, limit=1).records
    if not failed:
        return False
    materialized = instance.fetch_materializations(records_filter, limit=1).records
    return not materialized or materialized[0].storage_id < failed[0].storage_id


FRESH_MEMO = "embedpyramid/fresh-at"


def graph_signature(asset_graph: Any, asset_partitions: Iterable[tuple[str, str | None]]) -> str:
    """What Dagster's stale answer depends on besides the event log: every asset's code version
    and dependencies, and the (asset, partition) pairs asked about."""
    nodes = sorted((key.to_user_string(), asset_graph.get(key).code_version,
                    sorted(parent.to_user_string() for parent in asset_graph.get(key).parent_keys))
                   for key in asset_graph.get_all_asset_keys())
    return sha256_json({"nodes": nodes, "asked": sorted(asset_partitions, key=str)})


def known_fresh(instance: dg.DagsterInstance, signature: str) -> bool:
    """Whether Dagster found every asked partition fresh for ``signature`` and nothing has been
    recorded since: a memo of Dagster's own answer, void after any new event (a materialization,
    a failure, a changed config version), so a warm run with nothing to do asks nothing."""
    memo = instance.daemon_cursor_storage.get_cursor_values({FRESH_MEMO}).get(FRESH_MEMO)
    return memo == f"{signature}@{instance.event_log_storage.get_maximum_record_id()}"


def remember_fresh(instance: dg.DagsterInstance, signature: str) -> None:
    """Record that Dagster has just found every partition of ``signature`` fresh."""
    memo = f"{signature}@{instance.event_log_storage.get_maximum_record_id()}"
    instance.daemon_cursor_storage.set_cursor_values({FRESH_MEMO: memo})


class StaleCondition(dg.AutomationCondition):
    """True for the partitions Dagster reports as stale (the UI's "Unsynced"): a config facet,
    an upstream data version or the asset's code version changed since it was materialized.

    The same :func:`asset_states` that ``embedpyramid run`` plans with, so the automation and the
    CLI cannot disagree about what is stale.
    """

    @property
    def name(self) -> str:
        return "stale"

    @property
    def description(self) -> str:
        return "a config facet, an upstream data version or the code version changed since the last materialization"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: Any) -> dg.AutomationResult:
        view = context.asset_graph_view
        candidates = context.candidate_subset.expensively_compute_asset_partitions()
        partitions = sorted({candidate.partition_key for candidate in candidates}, key=str)
        stale = {
            AssetKeyPartitionKey(context.key, state.partition)
            for state in asset_states(view, [(context.key, partition) for partition in partitions])
            if state.state == "stale"
        }
        return dg.AutomationResult(context, true_subset=view.get_asset_subset_from_asset_partitions(context.key, stale))


class UpstreamBusy(dg.AutomationCondition):
    """True while any partitioned asset upstream of the target (at any depth) is requested on
    this tick, in any run, or is being materialized: the summaries wait until every partition
    they read has settled, as ``embedpyramid run`` builds them after the partitions (the
    summaries among themselves run together)."""

    @property
    def name(self) -> str:
        return "upstream_busy"

    @property
    def description(self) -> str:
        return "an upstream partition is requested on this tick or being materialized"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: Any) -> dg.AutomationResult:
        graph = context.asset_graph
        ancestors = {key for key in graph.get_ancestor_asset_keys(context.key)
                     if graph.get(key).is_materializable and graph.get(key).partitions_def is not None}
        requested = any(not context.request_subsets_by_key[key].is_empty
                        for key in ancestors if key in context.request_subsets_by_key)
        running = requested or any(
            ancestors & set(record.dagster_run.asset_selection or ())
            for record in context.asset_graph_view.instance.get_run_records(
                dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
                                        dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED])))
        return dg.AutomationResult(context, true_subset=context.candidate_subset if running else context.get_empty_subset())


def _evaluation_condition(*, summary: bool) -> dg.AutomationCondition:
    """Request what is missing or stale, once: not while it or an upstream runs, not again after
    a failure until an upstream updates (the CLI retries failures when asked; the daemon never
    loops). Per-partition assets wait for missing upstreams (a new dataset is frozen on one tick,
    its partitions evaluated on the next: Dagster runs differently partitioned assets apart). The
    summaries summarize what is evaluated: they need one evaluated upstream partition and wait
    while anything upstream is requested or running (their own group runs together)."""
    needed = (dg.AutomationCondition.missing() | StaleCondition()).with_label("missing or stale")
    condition = (
        needed
        & (~dg.AutomationCondition.execution_failed() | dg.AutomationCondition.any_deps_updated())
        & ~dg.AutomationCondition.in_progress()
        & ~dg.AutomationCondition.any_deps_in_progress()
    )
    materializable = dg.AssetSelection.all()
    if summary:
        partitions = materializable - dg.AssetSelection.groups("summary")
        condition = (
            condition
            & dg.AutomationCondition.any_deps_match(~dg.AutomationCondition.missing()).allow(partitions)
            & ~UpstreamBusy()
        )
    else:
        condition = condition & ~dg.AutomationCondition.any_deps_missing().allow(materializable)
    return condition.with_label("summary: missing or stale" if summary else "missing or stale")


EVALUATE_WHEN_STALE = _evaluation_condition(summary=False)
SUMMARIZE_WHEN_STALE = _evaluation_condition(summary=True)
