"""Published scores from MTEB result files, in the ``embeddings-benchmark/results`` layout.

The layout (mteb >= 1.11)::

    <folder>/[results/]<org>__<model>/<revision>/model_meta.json   {"name": "org/model", "revision": ...}
    <folder>/[results/]<org>__<model>/<revision>/<Task>.json        {"task_name": "SciFact",
        "mteb_version": "1.12.75", "dataset_revision": "...",
        "scores": {"test": [{"hf_subset": "default", "languages": [...], "main_score": 0.64508,
                             "ndcg_at_10": 0.64508, "recall_at_10": 0.78333, ...}]}}

Metric names are mapped onto this project's measures by :data:`METRIC_TABLE` (``{k}`` is any
cutoff). Every other key of a score dict is *reported* (``ImportReport.unmapped``), never
dropped silently: the ``nauc_*`` calibration scores, ``euclidean_*``/``manhattan_*``
correlations, list-valued ``pearson``/``spearman`` of some mteb versions, the weighted and
per-scoring variants (``f1_weighted``, ``cosine_ap``…), per-experiment lists.

=====================  ==============  ===================================================
MTEB key               project measure  note
=====================  ==============  ===================================================
``ndcg_at_{k}``        ``nDCG@k``       pytrec_eval ``ndcg_cut_k``, linear gain
``recall_at_{k}``      ``Recall@k``     pytrec_eval ``recall_k``
``precision_at_{k}``   ``P@k``          pytrec_eval ``P_k``
``map_at_{k}``         ``MAP@k``        pytrec_eval ``map_cut_k`` (divides by all relevant)
``mrr_at_{k}``         ``MRR@k``        reciprocal rank of the first relevant within k
``hit_rate_at_{k}``    ``Hit@k``        pytrec_eval ``success_k``
``cosine_spearman``    ``Spearman``     STS: Spearman's ρ of cosine vs human scores
``cosine_pearson``     ``Pearson``      STS: Pearson's r of cosine vs human scores
``cos_sim_spearman``   ``Spearman``     older key of the same number (used only when the
``cos_sim_pearson``    ``Pearson``      ``cosine_*`` key is absent)
``accuracy``           ``Accuracy``     classification (mean over experiments), bitext
``f1``                 ``F1``           bitext (weighted), classification (macro)
``v_measure``          ``V-measure``    clustering (v2: mean over bootstrap draws)
``ami``                ``AMI``          clustering
``max_ap``             ``MaxAP``        pair classification: max AP over the scorings
``max_f1``             ``MaxF1``        pair classification
``max_accuracy``       ``MaxAccuracy``  pair classification
``lrap``               ``LRAP``         multi-label classification
``hamming``            ``Hamming``      multi-label classification
=====================  ==============  ===================================================

Which family a measure belongs to is the dataset's task; a task dataset's imported scores are
published under MTEB's protocol and are refused at load unless the dataset runs ``protocol: mteb``.

Scale: mteb writes fractions (0.64508), but results submitted from outside ("external"
revisions) are often percentages (80.28). A score dict holding any mapped value above 1 is read
as percentages and divided by 100 — every mapped measure lies in [0, 1] or [-1, 1] — and the
reference's source says so.

Files without ``scores`` (mteb < 1.11 wrote splits at the top level; some folders hold other
benchmarks' files) are listed in ``ImportReport.skipped`` with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedpyramid.config import ConfigError, MtebResultsImport

METRIC_TABLE: tuple[tuple[str, str], ...] = (
    ("ndcg_at_{k}", "nDCG@{k}"),
    ("recall_at_{k}", "Recall@{k}"),
    ("precision_at_{k}", "P@{k}"),
    ("map_at_{k}", "MAP@{k}"),
    ("mrr_at_{k}", "MRR@{k}"),
    ("hit_rate_at_{k}", "Hit@{k}"),
    ("cosine_spearman", "Spearman"),
    ("cosine_pearson", "Pearson"),
    ("accuracy", "Accuracy"),
    ("f1", "F1"),
    ("v_measure", "V-measure"),
    ("ami", "AMI"),
    ("max_ap", "MaxAP"),
    ("max_f1", "MaxF1"),
    ("max_accuracy", "MaxAccuracy"),
    ("lrap", "LRAP"),
    ("hamming", "Hamming"),
)
"""(MTEB key pattern, project measure) — the table in the module docstring."""

LEGACY_KEYS: dict[str, str] = {"cos_sim_spearman": "cosine_spearman", "cos_sim_pearson": "cosine_pearson"}
"""Older mteb keys and the current key of the same number."""

NOT_METRICS: frozenset[str] = frozenset({"hf_subset", "languages", "main_score", "evaluation_time", "mteb_version"})

_PATTERNS = [(re.compile("^" + mteb.replace("{k}", r"(?P<k>[1-9][0-9]*)") + "$"), project) for mteb, project in METRIC_TABLE]


class MtebImportError(ConfigError):
    """MTEB result files that cannot give the configured scores; the message names the file."""


def project_metric(key: str) -> str | None:
    """The project measure of an MTEB score key (current or legacy name), or None when unmapped."""
    key = LEGACY_KEYS.get(key, key)
    for pattern, project in _PATTERNS:
        match = pattern.match(key)
        if match:
            return project.format(**match.groupdict())
    return None


@dataclass(frozen=True)
class MtebScore:
    """One imported score, with everything needed to cite it."""

    model_name: str
    revision: str
    task: str
    split: str
    subset: str
    key: str
    metric: str
    value: float
    percent_scale: bool
    main: bool
    mteb_version: str | None
    file: Path

    def source(self) -> str:
        scale = ", read as percent" if self.percent_scale else ""
        version = f", mteb {self.mteb_version}" if self.mteb_version else ""
        return (f"MTEB results: {self.model_name}@{self.revision}, {self.task} {self.split}/{self.subset}, "
                f"{self.key}{scale}{version} ({self.file.name})")


@dataclass(frozen=True)
class ImportReport:
    """What an import read: the scores, the keys it could not map (key → files) and the files it
    skipped (path → reason)."""

    scores: list[MtebScore]
    unmapped: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"scores": len(self.scores), "unmapped": self.unmapped, "skipped": self.skipped}


def _model_identity(task_file: Path) -> tuple[str, str]:
    meta_path = task_file.parent / "model_meta.json"
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise MtebImportError(f"{meta_path}: not valid JSON ({error}); fix or remove it") from None
    name = meta.get("name") or task_file.parent.parent.name.replace("__", "/", 1)
    return str(name), str(meta.get("revision") or task_file.parent.name)


def read_task_file(path: Path, *, split: str, subset: str) -> tuple[dict[str, Any] | None, str | None, str]:
    """The score dict of (split, subset) in one task file, the file's mteb version, and why it
    gave nothing (empty when it did)."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise MtebImportError(f"{path}: not valid JSON ({error}); fix or remove the file") from None
    if not isinstance(content, dict) or not isinstance(content.get("scores"), dict):
        return None, None, "no 'scores' mapping: not in the current MTEB results layout (mteb >= 1.11)"
    version = content.get("mteb_version")
    splits = content["scores"]
    if split not in splits:
        return None, version, f"no split {split!r} (splits: {', '.join(map(str, splits))})"
    entries = [entry for entry in splits[split] or [] if isinstance(entry, dict)]
    for entry in entries:
        if entry.get("hf_subset") == subset:
            return entry, version, ""
    subsets = ", ".join(str(entry.get("hf_subset")) for entry in entries)
    return None, version, f"split {split!r} has no subset {subset!r} (subsets: {subsets})"


