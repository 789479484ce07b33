"""The three L6 plots as standalone SVG: grades per model (box plot), mean grade with its
confidence interval (bar chart, with the letter groups), and mean grade per model x criterion
(heatmap). All share the grade axis 1..5; hover text comes from ``<title>`` elements.

- box plot: per model, the distribution of per-query grades averaged over the criteria: box
  from the first to the third quartile (linear interpolation), line at the median, diamond at
  the mean, whiskers to the furthest value within 1.5 IQR of the box (Tukey), dots beyond;
- bar chart: per model, the mean of those per-query grades, bar from grade 1, with the t
  interval of :func:`~embedpyramid.downstream.descriptive.describe_grades` and the compact letters;
- heatmap: cell colour from grade 1 (white) to 5 (dark green), labelled "mean (SD)".
"""

from __future__ import annotations

from collections.abc import Mapping
from xml.sax.saxutils import escape

import numpy as np
import polars as pl

from embedpyramid.downstream.descriptive import ALL_CRITERIA
from embedpyramid.rendering.svg import svg_document, svg_text

_LOW, _HIGH = 1.0, 5.0
_BOX = "#2166ac"
_MUTED = "#8c8c8c"
_LEFT, _TOP, _PLOT_HEIGHT, _SLOT = 64, 64, 260, 150
_TITLE_CHAR, _NOTE_CHAR = 8.5, 6.2  # rough widths of a 14 px bold and an 11 px character, to fit the text


def _y(grade: float) -> float:
    return _TOP + _PLOT_HEIGHT - (grade - _LOW) / (_HIGH - _LOW) * _PLOT_HEIGHT


