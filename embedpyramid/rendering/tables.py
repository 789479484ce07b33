"""Tables of the report, as display frames and as Markdown or HTML text.

The display frames (:func:`comparison_summary`, :func:`slice_summary`, :func:`leaderboard_tables`,
:func:`hsd_summary`) hold formatted strings, so the Markdown and the HTML report show the same
digits. Raw frames (the L1 and L4 sections) are formatted per column at a precision that suits
the column's magnitude: four decimals for values below 1 (metrics), fewer for larger numbers,
none with thousands separators from 1,000 up (QPS, bytes). Numeric columns are right-aligned
in both formats, and every cell is escaped in both (HTML-escaped, and in Markdown also
:func:`escape_markdown`), so text from the data (a query, a document, a model name) never becomes
markup. :func:`key_table_markdown` is the report's key
table as one Markdown string, for an orchestrator to attach as metadata.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

import polars as pl

from embedpyramid.config.slices import ALL_QUERIES
from embedpyramid.rendering.templates import macro

_NUMERIC_TEXT = re.compile(r"^[\s+\-−<>≤≥±\d.,%\[\]/∞×eE†–]*\d[\s+\-−<>≤≥±\d.,%\[\]/∞×eE†–]*$")
_FAMILY_LABELS = {"holm": "Holm", "bh": "BH"}
# Inline Markdown syntax (emphasis, code, links and images, tables, strikethrough, math), the
# backslash itself, and the GFM bare-link starts ``scheme://`` and ``www.``.
_MARKDOWN_INLINE = re.compile(r"[\\`*_\[\]|~$]|(?<=[A-Za-z0-9])(?=://)|(?<=\bwww)(?=\.)", re.IGNORECASE)
# What would open a block at the start of a line: a heading, a bullet, a rule or setext
# underline, an ordered-list marker (``>`` needs nothing: it is HTML-escaped to ``&gt;``).
_MARKDOWN_LINE_START = re.compile(r"^(\s*)(?:([#+\-=])|(\d+)([.)])(?=\s|$))")


def format_cell(value: object, *, float_digits: int = 4) -> str:
    """Text of one cell: floats to ``float_digits`` decimals, lists comma-joined, null empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{float_digits}f}" if math.isfinite(value) else _infinite(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return ", ".join(format_cell(item, float_digits=float_digits) for item in value)
    return str(value)


def column_texts(table: pl.DataFrame) -> dict[str, list[str]]:
    """Every column's cells as text, floats at a precision that suits the column's magnitude."""
    texts = {}
    for name in table.columns:
        column = table[name]
        digits = _decimals(column) if column.dtype.is_float() else 4
        texts[name] = [format_cell(value, float_digits=digits) for value in column.to_list()]
    return texts


def escape_markdown(text: str, *, line_start: bool = False) -> str:
    """``text`` as inert Markdown: HTML-escaped (raw HTML, autolinks ``<…>``, entities), every
    inline Markdown character backslash-escaped (CommonMark §2.4), and bare links broken up
    (``http\\://``, ``www\\.``), so a renderer shows the characters and fetches nothing.

    ``line_start``: the text opens a line, so a leading ``#``, ``-``, ``+``, ``=`` or ``1.`` is
    escaped too (it would open a heading, a list or a rule). Newlines are kept: flatten them
    first where the text must stay one line.
    """
    escaped = _MARKDOWN_INLINE.sub(lambda m: "\\" + m.group(0), text)
    if line_start:
        escaped = "\n".join(_MARKDOWN_LINE_START.sub(_escape_block_marker, line) for line in escaped.split("\n"))
    return html.escape(escaped, quote=False)


def _escape_block_marker(match: re.Match[str]) -> str:
    indent, marker, number, delimiter = match.groups()
    return f"{indent}\\{marker}" if marker else f"{indent}{number}\\{delimiter}"