def scores_of(entry: Mapping[str, Any], *, model_name: str, revision: str, task: str, split: str, subset: str,
              mteb_version: str | None, file: Path) -> tuple[list[MtebScore], list[str]]:
    """The mapped scores of one score dict and the keys left unmapped."""
    numeric = {key: float(value) for key, value in entry.items()
               if isinstance(value, int | float) and not isinstance(value, bool)}
    mapped: dict[str, tuple[str, float]] = {}
    unmapped = sorted(key for key in entry if key not in NOT_METRICS and project_metric(key) is None)
    for key, value in sorted(numeric.items(), key=lambda item: item[0] in LEGACY_KEYS):
        metric = project_metric(key)
        if metric is not None and metric not in mapped:
            mapped[metric] = (key, value)
    percent = any(abs(value) > 1.0 for _, value in mapped.values())
    main_score = numeric.get("main_score")
    scores = [
        MtebScore(model_name, revision, task, split, subset, key, metric, value / 100.0 if percent else value,
                  percent, main_score is not None and value == main_score, mteb_version, file)
        for metric, (key, value) in mapped.items()
    ]
    return scores, unmapped


def read_mteb_results(folder: Path, *, task: str, split: str = "test", subset: str = "default") -> ImportReport:
    """Every mapped score of ``task`` (split, subset) in a results folder, for every model in it."""
    scores: list[MtebScore] = []
    unmapped: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for path in sorted(folder.rglob(f"{task}.json")):
        entry, version, reason = read_task_file(path, split=split, subset=subset)
        if entry is None:
            skipped[str(path)] = reason
            continue
        model_name, revision = _model_identity(path)
        found, keys = scores_of(entry, model_name=model_name, revision=revision, task=task, split=split,
                                subset=subset, mteb_version=version, file=path)
        scores += found
        for key in keys:
            unmapped.setdefault(key, []).append(str(path))
    return ImportReport(scores, unmapped, skipped)