def _grade_axis(width: float, label: str) -> list[str]:
    parts = [f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + _PLOT_HEIGHT}" stroke="#333"/>',
             svg_text(16, _TOP + _PLOT_HEIGHT / 2, label, size=12, anchor="middle", rotate=True)]
    for grade in range(1, 6):
        y = _y(grade)
        parts.append(f'<line x1="{_LEFT - 5}" x2="{width - 16}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                     + svg_text(_LEFT - 8, y + 4, str(grade), size=11, anchor="end"))
    return parts


def _width(models: list[str], title: str, note: str) -> float:
    return max(_LEFT + _SLOT * len(models) + 16, 16 + _TITLE_CHAR * len(title), 16 + _NOTE_CHAR * len(note))


def _model_labels(models: list[str]) -> list[str]:
    return [svg_text(_LEFT + _SLOT * (i + 0.5), _TOP + _PLOT_HEIGHT + 20, model, size=11, anchor="middle")
            for i, model in enumerate(models)]


def box_plot_svg(per_query_means: Mapping[str, np.ndarray], *, title: str = "Grade per query, by model") -> str:
    """Box plot of each model's per-query grades (averaged over the criteria)."""
    models = list(per_query_means)
    if not models or any(np.asarray(v).size == 0 for v in per_query_means.values()):
        raise ValueError("box_plot_svg needs at least one model, each with at least one grade")
    note = "box: quartiles · bar: median · ◇: mean · whiskers: 1.5 IQR · dots: beyond"
    width = _width(models, title, note)
    parts = [svg_text(8, 22, title, size=14, weight="bold"), svg_text(8, 42, note, size=11, color=_MUTED),
             *_grade_axis(width, "grade (mean over criteria)")]
    for index, model in enumerate(models):
        values = np.asarray(per_query_means[model], dtype=np.float64)
        q1, median, q3 = np.percentile(values, [25, 50, 75])
        reach = 1.5 * (q3 - q1)
        low_whisker = values[values >= q1 - reach].min()
        high_whisker = values[values <= q3 + reach].max()
        outliers = np.unique(values[(values < low_whisker) | (values > high_whisker)], return_counts=True)
        center, half = _LEFT + _SLOT * (index + 0.5), _SLOT * 0.25
        tooltip = (f"{model}: n={values.size}, mean {values.mean():.3f}, median {median:.3f}, "
                   f"quartiles {q1:.3f}-{q3:.3f}, whiskers {low_whisker:.3f}-{high_whisker:.3f}")
        parts.append(
            f"<g><title>{escape(tooltip)}</title>"
            f'<line x1="{center:.1f}" x2="{center:.1f}" y1="{_y(high_whisker):.1f}" y2="{_y(low_whisker):.1f}" stroke="#333"/>'
            + "".join(f'<line x1="{center - half / 2:.1f}" x2="{center + half / 2:.1f}" y1="{_y(v):.1f}" y2="{_y(v):.1f}" '
                      'stroke="#333"/>' for v in (low_whisker, high_whisker))
            + f'<rect x="{center - half:.1f}" y="{_y(q3):.1f}" width="{2 * half:.1f}" height="{_y(q1) - _y(q3):.1f}" '
            f'fill="{_BOX}" fill-opacity="0.25" stroke="{_BOX}"/>'
            f'<line x1="{center - half:.1f}" x2="{center + half:.1f}" y1="{_y(median):.1f}" y2="{_y(median):.1f}" '
            f'stroke="{_BOX}" stroke-width="2.5"/>'
            f'<path d="M{center:.1f},{_y(values.mean()) - 5:.1f} l5,5 l-5,5 l-5,-5 z" fill="white" stroke="#333"/>'
            + "".join(f'<circle cx="{center:.1f}" cy="{_y(v):.1f}" r="2.5" fill="{_MUTED}"><title>{v:.3f}: {count} '
                      f'{"query" if count == 1 else "queries"}</title></circle>' for v, count in zip(*outliers, strict=True))
            + "</g>"
        )
    parts += _model_labels(models)
    return svg_document(width, _TOP + _PLOT_HEIGHT + 36, title, parts)


def bar_chart_svg(descriptive: pl.DataFrame, letters: Mapping[str, str] | None = None, *,
                  title: str = "Mean grade by model") -> str:
    """Bar chart of each model's mean grade (the ``all`` rows of the descriptive table) with its
    confidence interval, and the compact letters above the bars when given."""
    rows = descriptive.filter(pl.col("criterion") == ALL_CRITERIA)
    if rows.is_empty():
        raise ValueError(f"the descriptive table has no '{ALL_CRITERIA}' rows")
    models = rows["model"].to_list()
    confidence = rows["confidence"][0]
    note = f"per-query means, unadjusted {confidence:.0%} t interval; a shared letter: no significant difference (Holm)"
    width = _width(models, title, note)
    parts = [svg_text(8, 22, title, size=14, weight="bold"), svg_text(8, 42, note, size=11, color=_MUTED),
             *_grade_axis(width, f"mean grade, {confidence:.0%} CI")]
    for index, row in enumerate(rows.iter_rows(named=True)):
        center, half = _LEFT + _SLOT * (index + 0.5), _SLOT * 0.3
        low, high = max(row["ci_low"], _LOW), min(row["ci_high"], _HIGH)
        group = (letters or {}).get(row["model"], "")
        tooltip = (f"{row['model']}: mean {row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}], "
                   f"sd {row['sd']:.3f}, n={row['n']}" + (f", group {group}" if group else ""))
        parts.append(
            f"<g><title>{escape(tooltip)}</title>"
            f'<rect x="{center - half:.1f}" y="{_y(row["mean"]):.1f}" width="{2 * half:.1f}" '
            f'height="{_y(_LOW) - _y(row["mean"]):.1f}" fill="{_BOX}" opacity="0.8"/>'
            f'<line x1="{center:.1f}" x2="{center:.1f}" y1="{_y(high):.1f}" y2="{_y(low):.1f}" stroke="#333" stroke-width="1.5"/>'
            + "".join(f'<line x1="{center - 6:.1f}" x2="{center + 6:.1f}" y1="{_y(v):.1f}" y2="{_y(v):.1f}" stroke="#333"/>'
                      for v in (low, high))
            + svg_text(center, _y(high) - 6, f"{row['mean']:.2f}" + (f" {group}" if group else ""), size=11,
                       anchor="middle")
            + "</g>"
        )
    parts += _model_labels(models)
    return svg_document(width, _TOP + _PLOT_HEIGHT + 36, title, parts)


def _cell_colour(grade: float) -> str:
    share = min(max((grade - _LOW) / (_HIGH - _LOW), 0.0), 1.0)
    white, green = np.array([255, 255, 255]), np.array([0, 104, 55])
    red, g, b = (white + share * (green - white)).round().astype(int)
    return f"rgb({red},{g},{b})"


def heatmap_svg(descriptive: pl.DataFrame, *, title: str = "Mean grade by model and criterion") -> str:
    """Heatmap of mean grade (SD) with models as rows and criteria as columns."""
    rows = descriptive.filter(pl.col("criterion") != ALL_CRITERIA)
    if rows.is_empty():
        raise ValueError("the descriptive table has no per-criterion rows")
    models = rows["model"].unique(maintain_order=True).to_list()
    criteria = rows["criterion"].unique(maintain_order=True).to_list()
    cells = {(r["model"], r["criterion"]): r for r in rows.iter_rows(named=True)}
    label_width, cell_width, cell_height, top = 160, 110, 36, 64
    width = max(label_width + cell_width * len(criteria) + 16, 16 + _TITLE_CHAR * len(title))
    height = top + cell_height * len(models) + 16
    parts = [svg_text(8, 22, title, size=14, weight="bold")]
    for column, criterion in enumerate(criteria):
        parts.append(svg_text(label_width + cell_width * (column + 0.5), top - 10, criterion, size=12, anchor="middle"))
    for line, model in enumerate(models):
        y = top + cell_height * line
        parts.append(svg_text(label_width - 8, y + cell_height / 2 + 4, model, size=12, anchor="end"))
        for column, criterion in enumerate(criteria):
            cell = cells.get((model, criterion))
            if cell is None:
                continue
            x = label_width + cell_width * column
            dark = cell["mean"] > 3.5
            tooltip = f"{model} · {criterion}: mean {cell['mean']:.3f}, sd {cell['sd']:.3f}, n={cell['n']}"
            parts.append(
                f"<g><title>{escape(tooltip)}</title>"
                f'<rect x="{x}" y="{y}" width="{cell_width}" height="{cell_height}" '
                f'fill="{_cell_colour(cell["mean"])}" stroke="white"/>'
                + svg_text(x + cell_width / 2, y + cell_height / 2 + 4, f"{cell['mean']:.2f} ({cell['sd']:.2f})",
                           size=12, anchor="middle", color="white" if dark else "#222")
                + "</g>"
            )
    return svg_document(width, height, title, parts)