def markdown_table(table: pl.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``table``: cells escaped (:func:`escape_markdown`,
    pipes included), newlines flattened, numeric columns right-aligned."""
    texts = column_texts(table)

    def cell(text: str) -> str:
        return escape_markdown(" ".join(text.split()))

    align = ["---:" if is_numeric(texts[name]) else "---" for name in table.columns]
    lines = [
        "| " + " | ".join(cell(name) for name in table.columns) + " |",
        "|" + "|".join(align) + "|",
    ]
    lines += [
        "| " + " | ".join(cell(texts[name][row]) for name in table.columns) + " |"
        for row in range(table.height)
    ]
    return "\n".join(lines)


def html_table(table: pl.DataFrame) -> str:
    """An HTML ``<table>`` of ``table``, every cell escaped, numeric columns right-aligned: the
    macro of ``templates/table.html.j2``, returned as markup (a template inserts it as is)."""
    texts = column_texts(table)
    numeric = [is_numeric(texts[name]) for name in table.columns]
    header = list(zip(table.columns, numeric, strict=True))
    rows = [[(texts[name][row], flag) for name, flag in header] for row in range(table.height)]
    return macro("table.html.j2", "table")(header, rows)


def is_numeric(texts: Sequence[str]) -> bool:
    """Whether every non-empty cell reads as a number, an interval or a p-value."""
    filled = [text for text in texts if text.strip()]
    return bool(filled) and all(_NUMERIC_TEXT.match(text) for text in filled)


def format_pvalue(p: float) -> str:
    """p-values to 4 decimals, ``<0.0001`` below that."""
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def format_interval(low: float, high: float) -> str:
    return f"[{_signed(low)}, {_signed(high)}]"


def metric_label(metric: str, aliases: Sequence[str] | None) -> str:
    """``P@1 (= Hit@1 = MRR@1)`` for a metric standing for its aliases."""
    return f"{metric} (= {' = '.join(aliases)})" if aliases else metric


def comparison_summary(comparisons: pl.DataFrame, metrics: Sequence[str] | None = None) -> pl.DataFrame:
    """One display row per dataset, system, pair and metric over all queries (slice ``all``),
    confirmatory rows first; a comparison over fewer than ``min_slice_n`` queries is marked
    ``small n``."""
    rows = comparisons.filter(pl.col("slice_column") == ALL_QUERIES)
    if metrics is not None:
        rows = rows.filter(pl.col("metric").is_in(list(metrics)))
    rows = rows.with_row_index("_order").sort(pl.col("family") != "confirmatory", "_order")
    level, method = confidence_label(comparisons), interval_method(comparisons)
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "system": row["system"],
                "metric": metric_label(row["metric"], row["aliases"]),
                "A": row["model_a"],
                "B": row["model_b"],
                **_statistics_cells(row, level, method),
                "small n": "yes" if row["small_slice"] else "",
            }
            for row in rows.iter_rows(named=True)
        ],
        schema=_summary_columns(level, first=("dataset", "system", "metric", "A", "B"), last=("small n",)),
    )


def slice_summary(comparisons: pl.DataFrame, metric: str) -> pl.DataFrame:
    """One display row per pair and slice of ``metric``; small slices are marked, not hidden."""
    level, method = confidence_label(comparisons), interval_method(comparisons)
    rows = comparisons.filter(pl.col("metric") == metric)
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "A": row["model_a"],
                "B": row["model_b"],
                "slice": slice_label(row["slice_column"], row["slice_value"]),
                **_statistics_cells(row, level, method),
                "small n": "yes" if row["small_slice"] else "",
            }
            for row in rows.iter_rows(named=True)
        ],
        schema=_summary_columns(level, first=("dataset", "A", "B", "slice"), last=("small n",)),
    )


def leaderboard_tables(
    leaderboard: pl.DataFrame,
    floor: pl.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    models_as_columns: int = 6,
) -> list[tuple[str, pl.DataFrame]]:
    """(caption, display table) per dataset and system. Up to ``models_as_columns`` models the
    metrics are rows and each model a column, with the random-ranking floor beside them;
    beyond that each model is a row (and the floor the first row)."""
    rows = leaderboard if metrics is None else leaderboard.filter(pl.col("metric").is_in(list(metrics)))
    tables = []
    for (dataset, system), part in rows.partition_by(["dataset", "system"], as_dict=True, maintain_order=True).items():
        models = part["model"].unique(maintain_order=True).to_list()
        order = part["metric"].unique(maintain_order=True).to_list()
        means = {(r["model"], r["metric"]): r["mean"] for r in part.iter_rows(named=True)}
        counts = {model: part.filter(pl.col("model") == model)["n"].max() for model in models}
        floors = dict(floor.filter(pl.col("dataset") == dataset).select("metric", "mean").rows()) if floor.height else {}
        caption = f"{dataset} · {system}"
        if len(models) <= models_as_columns:
            table = pl.DataFrame(
                [
                    {"metric": "queries", "random ranking": "", **{m: f"{counts[m]:,}" for m in models}},
                    *(
                        {
                            "metric": metric,
                            "random ranking": _mean(floors.get(metric)),
                            **{m: _mean(means.get((m, metric))) for m in models},
                        }
                        for metric in order
                    ),
                ],
                schema=dict.fromkeys(["metric", "random ranking", *models], pl.String()),
            )
        else:
            table = pl.DataFrame(
                [
                    {"model": "random ranking", "queries": "", **{k: _mean(floors.get(k)) for k in order}},
                    *(
                        {"model": m, "queries": f"{counts[m]:,}", **{k: _mean(means.get((m, k))) for k in order}}
                        for m in models
                    ),
                ],
                schema=dict.fromkeys(["model", "queries", *order], pl.String()),
            )
        tables.append((caption, table))
    return tables


def hsd_summary(hsd: pl.DataFrame) -> pl.DataFrame:
    """The Tukey HSD table for display: model, mean, HSD interval, letters, rank interval."""
    level = confidence_label(hsd) if hsd.height else ""
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "model": row["model"],
                "n": f"{row['n']:,}",
                "mean": f"{row['mean']:.4f}",
                f"{level} HSD interval": f"[{row['interval_low']:.4f}, {row['interval_high']:.4f}]",
                "group": row["letters"],
                "rank": str(row["rank_low"]) if row["rank_low"] == row["rank_high"] else f"{row['rank_low']}–{row['rank_high']}",
            }
            for row in hsd.iter_rows(named=True)
        ],
        schema=dict.fromkeys(["dataset", "model", "n", "mean", f"{level} HSD interval", "group", "rank"], pl.String()),
    )


def hsd_pairs_summary(pairs: pl.DataFrame) -> pl.DataFrame:
    """Every pair of the Tukey HSD: delta, simultaneous interval, d_z, HSD p-value."""
    return pl.DataFrame(
        [
            {
                "dataset": row["dataset"],
                "A": row["model_a"],
                "B": row["model_b"],
                "Δ (B − A)": _signed(row["mean_delta"]),
                "simultaneous CI": format_interval(row["ci_low"], row["ci_high"]),
                "d_z": _effect(row["d_z"]),
                "p (HSD)": _with_error(row["p_value"], row["p_value_mc_error"]),
                "different": "yes" if row["significant"] else "no",
            }
            for row in pairs.iter_rows(named=True)
        ],
        schema=dict.fromkeys(["dataset", "A", "B", "Δ (B − A)", "simultaneous CI", "d_z", "p (HSD)", "different"],
                             pl.String()),
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


def first_few(items: Sequence[str], noun: str | None = None, *, shown: int = 3, separator: str = ", ") -> str:
    """A list short enough for one line: every item when there are at most ``shown``, else the
    count, the first ``shown`` and how many more — ``42 settings: a, b, c +39 more`` (without a
    ``noun``: ``a, b, c +39 more``). Where the whole list is wanted (``--verbose``, JSON), pass
    ``shown=len(items)``."""
    if len(items) <= shown:
        return separator.join(items)
    listed = f"{separator.join(items[:shown])} +{len(items) - shown} more"
    return f"{len(items)} {noun}: {listed}" if noun else listed


def confidence_label(table: pl.DataFrame) -> str:
    """The interval level(s) of a table with a ``confidence`` column, e.g. ``95%``."""
    levels = sorted(table["confidence"].unique().to_list())
    return "/".join(f"{level:.0%}" for level in levels)


def interval_method(comparisons: pl.DataFrame) -> str:
    """The configured interval of a comparisons table, read from the rows' methods: the hybrid
    when rows mix ``t`` with bootstrap-t (or its BCa fallback), studentized when any row is (the
    others fell back to BCa), else the one method all rows share."""
    methods = set(comparisons["interval"].to_list())
    if "t" in methods and methods - {"t"}:
        return "hybrid (t where half the deltas or more tie at 0, studentized otherwise)"
    return "studentized" if "studentized" in methods or not methods else methods.pop()


def _statistics_cells(row: dict, level: str, method: str) -> dict[str, str]:
    """The display cells every comparison row shares; † marks a BCa fallback of a studentized
    (or hybrid) interval."""
    return {
        "n": f"{row['n']:,}",
        "mean A": f"{row['mean_a']:.4f}",
        "mean B": f"{row['mean_b']:.4f}",
        "Δ (B − A)": _signed(row["mean_delta"]),
        f"unadjusted {level} CI": format_interval(row["ci_low"], row["ci_high"])
        + (" †" if row["interval"] == "bca" and not method.startswith("bca") else ""),
        "CI MC error": f"±{max(row['ci_low_mc_error'], row['ci_high_mc_error']):.4f}",
        "d_z": _effect(row["d_z"]),
        "p (sign-flip)": _with_error(row["p_value"], row["p_value_mc_error"]),
        "p (t-test)": "" if row["t_p_value"] is None or math.isnan(row["t_p_value"]) else format_pvalue(row["t_p_value"]),
        "family": f"{row['family']} ({_FAMILY_LABELS.get(row['adjustment'], row['adjustment'])}, {row['family_size']})",
        "p (adjusted)": format_pvalue(row["p_adjusted"]),
        "decision": row["decision"],
        "W/T/L": f"{row['wins']}/{row['ties']}/{row['losses']}",
    }


def _summary_columns(level: str, *, first: tuple[str, ...], last: tuple[str, ...] = ()) -> dict[str, pl.DataType]:
    names = [
        *first, "n", "mean A", "mean B", "Δ (B − A)", f"unadjusted {level} CI", "CI MC error", "d_z", "p (sign-flip)",
        "p (t-test)", "family", "p (adjusted)", "decision", "W/T/L", *last,
    ]
    return {name: pl.String() for name in names}


def _decimals(column: pl.Series) -> int:
    finite = column.filter(column.is_finite()).abs() if column.len() else column
    largest = finite.max() if finite.len() else 0.0
    if largest is None or largest < 10:
        return 4
    if largest < 100:
        return 2
    if largest < 1000:
        return 1
    return 0


def _mean(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _signed(value: float) -> str:
    return _infinite(value) if not math.isfinite(value) else f"{value:+.4f}"


def _effect(value: float | None) -> str:
    if value is None or math.isnan(value):
        return ""
    return _infinite(value) if math.isinf(value) else f"{value:+.2f}"


def _with_error(p: float, error: float) -> str:
    if error == 0:
        return format_pvalue(p)
    return f"{format_pvalue(p)} ±{error:.4f}" if error >= 5e-5 else f"{format_pvalue(p)} ±<0.0001"


def _infinite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "+∞" if value > 0 else "−∞"