def select_scores(report: ImportReport, spec: MtebResultsImport, folder: Path) -> dict[str, list[MtebScore]]:
    """The scores each card of ``spec.models`` gets: its model (and revision, when pinned with
    ``@``), restricted to ``spec.metrics`` or, by default, to the task's main score.

    Raises MtebImportError naming the folder, the model and what exists instead.
    """
    selected: dict[str, list[MtebScore]] = {}
    where = f"{folder}: {spec.task} {spec.split}/{spec.subset}"
    for card, wanted in spec.models.items():
        name, _, revision = wanted.partition("@")
        candidates = [s for s in report.scores if s.model_name == name and (not revision or s.revision == revision)]
        if not candidates:
            found = sorted({f"{s.model_name}@{s.revision}" for s in report.scores}) or ["none"]
            skipped = f"; skipped files: {report.skipped}" if report.skipped else ""
            raise MtebImportError(f"{where}: no result for {wanted!r} (card {card}); found: {', '.join(found)}{skipped}")
        revisions = sorted({s.revision for s in candidates})
        if len(revisions) > 1:
            raise MtebImportError(
                f"{where}: {name!r} has results under several revisions ({', '.join(revisions)}); "
                f"pin one as '{name}@<revision>' for card {card}"
            )
        if spec.metrics is None:
            chosen = [s for s in candidates if s.main]
            if len({s.metric for s in chosen}) != 1:
                raise MtebImportError(
                    f"{where}: cannot tell which measure is the main score of {wanted!r} "
                    f"(main_score matches {sorted({s.metric for s in chosen}) or 'no mapped key'}); list metrics: [...]"
                )
        else:
            by_metric = {s.metric: s for s in candidates}
            missing = [m for m in spec.metrics if m not in by_metric]
            if missing:
                raise MtebImportError(
                    f"{candidates[0].file}: no score for {', '.join(missing)} (card {card}); "
                    f"mapped measures there: {', '.join(sorted(by_metric))}"
                )
            chosen = [by_metric[m] for m in spec.metrics]
        selected[card] = chosen
    return selected
