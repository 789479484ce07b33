"""Hand-written SVG plots of the report: a forest plot, a delta histogram, a value histogram,
and the building blocks other plots share (a standalone document, a text element).

Each function returns a standalone SVG document (with its ``xmlns``), usable as a file or as
metadata; the HTML report inlines the same markup. Hover text comes from ``<title>`` elements,
so no script is needed.

Why hand-written SVG and not matplotlib: matplotlib's SVG backend needs seven more packages
(pillow, fonttools, kiwisolver, contourpy, cycler, pyparsing and itself) and is slow to import
in every process that writes a figure; its figures are larger, and they lack the per-bar and
per-slice ``<title>`` hover texts the report and its tests rely on. What matplotlib does better,
the choice of axis ticks, :func:`_ticks` borrows.
"""

from __future__ import annotations

import base64
import math
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import polars as pl
from numpy.typing import ArrayLike

from embedpyramid.rendering.tables import (
    clip_text,
    confidence_label,
    escape_markdown,
    format_interval,
    slice_label,
)

SVG_NAMESPACE = "http://www.w3.org/2000/svg"

_FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif"
_BETTER = "#1b7837"  # model B better (in the histogram: deltas above zero)
_WORSE = "#b2182b"  # model B worse
_UNCLEAR = "#4d4d4d"
_MUTED = "#8c8c8c"
_DECISION_COLORS = {"better": _BETTER, "worse": _WORSE, "not significant": _UNCLEAR}


def forest_plot_svg(comparisons: pl.DataFrame, metric: str, *, title: str = "") -> str:
    """Forest plot of ``metric``: each slice's mean delta (B − A) with its (unadjusted) interval.

    One block per (dataset, system, model pair), one line per slice in table order, coloured by
    the adjusted decision of the row's family (``decision``): green, B better; red, B worse;
    grey, not significant. Slices flagged ``small_slice`` get no colour (hollow, grey) whatever
    their p-value. A legend says so; unbounded interval ends are drawn to the plot's edge.
    """
    rows = comparisons.filter(pl.col("metric") == metric)
    if rows.is_empty():
        available = comparisons["metric"].unique(maintain_order=True).to_list()
        raise ValueError(f"no comparisons for metric {metric!r}; available: {available}")

    plot_left, plot_width, row_height = 310, 380, 20
    width = plot_left + plot_width + 290
    finite = [v for v in (*rows["ci_low"], *rows["ci_high"], *rows["mean_delta"]) if math.isfinite(v)]
    lo, hi = _padded_range([*finite, 0.0])

    def x(value: float) -> float:
        return plot_left + (min(max(value, lo), hi) - lo) / (hi - lo) * plot_width

    lines: list[str] = []
    y = 70
    pair_keys = ["dataset", "system", "model_a", "model_b"]
    for (dataset, system, model_a, model_b), block in rows.partition_by(
        pair_keys, as_dict=True, maintain_order=True
    ).items():
        heading = f"{dataset} · {system}: {model_b} − {model_a}"
        lines.append(svg_text(8, y + 14, heading, weight="bold"))
        y += row_height
        for row in block.iter_rows(named=True):
            center = y + row_height / 2
            small = row["small_slice"]
            color = _MUTED if small else _DECISION_COLORS.get(row["decision"], _UNCLEAR)
            label = slice_label(row["slice_column"], row["slice_value"])
            summary = (
                f"{row['mean_delta']:+.4f} {format_interval(row['ci_low'], row['ci_high'])} "
                f"n={row['n']}{' · small n' if small else ''}"
            )
            tooltip = (
                f"{heading} | {label} | Δ {summary} (unadjusted CI) | p ({row['adjustment']}, {row['family']}) "
                f"{row['p_adjusted']:.4g} | {row['decision']}"
            )
            lines.append(
                f"<g><title>{escape(tooltip)}</title>"
                + svg_text(16, center + 4, clip_text(label, 44), color=_MUTED if small else None)
                + f'<line x1="{x(row["ci_low"]):.2f}" x2="{x(row["ci_high"]):.2f}" '
                f'y1="{center:.1f}" y2="{center:.1f}" stroke="{color}" stroke-width="2"/>'
                + f'<rect x="{x(row["mean_delta"]) - 4:.2f}" y="{center - 4:.1f}" width="8" '
                f'height="8" fill="{"white" if small else color}" stroke="{color}" '
                'stroke-width="1.5"/>'
                + svg_text(plot_left + plot_width + 12, center + 4, summary, size=11)
                + "</g>"
            )
            y += row_height
        y += row_height / 2

    axis_top, axis_bottom = 60, y
    axis = [
        f'<line x1="{x(0.0):.2f}" x2="{x(0.0):.2f}" y1="{axis_top}" y2="{axis_bottom:.1f}" '
        'stroke="#999" stroke-dasharray="4 3"/>',
        f'<line x1="{plot_left}" x2="{plot_left + plot_width}" y1="{axis_bottom:.1f}" '
        f'y2="{axis_bottom:.1f}" stroke="#333"/>',
    ]
    for tick, text in _ticks(lo, hi):
        axis.append(
            f'<line x1="{x(tick):.2f}" x2="{x(tick):.2f}" y1="{axis_bottom:.1f}" '
            f'y2="{axis_bottom + 5:.1f}" stroke="#333"/>'
            + svg_text(x(tick), axis_bottom + 18, text, size=11, anchor="middle")
        )
    axis.append(
        svg_text(
            plot_left + plot_width / 2,
            axis_bottom + 36,
            f"Δ {metric} (B − A), mean and unadjusted {confidence_label(rows)} interval",
            size=12,
            anchor="middle",
        )
    )
    title = title or f"Slice deltas on {metric}"
    header = svg_text(8, 22, title, size=15, weight="bold")
    return svg_document(width, axis_bottom + 48, title, [header, *_forest_legend(), *axis, *lines])


