"""Reference numbers as data: the published scores of one dataset, typed in ``datasets.yaml``
(``reference:``) or imported from MTEB result files (``mteb_results:``), as one list.

A (model card, measure, split, subset) may have one published score per dataset: the same key
from both places is an error naming both, so the number a reproduction is checked against is
never a silent choice (two language pairs of one bitext dataset each carry their own score).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from embedpyramid.config import ConfigError, ProjectConfig
from embedpyramid.config.base import resolve_path
from embedpyramid.config.references import reference_split
from embedpyramid.transfer.mteb_results import ImportReport, read_mteb_results, select_scores

REFERENCE_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "metric": pl.String(), "value": pl.Float64(),
    "tolerance": pl.Float64(), "source": pl.String(), "origin": pl.String(), "protocol": pl.String(),
    "split": pl.String(), "subset": pl.String(), "spread_multiple": pl.Float64(),
}


@dataclass(frozen=True)
class PublishedScore:
    """A published score of one model card on one dataset, and where it came from (``origin``:
    ``datasets.yaml`` or the MTEB result file). It passes within ``tolerance`` (a deterministic
    protocol) or within ``spread_multiple`` times the measured spread of a stochastic one."""

    dataset: str
    model: str
    metric: str
    value: float
    tolerance: float | None
    source: str
    origin: str
    protocol: str | None = None
    split: str | None = None
    subset: str | None = None
    spread_multiple: float | None = None


@dataclass(frozen=True)
class DatasetReferences:
    """The published scores of one dataset and, when some were imported, the import's report."""

    scores: list[PublishedScore]
    mteb_import: dict[str, Any] | None = None

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame([asdict(score) for score in self.scores], schema=REFERENCE_SCHEMA)


def dataset_references(config: ProjectConfig, dataset: str) -> DatasetReferences:
    """Every published score of ``dataset`` (a retrieval or a task dataset): typed ones first, then
    imported ones (published under MTEB's protocol)."""
    spec = config.task_datasets[dataset] if dataset in config.task_datasets else config.dataset(dataset)
    datasets_yaml = str(config.directory / "datasets.yaml")
    scores = [PublishedScore(dataset, r.model, r.metric, r.value, r.tolerance, r.source, datasets_yaml, r.protocol,
                             r.split, r.subset, r.spread_multiple)
              for r in spec.reference]
    report: ImportReport | None = None
    if spec.mteb_results is not None:
        folder = resolve_path(config.directory, spec.mteb_results.path)
        report = read_mteb_results(folder, task=spec.mteb_results.task, split=spec.mteb_results.split,
                                   subset=spec.mteb_results.subset)
        for card, chosen in select_scores(report, spec.mteb_results, folder).items():
            scores += [PublishedScore(dataset, card, s.metric, s.value, spec.mteb_results.tolerance, s.source(), str(s.file),
                                      "mteb", None if spec.task != "retrieval" else s.split,
                                      None if spec.mteb_results.subset == "default" else spec.mteb_results.subset,
                                      spec.mteb_results.spread_multiple)
                       for s in chosen]
    first: dict[tuple[str, str, str, str | None], PublishedScore] = {}
    for score in scores:
        key = (score.model, score.metric, reference_split(score.split), score.subset)
        if key in first:
            where = "".join(f", {name} {part}" for name, part in (("split", key[2]), ("subset", key[3]))
                            if part and part != "test")
            raise ConfigError(
                f"{datasets_yaml}: datasets.{dataset}: two published {score.metric} scores for {score.model}{where}: "
                f"{first[key].value} ({first[key].origin}) and {score.value} ({score.origin}); keep one"
            )
        first[key] = score
    return DatasetReferences(scores, None if report is None else _used(report, scores))


def _used(report: ImportReport, scores: list[PublishedScore]) -> dict[str, Any]:
    """The import report restricted to the files the scores came from (what a reader can act on)."""
    files = {score.origin for score in scores}
    unmapped = {key: [f for f in paths if f in files] for key, paths in report.unmapped.items()}
    return {"files": sorted(files), "unmapped": sorted(key for key, paths in unmapped.items() if paths),
            "skipped": report.skipped}

