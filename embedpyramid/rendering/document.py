"""A report document: one content model rendered as Markdown and as self-contained HTML.

A document is a sequence of blocks (headings, paragraphs, link lists, tables, figures), built
once and rendered twice, so the two formats cannot drift apart. The HTML file is the Jinja2
template ``templates/report.html.j2`` (autoescaped); it inlines its CSS and its SVG figures and
references nothing outside itself (its only links are to its own anchors); the Markdown file
links the same figures as SVG files that :func:`write_document` writes next to it. Text from
the data is HTML-escaped in both formats, and in Markdown its Markdown syntax is escaped too
(:func:`~embedpyramid.rendering.tables.escape_markdown`): a query holding an image, a link,
emphasis or a table row stays text.

Every level describes what it shows as :class:`ReportSection` values (a title, an introduction,
captioned tables, figures); the report that gathers them is built above the levels
(:mod:`embedpyramid.summary.report`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from markupsafe import Markup

from embedpyramid.rendering.svg import SVG_NAMESPACE
from embedpyramid.rendering.tables import escape_markdown, html_table, markdown_table
from embedpyramid.rendering.templates import render
from embedpyramid.store import StorePath, store_path, write_text


@dataclass(frozen=True, eq=False)
class ReportSection:
    """A section of a report (e.g. the L1 geometry of one model): a title, an introduction,
    captioned tables and figures, in that order."""

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
class Heading:
    """A heading; a ``folded`` one opens, in HTML, a closed ``<details>`` that holds everything
    up to the next heading of its level or above."""

    level: int
    text: str
    anchor: str = ""
    folded: bool = False
    kind: ClassVar[str] = "heading"


@dataclass(frozen=True)
class Paragraph:
    text: str
    style: str = "note"
    kind: ClassVar[str] = "paragraph"


@dataclass(frozen=True)
class Links:
    """A list of links to anchors of this document: (anchor, text)."""

    items: tuple[tuple[str, str], ...]
    kind: ClassVar[str] = "links"


@dataclass(frozen=True, eq=False)
class Table:
    frame: pl.DataFrame
    kind: ClassVar[str] = "table"


Block = Heading | Paragraph | Links | Table | Figure


@dataclass(frozen=True)
class _Fold:
    """In HTML, a folded heading and the blocks it folds."""

    heading: Heading
    blocks: list[_HtmlBlock]
    kind: ClassVar[str] = "fold"


@dataclass(frozen=True)
class _InlineFigure:
    """In HTML, a figure's SVG inline (without its namespace: an HTML parser puts inline
    ``<svg>`` in the SVG namespace by itself) and its caption."""

    inline: Markup
    caption: str
    kind: ClassVar[str] = "figure"


_HtmlBlock = Heading | Paragraph | Links | Table | _InlineFigure | _Fold


@dataclass(frozen=True)
class DocumentFiles:
    """Paths written by :func:`write_document`."""

    markdown: StorePath
    html: StorePath
    figures: tuple[StorePath, ...]


def section_blocks(section: ReportSection) -> list[Block]:
    """A section as blocks: its folded heading, its introduction, each caption and table, then
    its figures."""
    blocks: list[Block] = [Heading(2, section.title, folded=True), Paragraph(section.intro)]
    for caption, frame in section.tables:
        blocks += [Paragraph(caption), Table(frame)]
    return blocks + list(section.figures)


def render_markdown(blocks: Sequence[Block], *, figures_dir: str = "figures") -> str:
    """The blocks as Markdown; figures are linked as ``{figures_dir}/{name}.svg``. Text is
    escaped (:func:`~embedpyramid.rendering.tables.escape_markdown`), so neither raw HTML nor
    Markdown (an image, a link, emphasis, a table row) in a query or document reaches a
    Markdown renderer as markup; headings, links and captions are flattened to one line."""
    parts = []
    for block in blocks:
        match block:
            case Heading(level, text, anchor):
                heading = f"{'#' * level} {escape_line(text)}"
                parts.append(f'<a id="{anchor}"></a>\n\n{heading}' if anchor else heading)
            case Paragraph(text, _):
                parts.append(escape_markdown(text, line_start=True))
            case Links(items):
                parts.append("\n".join(f"- [{escape_line(text)}](#{anchor})" for anchor, text in items))
            case Table(frame):
                parts.append(markdown_table(frame) if frame.height else "_No rows._")
            case Figure(name, caption):
                parts.append(f"![{escape_line(caption)}]({figures_dir}/{name}.svg)")
    return "\n\n".join(parts) + "\n"


def render_html(title: str, blocks: Sequence[Block]) -> str:
    """The blocks as one self-contained HTML page (template ``report.html.j2``): inline CSS and
    SVG, no scripts, no links but to its own anchors.

    It fits the window: wide tables scroll inside their own box, figures shrink to the page,
    long words break. Each folded heading and what follows it up to the next heading of its
    level or above are a closed ``<details>``; a "Contents" link stays in the corner of the
    window.
    """
    return render("report.html.j2", title=title, blocks=_html_blocks(blocks), html_table=html_table)


def _html_blocks(blocks: Sequence[Block]) -> list[_HtmlBlock]:
    """``blocks`` with each folded heading and everything up to the next heading of its level or
    above gathered into a :class:`_Fold`, and the figures inline."""
    top: list[_HtmlBlock] = []
    open_folds: list[_Fold] = []  # innermost last
    for block in blocks:
        if isinstance(block, Heading):
            while open_folds and open_folds[-1].heading.level >= block.level:
                open_folds.pop()
        into = open_folds[-1].blocks if open_folds else top
        if isinstance(block, Figure):
            into.append(_InlineFigure(Markup(block.svg.replace(f' xmlns="{SVG_NAMESPACE}"', "", 1)), block.caption))
        elif isinstance(block, Heading) and block.folded:
            fold = _Fold(block, [])
            into.append(fold)
            open_folds.append(fold)
        else:
            into.append(block)
    return top


def write_document(out_dir: str | os.PathLike[str] | StorePath, title: str, blocks: Sequence[Block],
                   figures: Sequence[Figure]) -> DocumentFiles:
    """Write ``report.md``, ``report.html`` and ``figures/*.svg`` under ``out_dir`` (a local
    folder or a store URL).

    Every file is written to a temporary file and moved into place (:mod:`embedpyramid.store`),
    so a reader never sees a half-written file.
    """
    root = store_path(out_dir)
    figure_paths = []
    for figure in figures:
        path = root / "figures" / f"{figure.name}.svg"
        write_text(figure.svg, path)
        figure_paths.append(path)
    markdown_path = root / "report.md"
    html_path = root / "report.html"
    write_text(render_markdown(blocks, figures_dir="figures"), markdown_path)
    write_text(render_html(title, blocks), html_path)
    return DocumentFiles(markdown_path, html_path, tuple(figure_paths))


def escape_line(text: str) -> str:
    """Inert Markdown on one line (a heading, a link text, an alt text)."""
    return escape_markdown(" ".join(text.split()))


def anchor(text: str, used: dict[str, int]) -> str:
    """A unique anchor for a heading: its lower-case words joined by dashes."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    used[base] = used.get(base, 0) + 1
    return base if used[base] == 1 else f"{base}-{used[base]}"


def slug(text: str) -> str:
    """A file stem for ``text``: runs of other characters than letters, digits, ``.``, ``_`` and
    ``-`` become one dash."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "metric"