def _forest_legend() -> list[str]:
    """Colour key of the forest plot, under its title."""
    entries = [
        (_DECISION_COLORS["better"], _DECISION_COLORS["better"], "B better (adjusted p ≤ α)"),
        (_DECISION_COLORS["worse"], _DECISION_COLORS["worse"], "B worse (adjusted p ≤ α)"),
        (_UNCLEAR, _UNCLEAR, "not significant"),
        ("white", _MUTED, "small slice: not coloured"),
    ]
    parts, left = [], 8
    for fill, stroke, text in entries:
        parts.append(
            f'<rect x="{left}" y="34" width="10" height="10" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            + svg_text(left + 16, 43, text, size=11)
        )
        left += 24 + 7 * len(text)
    return parts


def delta_histogram_svg(deltas: ArrayLike, *, title: str = "", bins: int = 41) -> str:
    """Histogram of per-query deltas over a range symmetric about zero.

    ``bins`` (odd, so one bin is centred on zero) equal-width bins span ``[-m, m]`` with
    ``m = max |delta|``. The subtitle gives n, the mean and the shares below, at and above 0.
    """
    values = np.asarray(deltas, dtype=np.float64).ravel()
    if values.size == 0 or not np.isfinite(values).all():
        raise ValueError("deltas must be a non-empty array of finite numbers")
    if bins < 1 or bins % 2 == 0:
        raise ValueError(f"bins must be a positive odd number (a bin centred on 0); got {bins}")
    extent = float(np.abs(values).max()) or 1.0
    counts, edges = np.histogram(values, bins=bins, range=(-extent, extent))

    width, height = 640, 280
    left, right, top, bottom = 56, 16, 56, 44
    plot_width, plot_height = width - left - right, height - top - bottom
    peak = int(counts.max())

    def x(value: float) -> float:
        return left + (value + extent) / (2 * extent) * plot_width

    def y(count: float) -> float:
        return top + plot_height - count / peak * plot_height

    bars = []
    for index, (count, start, stop) in enumerate(zip(counts, edges[:-1], edges[1:], strict=True)):
        if count:
            color = _BETTER if start > 0 else _WORSE if stop < 0 else _UNCLEAR
            closing = "]" if index == bins - 1 else ")"  # numpy's last bin includes its edge
            queries = "1 query" if count == 1 else f"{count} queries"
            tooltip = f"[{start:+.4f}, {stop:+.4f}{closing}: {queries}"
            bars.append(
                f'<rect x="{x(start):.2f}" y="{y(count):.2f}" width="{x(stop) - x(start):.2f}" '
                f'height="{top + plot_height - y(count):.2f}" fill="{color}" opacity="0.85">'
                f"<title>{escape(tooltip)}</title></rect>"
            )
    base = top + plot_height
    axis = [
        f'<line x1="{left}" x2="{left + plot_width}" y1="{base}" y2="{base}" stroke="#333"/>',
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#333"/>',
        f'<line x1="{x(0.0):.2f}" x2="{x(0.0):.2f}" y1="{top}" y2="{base}" stroke="#999" '
        'stroke-dasharray="4 3"/>',
        svg_text(left - 6, top + 4, str(peak), size=11, anchor="end"),
        svg_text(left - 6, base + 4, "0", size=11, anchor="end"),
        svg_text(14, top + plot_height / 2, "queries", size=11, anchor="middle", rotate=True),
    ]
    for tick, text in _ticks(-extent, extent):
        axis.append(
            f'<line x1="{x(tick):.2f}" x2="{x(tick):.2f}" y1="{base}" y2="{base + 5}" '
            'stroke="#333"/>' + svg_text(x(tick), base + 18, text, size=11, anchor="middle")
        )
    n = values.size
    subtitle = (
        f"n={n}, mean Δ={values.mean():+.4f}; below 0: {np.mean(values < 0):.0%}, "
        f"exactly 0: {np.mean(values == 0):.0%}, above 0: {np.mean(values > 0):.0%}"
    )
    heading = title or "Per-query deltas"
    texts = [
        svg_text(8, 20, heading, size=14, weight="bold"),
        svg_text(8, 40, subtitle, size=12, color=_UNCLEAR),
    ]
    return svg_document(width, height, heading, [*texts, *bars, *axis])


