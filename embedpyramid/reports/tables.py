"""Tables of the comparison report, as display frames and as Markdown or HTML text.

The display frames (:func:`comparison_summary`, :func:`slice_summary`) hold formatted strings,
so the Markdown and the HTML report show the same digits. :func:`key_table_markdown` is the
report's key table as one Markdown string, for an orchestrator to attach as metadata.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import polars as pl

from embedpyramid.stats.compare import ALL_QUERIES


def format_cell(value: object, *, float_digits: int = 4) -> str:
    """Text of one cell: floats to ``float_digits`` decimals, lists comma-joined, null empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{float_digits}f}" if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return ", ".join(format_cell(item, float_digits=float_digits) for item in value)
    return str(value)


def markdown_table(table: pl.DataFrame, *, float_digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table of ``table`` (pipes escaped, newlines flattened)."""

    def cell(value: object) -> str:
        text = format_cell(value, float_digits=float_digits)
        return " ".join(text.split()).replace("|", "\\|")

    lines = [
        "| " + " | ".join(cell(name) for name in table.columns) + " |",
        "|" + "|".join("---" for _ in table.columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in table.iter_rows()]
    return "\n".join(lines)


def html_table(table: pl.DataFrame, *, float_digits: int = 4) -> str:
    """An HTML ``<table>`` of ``table``, every cell escaped."""

    def cell(tag: str, value: object) -> str:
        return f"<{tag}>{html.escape(format_cell(value, float_digits=float_digits))}</{tag}>"

    head = "".join(cell("th", name) for name in table.columns)
    body = "\n".join(
        "<tr>" + "".join(cell("td", value) for value in row) + "</tr>"
        for row in table.iter_rows()
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def format_pvalue(p: float) -> str:
    """p-values to 4 decimals, ``<0.0001`` below that."""
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def format_interval(low: float, high: float) -> str:
    return f"[{low:+.4f}, {high:+.4f}]"


def comparison_summary(
    comparisons: pl.DataFrame, metrics: Sequence[str] | None = None
) -> pl.DataFrame:
    """One display row per dataset, system, pair and metric over all queries (slice ``all``)."""
    rows = comparisons.filter(pl.col("slice_column") == ALL_QUERIES)
    if metrics is not None:
        rows = rows.filter(pl.col("metric").is_in(list(metrics)))
    level = confidence_label(comparisons)
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "system": row["system"],
                "metric": row["metric"],
                "A": row["model_a"],
                "B": row["model_b"],
                **_statistics_cells(row, level),
            }
            for row in rows.iter_rows(named=True)
        ],
        schema=_summary_columns(level, first=("dataset", "system", "metric", "A", "B")),
    )


def _statistics_cells(row: dict, level: str) -> dict[str, str]:
    """The display cells every comparison row shares: n, means, delta, interval, p-values, W/T/L."""
    return {
        "n": str(row["n"]),
        "mean A": f"{row['mean_a']:.4f}",
        "mean B": f"{row['mean_b']:.4f}",
        "Δ (B − A)": f"{row['mean_delta']:+.4f}",
        f"{level} CI": format_interval(row["ci_low"], row["ci_high"]),
        "p": format_pvalue(row["p_value"]),
        "p (Holm)": format_pvalue(row["p_holm"]),
        "W/T/L": f"{row['wins']}/{row['ties']}/{row['losses']}",
    }


def slice_summary(comparisons: pl.DataFrame, metric: str) -> pl.DataFrame:
    """One display row per pair and slice of ``metric``; small slices are marked, not hidden."""
    level = confidence_label(comparisons)
    rows = comparisons.filter(pl.col("metric") == metric)
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "A": row["model_a"],
                "B": row["model_b"],
                "slice": slice_label(row["slice_column"], row["slice_value"]),
                **_statistics_cells(row, level),
                "small n": "yes" if row["small_slice"] else "",
            }
            for row in rows.iter_rows(named=True)
        ],
        schema=_summary_columns(level, first=("dataset", "A", "B", "slice"), last=("small n",)),
    )


def key_table_markdown(comparisons: pl.DataFrame, metrics: Sequence[str] | None = None) -> str:
    """The report's key table (every pair and metric over all queries) as Markdown."""
    return markdown_table(comparison_summary(comparisons, metrics))


def slice_label(slice_column: str, slice_value: str) -> str:
    """``all queries`` for the whole set, ``column = value`` for a slice."""
    return "all queries" if slice_column == ALL_QUERIES else f"{slice_column} = {slice_value}"


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def confidence_label(comparisons: pl.DataFrame) -> str:
    """The interval level(s) of a comparisons table, e.g. ``95%``."""
    levels = sorted(comparisons["confidence"].unique().to_list())
    return "/".join(f"{level:.0%}" for level in levels)


def _summary_columns(
    level: str, *, first: tuple[str, ...], last: tuple[str, ...] = ()
) -> dict[str, pl.DataType]:
    names = [*first, "n", "mean A", "mean B", "Δ (B − A)", f"{level} CI", "p", "p (Holm)"]
    return {name: pl.String() for name in (*names, "W/T/L", *last)}
