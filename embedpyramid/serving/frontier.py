"""The recall/QPS trade-off of a model on a dataset: Pareto frontier, QPS at target recall, plot.

Every function reads summary rows of :func:`embedpyramid.serving.evaluate.evaluate_spec` (columns
``spec, sweep_param, sweep_value, ann_recall, qps``), one row per sweep point, possibly of many
specs; the caller selects the rows of one model and dataset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

import polars as pl

from embedpyramid.rendering.svg import svg_document, svg_text

RECALL_TOLERANCE = 1e-9
"""A mean recall within this of a target meets it (means of k-ths are not exact in binary)."""

_POINT_COLUMNS = ("spec", "sweep_param", "sweep_value", "ann_recall", "qps")


def _points(summary: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in _POINT_COLUMNS if c not in summary.columns]
    if missing:
        raise ValueError(f"summary rows lack columns {missing}; expected {', '.join(_POINT_COLUMNS)}")
    return summary.select(_POINT_COLUMNS)


def frontier(summary: pl.DataFrame) -> pl.DataFrame:
    """The Pareto front of (ANN recall, QPS), by recall ascending.

    A point stays when no other point has both recall and QPS at least as high, one of them
    strictly (of exact duplicates, the first in input order stays).
    """
    points = _points(summary).with_row_index("_order")
    by_speed = points.sort(["qps", "ann_recall", "_order"], descending=[True, True, False])
    best_before = by_speed["ann_recall"].cum_max().shift(1, fill_value=-math.inf)
    return by_speed.filter(by_speed["ann_recall"] > best_before).drop("_order").sort("ann_recall", "qps")


def qps_at_recall(summary: pl.DataFrame, targets: Sequence[float]) -> pl.DataFrame:
    """Per target recall, the fastest point whose ANN recall reaches it (nulls when none does).

    Columns: ``target_recall`` then the point's ``spec, sweep_param, sweep_value, ann_recall, qps``.
    """
    points = _points(summary)
    rows = []
    for target in targets:
        reaching = points.filter(pl.col("ann_recall") >= target - RECALL_TOLERANCE)
        best = reaching.sort("qps", descending=True).head(1)
        row = best.row(0, named=True) if best.height else dict.fromkeys(_POINT_COLUMNS)
        rows.append({"target_recall": float(target), **row})
    return pl.DataFrame(rows, schema={"target_recall": pl.Float64, **points.schema}, orient="row")


def frontier_svg(summary: pl.DataFrame, *, title: str = "ANN recall vs QPS") -> str:
    """A standalone SVG: every sweep point (grey, hover for its spec) and the frontier (blue),
    recall on x, QPS on a log10 y axis."""
    points = _points(summary).filter(pl.col("qps") > 0)
    if points.is_empty():
        raise ValueError("no sweep points with a positive QPS to plot")
    front = frontier(points)
    left, top, width, height = 70, 40, 480, 300
    x_lo = min(0.5, points["ann_recall"].min())
    y_lo = math.floor(math.log10(points["qps"].min()))
    y_hi = max(y_lo + 1, math.ceil(math.log10(points["qps"].max())))

    def x(recall: float) -> float:
        return left + (recall - x_lo) / (1.0 - x_lo) * width

    def y(qps: float) -> float:
        return top + height - (math.log10(qps) - y_lo) / (y_hi - y_lo) * height

    parts = [
        f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#bbb"/>',
        svg_text(left + width / 2, top + height + 36, "ANN recall@k", anchor="middle"),
        svg_text(16, top + height / 2, "queries per second", anchor="middle", rotate=True),
        svg_text(left, 24, title, size=14, weight="bold"),
    ]
    for exponent in range(y_lo, y_hi + 1):
        parts.append(svg_text(left - 6, y(10.0**exponent) + 4, f"1e{exponent}", size=11, anchor="end"))
    for tick in (x_lo, (x_lo + 1.0) / 2, 1.0):
        parts.append(svg_text(x(tick), top + height + 16, f"{tick:.2f}", size=11, anchor="middle"))
    path = " ".join(f"{x(r):.1f},{y(q):.1f}" for r, q in front.select("ann_recall", "qps").iter_rows())
    parts.append(f'<polyline points="{path}" fill="none" stroke="#2166ac" stroke-width="2"/>')
    for row in points.iter_rows(named=True):
        sweep = "" if row["sweep_param"] is None else f" {row['sweep_param']}={row['sweep_value']}"
        label = f"{row['spec']}{sweep}: recall {row['ann_recall']:.4f}, {row['qps']:.0f} QPS"
        parts.append(
            f'<circle cx="{x(row["ann_recall"]):.1f}" cy="{y(row["qps"]):.1f}" r="4" fill="#777">'
            f"<title>{escape(label)}</title></circle>"
        )
    return svg_document(left + width + 20, top + height + 50, title, parts)
