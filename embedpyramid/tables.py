"""Small renderers for tables shown to people (Dagster metadata, reports, the CLI)."""

from __future__ import annotations

import polars as pl


def markdown_table(frame: pl.DataFrame, float_precision: int = 4) -> str:
    """A GitHub-flavoured Markdown table of ``frame``, all rows, floats rounded for reading."""
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=200,
        float_precision=float_precision,
    ):
        return str(frame)