_SERIES_COLORS = ("#2166ac", "#d6604d", "#4d9221", "#762a83")


def histogram_svg(series: dict[str, ArrayLike], *, title: str, xlabel: str, bins: int = 40) -> str:
    """Overlaid histograms of one or more value series on a shared range, with a legend.

    Each series is drawn as semi-transparent bars of its own colour; the y axis counts values.
    Non-finite values are left out and counted in the legend.
    """
    if not series or len(series) > len(_SERIES_COLORS):
        raise ValueError(f"histogram_svg draws 1 to {len(_SERIES_COLORS)} series; got {len(series)}")
    arrays = {name: np.asarray(values, dtype=np.float64).ravel() for name, values in series.items()}
    finite = {name: values[np.isfinite(values)] for name, values in arrays.items()}
    pooled = np.concatenate(list(finite.values()))
    if pooled.size == 0:
        raise ValueError("histogram_svg needs at least one finite value")
    lo, hi = _padded_range([float(pooled.min()), float(pooled.max())])
    edges = np.linspace(lo, hi, bins + 1)
    counts = {name: np.histogram(values, bins=edges)[0] for name, values in finite.items()}
    peak = max(int(c.max()) for c in counts.values()) or 1

    width, height = 640, 300
    left, right, top, bottom = 56, 16, 56 + 16 * len(series), 48
    plot_width, plot_height = width - left - right, height - top - bottom
    base = top + plot_height

    def x(value: float) -> float:
        return left + (value - lo) / (hi - lo) * plot_width

    def y(count: float) -> float:
        return base - count / peak * plot_height

    parts = [svg_text(8, 20, title, size=14, weight="bold")]
    for index, (name, color) in enumerate(zip(arrays, _SERIES_COLORS, strict=False)):
        values, dropped = finite[name], arrays[name].size - finite[name].size
        legend = f"{name}: n={values.size}" + (f", {dropped} not finite" if dropped else "")
        if values.size:
            legend += f", mean {values.mean():.4g}, sd {values.std():.4g}"
        parts.append(f'<rect x="8" y="{32 + 16 * index}" width="10" height="10" fill="{color}"/>')
        parts.append(svg_text(24, 41 + 16 * index, legend, size=12))
        for count, start, stop in zip(counts[name], edges[:-1], edges[1:], strict=True):
            if count:
                parts.append(
                    f'<rect x="{x(start):.2f}" y="{y(count):.2f}" width="{x(stop) - x(start):.2f}" '
                    f'height="{base - y(count):.2f}" fill="{color}" opacity="0.55">'
                    f"<title>{escape(f'{name} [{start:.4g}, {stop:.4g}): {count}')}</title></rect>"
                )
    parts += [
        f'<line x1="{left}" x2="{left + plot_width}" y1="{base}" y2="{base}" stroke="#333"/>',
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#333"/>',
        svg_text(left - 6, top + 4, str(peak), size=11, anchor="end"),
        svg_text(left - 6, base + 4, "0", size=11, anchor="end"),
        svg_text(left + plot_width / 2, height - 8, xlabel, size=12, anchor="middle"),
    ]
    for tick, text in _ticks(lo, hi, signed=False):
        parts.append(
            f'<line x1="{x(tick):.2f}" x2="{x(tick):.2f}" y1="{base}" y2="{base + 5}" stroke="#333"/>'
            + svg_text(x(tick), base + 18, text, size=11, anchor="middle")
        )
    return svg_document(width, height, title, parts)


