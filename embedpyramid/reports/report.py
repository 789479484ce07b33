"""The comparison report: one content model rendered as Markdown and as self-contained HTML.

The report is built once as a sequence of blocks (headings, paragraphs, tables, figures) and
then rendered twice, so the two formats cannot drift apart. The HTML file inlines its CSS and
its SVG figures and references nothing outside itself; the Markdown file links the same figures
as SVG files that :func:`write_report` writes next to it.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass

import polars as pl

from embedpyramid.reports.svg import SVG_NAMESPACE, delta_histogram_svg, forest_plot_svg
from embedpyramid.reports.tables import (
    clip_text,
    comparison_summary,
    confidence_label,
    format_cell,
    html_table,
    markdown_table,
    slice_summary,
)
from embedpyramid.store import StorePath, store_path, write_text

_PAIR_KEYS = ["dataset", "system", "model_a", "model_b"]
_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #222; line-height: 1.4; }
h1, h2, h3 { line-height: 1.2; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tbody tr:nth-child(even) { background: #fafafa; }
figure { margin: 1rem 0 2rem; overflow-x: auto; }
figcaption { font-size: 0.85rem; color: #555; }
p.note { color: #444; font-size: 0.9rem; }
"""


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """Everything one comparison report shows.

    ``leaderboard``: dataset, model, system, metric, mean, n. ``comparisons``: the table of
    :func:`embedpyramid.stats.compare.compare_models`. ``regressions``: the table of
    :func:`embedpyramid.stats.compare.regressions` for ``metric``. ``deltas``: the table of
    :func:`embedpyramid.stats.compare.query_deltas` (per-query deltas, for the distributions).
    ``metric`` is the headline metric of the slice table, the plots and the regression list;
    ``metrics`` limits the leaderboard and comparison table columns (None: every metric).
    """

    leaderboard: pl.DataFrame
    comparisons: pl.DataFrame
    regressions: pl.DataFrame
    deltas: pl.DataFrame
    metric: str
    metrics: tuple[str, ...] | None = None
    title: str = "Embedding model comparison"
    sections: tuple[ReportSection, ...] = ()


@dataclass(frozen=True, eq=False)
class ReportSection:
    """A further section of the report (e.g. the L1 geometry of one model): a title, an
    introduction, captioned tables and figures, in that order."""

    title: str
    intro: str
    tables: tuple[tuple[str, pl.DataFrame], ...] = ()
    figures: tuple[Figure, ...] = ()


@dataclass(frozen=True)
class Figure:
    """An SVG figure: ``name`` is its file stem, ``caption`` its alt text and caption."""

    name: str
    caption: str
    svg: str


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str


@dataclass(frozen=True)
class _Paragraph:
    text: str


@dataclass(frozen=True, eq=False)
class _Table:
    frame: pl.DataFrame


_Block = _Heading | _Paragraph | _Table | Figure


@dataclass(frozen=True)
class ReportFiles:
    """Paths written by :func:`write_report`."""

    markdown: StorePath
    html: StorePath
    figures: tuple[StorePath, ...]


def report_figures(report: ComparisonReport) -> list[Figure]:
    """The forest plot of ``report.metric``, one delta histogram per model pair, and the
    figures of the further sections."""
    return _forest_figures(report) + _histogram_figures(report) + [f for s in report.sections for f in s.figures]


def _forest_figures(report: ComparisonReport) -> list[Figure]:
    metric, comparisons = report.metric, report.comparisons
    if comparisons.filter(pl.col("metric") == metric).is_empty():
        return []
    caption = f"Slice deltas on {metric} with {confidence_label(comparisons)} bootstrap intervals"
    return [Figure(f"forest-{_slug(metric)}", caption, forest_plot_svg(comparisons, metric))]


def _histogram_figures(report: ComparisonReport) -> list[Figure]:
    metric = report.metric
    figures = []
    deltas = report.deltas.filter(pl.col("metric") == metric)
    for index, ((dataset, system, model_a, model_b), pair) in enumerate(
        deltas.partition_by(_PAIR_KEYS, as_dict=True, maintain_order=True).items(), start=1
    ):
        caption = f"Per-query Δ {metric}, {model_b} − {model_a} ({dataset} · {system})"
        svg = delta_histogram_svg(pair["delta"].to_numpy(), title=f"Δ {metric}: {model_b} − {model_a}")
        figures.append(Figure(f"deltas-{index:02d}-{_slug(metric)}", caption, svg))
    return figures


def render_markdown(report: ComparisonReport, *, figures_dir: str = "figures") -> str:
    """The report as Markdown; figures are linked as ``{figures_dir}/{name}.svg``."""
    parts = []
    for block in _blocks(report):
        match block:
            case _Heading(level, text):
                parts.append(f"{'#' * level} {text}")
            case _Paragraph(text):
                parts.append(text)
            case _Table(frame):
                parts.append(markdown_table(frame) if frame.height else "_No rows._")
            case Figure(name, caption):
                parts.append(f"![{caption}]({figures_dir}/{name}.svg)")
    return "\n\n".join(parts) + "\n"


