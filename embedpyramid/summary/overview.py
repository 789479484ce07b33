"""The pyramid overview: one screen, per dataset, of what every level concluded.

Per dataset, one line per level, each naming the report section it summarises (the report
links it there):

* ``verdict``: the winner, or the top group, with Δ, its interval and d_z (the retrieval
  verdict of :mod:`embedpyramid.stats.verdict`, exact search, report metric);
* ``slices``: the largest significant slice regression on the report metric (the most negative
  mean delta among the exact comparisons whose adjusted decision is ``worse``), or that none is;
* ``cost``: encode documents/s, bytes per vector and exact-search QPS of the verdict's models
  (the efficiency table);
* ``L4``: the cheapest index of the leader keeping at least 99% of its exact score on the L4
  delta metric — among the sweep points whose ANN mean reaches ``0.99 × exact``, the fewest
  bytes per vector, then the most QPS, then the spec name (the serving summary: every sweep point);
* ``L5``: the system with the highest mean on the report metric, with its confirmatory
  comparison against the same model's exact search (``system_verdicts``);
* ``L6``: the grade analysis's verdict of each (dataset, system);
* ``L3``: whether the public ranking holds on this dataset (each public × own pair).

A level whose source is absent gets a line too, with ``section`` None and the reason, so a
reader sees what the report does not cover rather than nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from embedpyramid.config.slices import ALL_QUERIES
from embedpyramid.rendering.tables import format_interval, format_pvalue, slice_label
from embedpyramid.stats.families import CONFIRMATORY
from embedpyramid.store import StorePath, read_json

OVERVIEW_FILE = "overview.json"
KEEP_SHARE = 0.99
LEVELS = ("verdict", "slices", "cost", "L4", "L5", "L6", "L3")


@dataclass(frozen=True)
class OverviewLine:
    """One line of the overview: ``text`` says what ``level`` concluded on ``dataset``;
    ``section`` is the title of the report section it summarises, None when the level's source
    is absent (``text`` then says why)."""

    dataset: str
    level: str
    text: str
    section: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pyramid_overview(
    datasets: Sequence[str],
    *,
    metric: str,
    verdicts: Sequence[Mapping[str, Any]],
    comparisons: pl.DataFrame,
    efficiency: pl.DataFrame | None = None,
    serving: Mapping[str, pl.DataFrame] | None = None,
    system_verdicts: pl.DataFrame | None = None,
    downstream: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    transfer: Sequence[tuple[str, str]] | None = None,
) -> list[OverviewLine]:
    """The overview lines of every dataset, in ``LEVELS`` order.

    ``verdicts`` are the verdict dicts of the summary (:meth:`Verdict.as_dict`; a dict without
    ``first`` is a dataset with no verdict); ``comparisons`` the comparisons table; ``efficiency``
    the efficiency rows of every (dataset, model) (with ``dataset``); ``serving`` maps a
    model key to the L4 summary of every sweep point (with ``dataset``); ``system_verdicts`` the
    L5 table; ``downstream`` maps a dataset to its (section title, L6 verdict) pairs;
    ``transfer`` the (own dataset, L3 verdict) of every public × own pair, None when the L3
    analysis has not run. None or empty: that level's source is absent.
    """
    lines = []
    for dataset in datasets:
        verdict = next((v for v in verdicts if v["dataset"] == dataset and "first" in v
                        and v.get("system", "exact") == "exact"), None)
        confirmatory = comparisons.filter((pl.col("dataset") == dataset) & (pl.col("system") == "exact")
                                          & (pl.col("metric") == metric) & (pl.col("slice_column") == ALL_QUERIES))
        lines.append(_verdict_line(dataset, verdict, verdicts, small=bool(confirmatory["small_slice"].any())))
        lines.append(_slice_line(dataset, metric, comparisons))
        models = [] if verdict is None else list(dict.fromkeys([*verdict["top_group"], verdict["second"]]))
        lines.append(_cost_line(dataset, models, efficiency))
        lines.append(_serving_line(dataset, None if verdict is None else verdict["first"], serving or {}))
        lines.append(_system_line(dataset, metric, system_verdicts))
        lines.extend(_downstream_lines(dataset, (downstream or {}).get(dataset, ())))
        lines.append(_transfer_line(dataset, transfer))
    return lines


def overview_text(lines: Sequence[OverviewLine]) -> list[str]:
    """The lines as plain text, each followed by the report section it summarises (for the CLI)."""
    return [f"{line.dataset} · {line.level}: {line.text}  [{line.section or 'not in the report'}]" for line in lines]


def read_overview(directory: StorePath) -> list[str]:
    """The overview lines the last report wrote under ``directory``, as plain text (none before a
    report)."""
    path = directory / OVERVIEW_FILE
    return overview_text([OverviewLine(**line) for line in read_json(path)]) if path.is_file() else []


def _verdict_line(
    dataset: str, verdict: Mapping[str, Any] | None, verdicts: Sequence[Mapping[str, Any]], *, small: bool
) -> OverviewLine:
    if verdict is None:
        reason = next((v["text"] for v in verdicts if v["dataset"] == dataset), "no model pair compared")
        return OverviewLine(dataset, "verdict", reason, None)
    test = "Holm" if verdict["adjustment"] == "holm" else "Tukey HSD"
    evidence = (f"Δ {verdict['delta']:+.4f}, {verdict['interval']} {verdict['confidence']:.0%} CI "
                f"{format_interval(verdict['ci_low'], verdict['ci_high'])}, d_z {_number(verdict['d_z'])}, "
                f"p ({test}) {format_pvalue(verdict['p_adjusted'])}")
    where = f"{verdict['metric']}, {verdict['n']:,} queries"
    if verdict["winner"] is not None:
        text = f"winner {verdict['first']} over {verdict['second']} ({where}; {evidence})"
    elif len(verdict["top_group"]) > 1 and verdict["adjustment"] != "holm":
        text = (f"top group {', '.join(verdict['top_group'])}: not distinguishable ({where}; {verdict['first']} over "
                f"the closest contender {verdict['second']}: {evidence})")
    else:
        text = f"no detectable difference between {verdict['first']} and {verdict['second']} ({where}; {evidence})"
    if small:
        text += "; small n"
    return OverviewLine(dataset, "verdict", text, "Comparisons over all queries")


def _slice_line(dataset: str, metric: str, comparisons: pl.DataFrame) -> OverviewLine:
    section = f"Slices: {metric}"
    slices = comparisons.filter((pl.col("dataset") == dataset) & (pl.col("system") == "exact")
                                & (pl.col("metric") == metric) & (pl.col("slice_column") != ALL_QUERIES))
    if slices.is_empty():
        return OverviewLine(dataset, "slices", f"no slice of {metric} compared on {dataset}", None)
    worse = slices.filter(pl.col("decision") == "worse").sort("mean_delta", "model_b", "slice_column", "slice_value")
    if worse.is_empty():
        return OverviewLine(dataset, "slices", f"no slice regression is significant after adjustment "
                                               f"({slices.height} slice comparisons of {metric})", section)
    row = worse.row(0, named=True)
    text = (f"largest significant slice regression: {row['model_b']} vs {row['model_a']} on "
            f"{slice_label(row['slice_column'], row['slice_value'])} (n = {row['n']:,}"
            + (", small n" if row["small_slice"] else "")
            + f"): Δ {row['mean_delta']:+.4f}, unadjusted {row['confidence']:.0%} CI "
            f"{format_interval(row['ci_low'], row['ci_high'])}, p ({row['adjustment'].upper()}) "
            f"{format_pvalue(row['p_adjusted'])}")
    return OverviewLine(dataset, "slices", text, section)


def _cost_line(dataset: str, models: list[str], efficiency: pl.DataFrame | None) -> OverviewLine:
    rows = pl.DataFrame() if efficiency is None or efficiency.is_empty() else efficiency.filter(
        pl.col("dataset") == dataset)
    if models and rows.height:
        rows = rows.filter(pl.col("model").is_in(models))
    if not rows.height:
        return OverviewLine(dataset, "cost", f"no current efficiency measurement on {dataset}", None)
    order = {model: index for index, model in enumerate(models)}
    rows = rows.sort(pl.col("model").replace_strict(order, default=len(order), return_dtype=pl.Int64), "model")
    cells = [f"{row['model']} {_count(row['documents_per_second'])} docs/s · {_count(row['bytes_per_vector'])} B/vector · "
             f"{_count(row['search_qps'])} QPS" for row in rows.iter_rows(named=True)]
    return OverviewLine(dataset, "cost", "encode docs/s · bytes/vector · exact-search QPS: " + "; ".join(cells),
                        f"Cost and quality: {dataset}")


def cheapest_keeping(summary: pl.DataFrame, share: float = KEEP_SHARE) -> dict[str, Any] | None:
    """The sweep point with the fewest bytes per vector (then the most QPS, then the spec
    name) whose ANN mean reaches ``share`` of the exact mean; None when no point does."""
    kept = summary.filter(pl.col("ann_value").is_not_null() & pl.col("exact_value").is_not_null()
                          & (pl.col("ann_value") >= share * pl.col("exact_value")))
    if kept.is_empty():
        return None
    return kept.sort(["bytes_per_vector", "qps", "spec", "sweep_value"], descending=[False, True, False, False],
                     nulls_last=True).row(0, named=True)


def _serving_line(dataset: str, leader: str | None, serving: Mapping[str, pl.DataFrame]) -> OverviewLine:
    if leader is None:
        return OverviewLine(dataset, "L4", "no verdict, so no leader to serve", None)
    summary = serving.get(leader)
    summary = None if summary is None else summary.filter(pl.col("dataset") == dataset)
    if summary is None or summary.is_empty():
        return OverviewLine(dataset, "L4", f"no current L4 serving sweep of {leader} on {dataset}", None)
    metric = summary["delta_metric"][0]
    section = f"L4 serving approximation: {leader} ({dataset})"
    point = cheapest_keeping(summary)
    if point is None:
        best = summary.sort("ann_value", descending=True, nulls_last=True).row(0, named=True)
        return OverviewLine(dataset, "L4", (
            f"no index of {leader} keeps ≥ {KEEP_SHARE:.0%} of exact {metric} (best {best['spec']}: "
            f"{_share(best['ann_value'], best['exact_value'])})"), section)
    setting = f", {point['sweep_param']}={point['sweep_value']}" if point["sweep_param"] else ""
    return OverviewLine(dataset, "L4", (
        f"cheapest index of {leader} keeping ≥ {KEEP_SHARE:.0%} of exact {metric}: {point['spec']}{setting} — "
        f"{point['ann_value']:.4f} vs {point['exact_value']:.4f} ({_share(point['ann_value'], point['exact_value'])}), "
        f"{_count(point['bytes_per_vector'])} B/vector, {_count(point['qps'])} QPS, ANN recall@{point['k']} "
        f"{point['ann_recall']:.3f}"), section)


def _system_line(dataset: str, metric: str, system_verdicts: pl.DataFrame | None) -> OverviewLine:
    rows = pl.DataFrame() if system_verdicts is None or system_verdicts.is_empty() else system_verdicts.filter(
        (pl.col("dataset") == dataset) & (pl.col("metric") == metric) & (pl.col("slice_column") == ALL_QUERIES)
        & (pl.col("family") == CONFIRMATORY))
    if not rows.height:
        return OverviewLine(dataset, "L5", f"no current L5 system compared on {dataset}", None)
    row = rows.sort(["mean_b", "system_b", "model"], descending=[True, False, False]).row(0, named=True)
    return OverviewLine(dataset, "L5", (
        f"best system {row['system_b']} on {row['model']}: {metric} {row['mean_b']:.4f} vs exact {row['mean_a']:.4f}, "
        f"Δ {row['mean_delta']:+.4f}, unadjusted {row['confidence']:.0%} CI {format_interval(row['ci_low'], row['ci_high'])}, "
        f"p (Holm) {format_pvalue(row['p_adjusted'])} — {row['verdict']}"), f"L5 hybrid and rerank systems: {dataset}")


def _downstream_lines(dataset: str, conclusions: Sequence[tuple[str, str]]) -> list[OverviewLine]:
    if not conclusions:
        return [OverviewLine(dataset, "L6", f"no L6 grade analysis of {dataset} (judge.yaml not set or not run)",
                             None)]
    return [OverviewLine(dataset, "L6", text, title) for title, text in conclusions]


def _transfer_line(dataset: str, transfer: Sequence[tuple[str, str]] | None) -> OverviewLine:
    if transfer is None:
        return OverviewLine(dataset, "L3", "the L3 transfer analysis has not run", None)
    own = [text for own_dataset, text in transfer if own_dataset == dataset]
    if not own:
        return OverviewLine(dataset, "L3", f"no public benchmark is paired with {dataset}", None)
    return OverviewLine(dataset, "L3", " ".join(own), "Transfer")


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:+.2f}" if math.isfinite(value) else ("+∞" if value > 0 else "−∞")


def _count(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.0f}"


def _share(value: float | None, exact: float | None) -> str:
    if value is None or not exact:
        return "n/a"
    return f"{value / exact:.1%} of exact"
