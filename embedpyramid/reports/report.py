"""The comparison report: one content model rendered as Markdown and as self-contained HTML.

The report is built once as a sequence of blocks (headings, paragraphs, link lists, tables,
figures) and then rendered twice, so the two formats cannot drift apart. It opens with the
verdict, then a table of contents linking every section by anchor. The HTML file is the
Jinja2 template ``templates/report.html.j2`` (autoescaped); it inlines its CSS and its SVG
figures and references nothing outside itself (its only links are to its own anchors); the
Markdown file links the same figures as SVG files that :func:`write_report` writes next to
it. Text from the data is HTML-escaped in both formats, and in Markdown its Markdown syntax is
escaped too (:func:`~embedpyramid.reports.tables.escape_markdown`): a query holding an image, a
link, emphasis or a table row stays text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import ClassVar

import polars as pl
from markupsafe import Markup

from embedpyramid.reports.overview import OverviewLine
from embedpyramid.reports.svg import SVG_NAMESPACE, delta_histogram_svg, forest_plot_svg
from embedpyramid.reports.tables import (
    clip_text,
    comparison_summary,
    confidence_label,
    escape_markdown,
    format_cell,
    hsd_pairs_summary,
    hsd_summary,
    html_table,
    interval_method,
    leaderboard_tables,
    markdown_table,
    slice_summary,
)
from embedpyramid.reports.templates import render
from embedpyramid.store import StorePath, store_path, write_text

_PAIR_KEYS = ["dataset", "system", "model_a", "model_b"]


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """Everything one comparison report shows.

    ``leaderboard``: dataset, model, system, metric, mean, n. ``comparisons``: the table of
    :func:`embedpyramid.stats.comparisons.compare_models`. ``regressions``: the table of
    :func:`embedpyramid.reports.regressions.regressions` for ``metric``. ``deltas``: the table of
    :func:`embedpyramid.stats.pairing.query_deltas` (per-query deltas, for the distributions).
    ``metric`` is the headline metric of the slice table, the plots and the regression list;
    ``metrics`` limits the leaderboard and comparison table rows (None: every metric).
    ``verdicts`` are the verdict paragraphs the report opens with; ``hsd`` and ``hsd_pairs``
    the Tukey HSD tables (:func:`embedpyramid.stats.hsd_tables.tukey_hsd_tables`); ``floor`` the
    random-ranking floor per dataset and metric (dataset, metric, mean); ``notes`` sentences
    under the leaderboard (ties, judged documents); ``environment`` the closing sections that
    record how the numbers were made; ``overview`` the pyramid overview the report opens with
    (:func:`embedpyramid.reports.overview.pyramid_overview`), each line linked to its section.
    """

    leaderboard: pl.DataFrame
    comparisons: pl.DataFrame
    regressions: pl.DataFrame
    deltas: pl.DataFrame
    metric: str
    metrics: tuple[str, ...] | None = None
    title: str = "Embedding model comparison"
    sections: tuple[ReportSection, ...] = ()
    verdicts: tuple[str, ...] = ()
    hsd: pl.DataFrame = field(default_factory=pl.DataFrame)
    hsd_pairs: pl.DataFrame = field(default_factory=pl.DataFrame)
    floor: pl.DataFrame = field(default_factory=pl.DataFrame)
    notes: tuple[str, ...] = ()
    environment: tuple[ReportSection, ...] = ()
    overview: tuple[OverviewLine, ...] = ()


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
    """A heading; a ``folded`` one opens, in HTML, a closed ``<details>`` that holds everything
    up to the next heading of its level or above."""

    level: int
    text: str
    anchor: str = ""
    folded: bool = False
    kind: ClassVar[str] = "heading"


@dataclass(frozen=True)
class _Paragraph:
    text: str
    style: str = "note"
    kind: ClassVar[str] = "paragraph"


@dataclass(frozen=True)
class _Links:
    """A list of links to anchors of this report: (anchor, text)."""

    items: tuple[tuple[str, str], ...]
    kind: ClassVar[str] = "links"


@dataclass(frozen=True, eq=False)
class _Table:
    frame: pl.DataFrame
    kind: ClassVar[str] = "table"


_Block = _Heading | _Paragraph | _Links | _Table | Figure


@dataclass(frozen=True)
class _Fold:
    """In HTML, a folded heading and the blocks it folds."""

    heading: _Heading
    blocks: list[_HtmlBlock]
    kind: ClassVar[str] = "fold"


@dataclass(frozen=True)
class _InlineFigure:
    """In HTML, a figure's SVG inline (without its namespace: an HTML parser puts inline
    ``<svg>`` in the SVG namespace by itself) and its caption."""

    inline: Markup
    caption: str
    kind: ClassVar[str] = "figure"


_HtmlBlock = _Heading | _Paragraph | _Links | _Table | _InlineFigure | _Fold


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
    caption = (
        f"Slice deltas on {metric} with {confidence_label(comparisons)} intervals, coloured by the "
        "adjusted decision; small slices are not coloured"
    )
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
    """The report as Markdown; figures are linked as ``{figures_dir}/{name}.svg``. Text is
    escaped (:func:`~embedpyramid.reports.tables.escape_markdown`), so neither raw HTML nor
    Markdown (an image, a link, emphasis, a table row) in a query or document reaches a
    Markdown renderer as markup; headings, links and captions are flattened to one line."""
    parts = []
    for block in _blocks(report):
        match block:
            case _Heading(level, text, anchor):
                heading = f"{'#' * level} {_escape_line(text)}"
                parts.append(f'<a id="{anchor}"></a>\n\n{heading}' if anchor else heading)
            case _Paragraph(text, _):
                parts.append(escape_markdown(text, line_start=True))
            case _Links(items):
                parts.append("\n".join(f"- [{_escape_line(text)}](#{anchor})" for anchor, text in items))
            case _Table(frame):
                parts.append(markdown_table(frame) if frame.height else "_No rows._")
            case Figure(name, caption):
                parts.append(f"![{_escape_line(caption)}]({figures_dir}/{name}.svg)")
    return "\n\n".join(parts) + "\n"


def render_html(report: ComparisonReport) -> str:
    """The report as one self-contained HTML page (template ``report.html.j2``): inline CSS and
    SVG, no scripts, no links but to its own anchors.

    It fits the window: wide tables scroll inside their own box, figures shrink to the page,
    long words break. The sections of each model and each model pair (a further section, one
    pair's regressions) are folded into ``<details>``, so the page opens on the verdict and the
    shared tables; a "Contents" link stays in the corner of the window.
    """
    return render("report.html.j2", title=report.title, blocks=_html_blocks(_blocks(report)), html_table=html_table)


def _html_blocks(blocks: list[_Block]) -> list[_HtmlBlock]:
    """``blocks`` with each folded heading and everything up to the next heading of its level or
    above gathered into a :class:`_Fold`, and the figures inline."""
    top: list[_HtmlBlock] = []
    open_folds: list[_Fold] = []  # innermost last
    for block in blocks:
        if isinstance(block, _Heading):
            while open_folds and open_folds[-1].heading.level >= block.level:
                open_folds.pop()
        into = open_folds[-1].blocks if open_folds else top
        if isinstance(block, Figure):
            into.append(_InlineFigure(Markup(block.svg.replace(f' xmlns="{SVG_NAMESPACE}"', "", 1)), block.caption))
        elif isinstance(block, _Heading) and block.folded:
            fold = _Fold(block, [])
            into.append(fold)
            open_folds.append(fold)
        else:
            into.append(block)
    return top


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
    sections: list[list[_Block]] = [
        [
            _Heading(2, "Leaderboard"),
            _Paragraph(
                "Mean over the evaluated queries of every measure, beside what a random ranking of the corpus "
                "scores (its floor, in closed form). Judged@k is the share of the top k with any qrel: unjudged "
                "documents count as non-relevant, so a low Judged@k says a model's other numbers are lower bounds."
            ),
            *(block for caption, table in leaderboard_tables(report.leaderboard, report.floor, report.metrics)
              for block in (_Paragraph(caption), _Table(table))),
            *(_Paragraph(note) for note in report.notes),
        ],
    ]
    if report.hsd.height:
        sections.append([
            _Heading(2, f"Model groups: {metric} (Tukey HSD)"),
            _Paragraph(
                "Randomized Tukey HSD over every pair of models on all queries: models sharing a group letter are "
                "not distinguishable; the rank interval is every rank a model could hold given the significant "
                "pairs. Two models differ exactly when their HSD intervals (mean ± half the critical range) do not "
                f"overlap. {report.hsd['n_permutations'][0]:,} permutations, seed {report.hsd['seed'][0]}."
            ),
            _Table(hsd_summary(report.hsd)),
            _Paragraph("Every pair, with its simultaneous interval:"),
            _Table(hsd_pairs_summary(report.hsd_pairs)),
        ])
    sections += [
        [
            _Heading(2, "Comparisons over all queries"),
            _Paragraph(_settings_note(comparisons)),
            _Table(comparison_summary(comparisons, report.metrics)),
        ],
        [
            _Heading(2, f"Slices: {metric}"),
            _Paragraph(
                "Each slice's mean delta with its interval and n, so that an average gain cannot hide a regression "
                "in one slice. Slices are exploratory (Benjamini–Hochberg). Slices marked 'small n' have too few "
                "queries for a reliable interval: they are shown, not hidden, and not coloured in the plot."
            ),
            _Table(slice_summary(comparisons, metric)),
            *_forest_figures(report),
        ],
        [_Heading(2, f"Per-query delta distribution: {metric}"), *_histogram_figures(report)],
        [_Heading(2, f"Worst regressions and best improvements: {metric}"), *_regression_blocks(report.regressions)],
        *(_section_blocks(section) for section in (*report.sections, *report.environment)),
    ]
    anchors: dict[str, int] = {}
    linked: list[list[_Block]] = []
    for blocks in sections:
        heading = blocks[0]
        assert isinstance(heading, _Heading)
        linked.append([replace(heading, anchor=_anchor(heading.text, anchors)), *blocks[1:]])
    contents = [(block.anchor, block.text) for blocks in linked for block in blocks[:1] if isinstance(block, _Heading)]
    verdicts = [_Paragraph(text, "verdict") for text in report.verdicts] or [_Paragraph("No model pairs to compare.")]
    return [
        _Heading(1, report.title),
        *_overview_blocks(report.overview, linked),
        _Heading(2, "Verdict", "verdict"),
        *verdicts,
        _Heading(2, "Contents", "contents"),
        _Links(tuple(contents)),
        *(block for blocks in linked for block in blocks),
    ]


def _overview_blocks(lines: tuple[OverviewLine, ...], linked: list[list[_Block]]) -> list[_Block]:
    """The overview: each line linked to the anchor of its section; the lines whose section is
    absent (or not in this report) as one paragraph per dataset."""
    if not lines:
        return []
    anchors: dict[str, str] = {}
    for blocks in linked:
        heading = blocks[0]
        if isinstance(heading, _Heading):
            anchors.setdefault(heading.text, heading.anchor)
    blocks: list[_Block] = [_Heading(2, "Overview", "overview")]
    for dataset in dict.fromkeys(line.dataset for line in lines):
        own = [line for line in lines if line.dataset == dataset]
        items = tuple((anchors[line.section], f"{dataset} · {line.level}: {line.text}") for line in own
                      if line.section in anchors)
        unlinked = [f"{line.level}: {line.text}" for line in own if line.section not in anchors]
        blocks += [_Links(items)] if items else []
        blocks += [_Paragraph(f"{dataset} · not in this report — " + "; ".join(unlinked))] if unlinked else []
    return blocks


def _section_blocks(section: ReportSection) -> list[_Block]:
    blocks: list[_Block] = [_Heading(2, section.title, folded=True), _Paragraph(section.intro)]
    for caption, frame in section.tables:
        blocks += [_Paragraph(caption), _Table(frame)]
    return blocks + list(section.figures)


def _settings_note(comparisons: pl.DataFrame) -> str:
    if comparisons.is_empty():
        return "No model pairs to compare."
    first = comparisons.row(0, named=True)
    families = []
    for (dataset, family), rows in comparisons.partition_by(["dataset", "family"], as_dict=True, maintain_order=True).items():
        metrics = rows["metric"].unique(maintain_order=True).to_list()
        adjustment = "Holm" if rows["adjustment"][0] == "holm" else "Benjamini–Hochberg"
        what = f"{', '.join(metrics)} over all queries against the baseline" if family == "confirmatory" else (
            "every other metric, slice and pair")
        families.append(f"{dataset}, {family}: {what} — {rows.height} tests, {adjustment}")
    return (
        "Deltas are B − A per query (A is the baseline). Intervals: unadjusted (each interval "
        "holds its level on its own, not jointly over the family; the adjusted p-value is the family's decision, "
        "and the Tukey HSD table gives simultaneous intervals), "
        f"{confidence_label(comparisons)} {interval_method(comparisons)}, {first['n_resamples']:,} resamples, seed "
        f"{first['seed']}, resampling by {first['resampling']}; † marks a BCa interval where the studentized "
        "one would be unbounded (too few distinct deltas); 'CI MC error' is the Monte-Carlo error of the ends. d_z: mean delta / sd of the deltas. p (sign-flip): two-sided paired sign-flip test "
        f"({first['n_permutations']:,} sign patterns, exact when fewer exist; ± its Monte-Carlo error), the test "
        "the families adjust; p (t-test): the paired t-test, which disagrees on sparse deltas. Families — "
        + "; ".join(families)
        + ". Confirmatory results control the family-wise error; exploratory ones the false discovery rate and "
        "are leads, not conclusions. W/T/L: queries where B wins, ties or loses. Metrics identical by "
        "construction are tested once and listed together."
    )


def _regression_blocks(regressions: pl.DataFrame) -> list[_Block]:
    if regressions.is_empty():
        return [_Paragraph("No query changed by more than the tie tolerance.")]
    blocks: list[_Block] = []
    for (dataset, system, model_a, model_b), pair in regressions.partition_by(
        _PAIR_KEYS, as_dict=True, maintain_order=True
    ).items():
        blocks.append(_Heading(3, f"{model_b} − {model_a} ({dataset} · {system})", folded=True))
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
            blocks += [_Paragraph(_listing_note(title, listed)), _Table(table)]
    return blocks


def _listing_note(title: str, listed: pl.DataFrame) -> str:
    """``Regressions: 10 of 120 shown; 57 queries tie at Δ = -1.0000, 10 of them shown (ties
    ordered by query id).``"""
    if listed.is_empty():
        return f"{title}: none."
    total = listed["n_direction"][0]
    note = f"{title}: {listed.height} of {total:,} shown"
    ties = (
        listed.group_by("delta", maintain_order=True)
        .agg(pl.len().alias("shown"), pl.col("n_tied").first())
        .filter(pl.col("n_tied") > pl.col("shown"))
    )
    disclosed = [
        f"{row['n_tied']:,} queries tie at Δ = {row['delta']:+.4f}, {row['shown']} of them shown"
        for row in ties.iter_rows(named=True)
    ]
    if disclosed:
        note += "; " + "; ".join(disclosed) + " (ties ordered by query id)"
    return note + "."


def _top_document(row: dict, side: str) -> str:
    doc_id = row[f"top1_{side}"]
    if doc_id is None:
        return "(nothing retrieved)"
    text = row.get(f"top1_{side}_text")
    return f"{doc_id}: {clip_text(text, 80)}" if text else doc_id


def _escape_line(text: str) -> str:
    """Inert Markdown on one line (a heading, a link text, an alt text)."""
    return escape_markdown(" ".join(text.split()))


def _anchor(text: str, used: dict[str, int]) -> str:
    """A unique anchor for a heading: its lower-case words joined by dashes."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    used[base] = used.get(base, 0) + 1
    return base if used[base] == 1 else f"{base}-{used[base]}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "metric"