def render_html(report: ComparisonReport) -> str:
    """The report as one self-contained HTML page: inline CSS and SVG, no scripts, no links."""
    parts = []
    for block in _blocks(report):
        match block:
            case _Heading(level, text):
                parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
            case _Paragraph(text):
                parts.append(f'<p class="note">{html.escape(text)}</p>')
            case _Table(frame):
                parts.append(html_table(frame) if frame.height else "<p><em>No rows.</em></p>")
            case Figure(_, caption, svg):
                # An HTML parser puts inline <svg> in the SVG namespace by itself.
                inline = svg.replace(f' xmlns="{SVG_NAMESPACE}"', "", 1)
                caption_html = f"<figcaption>{html.escape(caption)}</figcaption>"
                parts.append(f"<figure>\n{inline}{caption_html}\n</figure>")
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(report.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def write_report(out_dir: str | os.PathLike[str] | StorePath, report: ComparisonReport) -> ReportFiles:
    """Write ``report.md``, ``report.html`` and ``figures/*.svg`` under ``out_dir`` (a local
    folder or a store URL).

    Every file is written to a temporary file and moved into place (:mod:`embedpyramid.store`),
    so a reader never sees a half-written file.
    """
    root = store_path(out_dir)
    figures_dir = root / "figures"
    figure_paths = []
    for figure in report_figures(report):
        path = figures_dir / f"{figure.name}.svg"
        write_text(figure.svg, path)
        figure_paths.append(path)
    markdown_path = root / "report.md"
    html_path = root / "report.html"
    write_text(render_markdown(report, figures_dir="figures"), markdown_path)
    write_text(render_html(report), html_path)
    return ReportFiles(markdown_path, html_path, tuple(figure_paths))


def _blocks(report: ComparisonReport) -> list[_Block]:
    comparisons, metric = report.comparisons, report.metric
    return [
        _Heading(1, report.title),
        _Paragraph(_settings_note(comparisons)),
        _Heading(2, "Leaderboard"),
        _Table(_leaderboard_table(report.leaderboard, report.metrics)),
        _Heading(2, "Comparisons over all queries"),
        _Table(comparison_summary(comparisons, report.metrics)),
        _Heading(2, f"Slices: {metric}"),
        _Paragraph(
            "Each slice's mean delta with its interval and n, so that an average gain cannot "
            "hide a regression in one slice. Slices marked 'small n' have too few queries for "
            "a reliable interval; they are shown, not hidden."
        ),
        _Table(slice_summary(comparisons, metric)),
        *_forest_figures(report),
        _Heading(2, f"Per-query delta distribution: {metric}"),
        *_histogram_figures(report),
        _Heading(2, f"Worst regressions and best improvements: {metric}"),
        *_regression_blocks(report.regressions),
        *(block for section in report.sections for block in _section_blocks(section)),
    ]


def _section_blocks(section: ReportSection) -> list[_Block]:
    blocks: list[_Block] = [_Heading(2, section.title), _Paragraph(section.intro)]
    for caption, frame in section.tables:
        blocks += [_Paragraph(caption), _Table(frame)]
    return blocks + list(section.figures)


def _settings_note(comparisons: pl.DataFrame) -> str:
    if comparisons.is_empty():
        return "No model pairs to compare."
    first = comparisons.row(0, named=True)
    families = "; ".join(comparisons["holm_family"].unique(maintain_order=True).to_list())
    return (
        "Deltas are B − A per query (A is the baseline). Intervals: paired bootstrap, "
        f"{confidence_label(comparisons)} percentile, {first['n_resamples']} resamples, "
        f"seed {first['seed']}, resampling by {first['resampling']}. p: two-sided paired "
        f"sign-flip test ({first['n_permutations']} sign patterns, exact when fewer exist); "
        f"p (Holm): Holm-adjusted within each family — {families}. W/T/L: queries where B "
        "wins, ties or loses."
    )


def _leaderboard_table(
    leaderboard: pl.DataFrame, metrics: tuple[str, ...] | None
) -> pl.DataFrame:
    """Wide leaderboard: one row per dataset, system and model; one column per metric."""
    rows = leaderboard
    if metrics is not None:
        rows = rows.filter(pl.col("metric").is_in(list(metrics)))
    if rows.is_empty():
        return pl.DataFrame()
    index = ["dataset", "system", "model"]
    counts = rows.group_by(index, maintain_order=True).agg(pl.col("n").max())
    wide = rows.pivot(on="metric", index=index, values="mean", aggregate_function=None)
    return counts.join(wide, on=index, how="left", maintain_order="left")


def _regression_blocks(regressions: pl.DataFrame) -> list[_Block]:
    if regressions.is_empty():
        return [_Paragraph("No query changed by more than the tie tolerance.")]
    blocks: list[_Block] = []
    for (dataset, system, model_a, model_b), pair in regressions.partition_by(
        _PAIR_KEYS, as_dict=True, maintain_order=True
    ).items():
        blocks.append(_Heading(3, f"{model_b} − {model_a} ({dataset} · {system})"))
        for direction, title in (("regression", "Regressions"), ("improvement", "Improvements")):
            listed = pair.filter(pl.col("direction") == direction)
            table = pl.DataFrame(
                [
                    {
                        "#": str(row["rank"]),
                        "query": row["query_id"],
                        "text": clip_text(row["text"] or "", 120),
                        "A": f"{row['value_a']:.4f}",
                        "B": f"{row['value_b']:.4f}",
                        "Δ": f"{row['delta']:+.4f}",
                        "gold": clip_text(format_cell(row["gold_doc_ids"]), 80),
                        "top-1 A": _top_document(row, "a"),
                        "top-1 B": _top_document(row, "b"),
                    }
                    for row in listed.iter_rows(named=True)
                ],
                schema=dict.fromkeys(
                    ["#", "query", "text", "A", "B", "Δ", "gold", "top-1 A", "top-1 B"],
                    pl.String(),
                ),
            )
            blocks += [_Paragraph(f"{title} ({table.height})"), _Table(table)]
    return blocks


def _top_document(row: dict, side: str) -> str:
    doc_id = row[f"top1_{side}"]
    if doc_id is None:
        return "(nothing retrieved)"
    text = row.get(f"top1_{side}_text")
    return f"{doc_id}: {clip_text(text, 80)}" if text else doc_id


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "metric"