def svg_markdown(svg: str, alt: str) -> str:
    """An SVG as a Markdown image with a data URI (Dagster's metadata viewer shows it)."""
    return f"![{escape_markdown(' '.join(alt.split()))}](data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()})"


def svg_document(width: float, height: float, title: str, parts: list[str]) -> str:
    """A standalone SVG (with its ``xmlns``) on a white background, titled for hover and alt text."""
    body = "\n".join(parts)
    return (
        f'<svg xmlns="{SVG_NAMESPACE}" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" style="{_FONT}">\n'
        f"<title>{escape(title)}</title>\n"
        f'<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n'
    )


def svg_text(
    x: float,
    y: float,
    text: str,
    *,
    size: int = 12,
    anchor: str = "start",
    weight: str | None = None,
    color: str | None = None,
    rotate: bool = False,
) -> str:
    """A ``<text>`` element, escaped; ``rotate`` turns it to read bottom-up (a y-axis label)."""
    attributes = f'x="{x:.2f}" y="{y:.2f}" font-size="{size}" text-anchor="{anchor}"'
    if weight:
        attributes += f' font-weight="{weight}"'
    if color:
        attributes += f' fill="{color}"'
    if rotate:
        attributes += f" transform={quoteattr(f'rotate(-90 {x:.2f} {y:.2f})')}"
    return f"<text {attributes}>{escape(text)}</text>"


def _padded_range(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    span = hi - lo or max(abs(lo), 1e-3)
    return lo - 0.05 * span, hi + 0.05 * span


def _ticks(lo: float, hi: float, target: int = 5, *, signed: bool = True) -> list[tuple[float, str]]:
    """At most ``target + 1`` round ticks inside [lo, hi], with labels (with an explicit sign for
    deltas when ``signed``): the smallest step of 1, 2 or 5 x 10^k that leaves no more, as
    matplotlib's ``MaxNLocator(nbins=target, steps=[1, 2, 5, 10])`` chooses it, without widening
    the range. On 20,000 random ranges (spans 0.01 to 100, padded as the plots pad them) it draws
    3 to 6 ticks on 98.8% of axes (mean 4.5), where rounding range / target up to such a step
    drew 2 to 5 (mean 3.5), and only 2 on 13.6% of axes."""
    exponent = math.floor(math.log10((hi - lo) / target))

    def inside(step: float) -> range:  # the multiples of step in [lo, hi], forgiving rounding
        return range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)

    # A step of 10^(exponent + 1) is at least (hi - lo) / target: at most target + 1 ticks.
    step = next(step for multiple in (1, 2, 5, 10) if len(inside(step := multiple * 10.0**exponent)) <= target + 1)
    decimals = max(0, -math.floor(math.log10(step)))
    return [(i * step, f"{i * step + 0.0:{'+' if signed else ''}.{decimals}f}" if i else "0") for i in inside(step)]
