"""The comparison report: verdict, leaderboard with its floor, Tukey HSD groups, comparison
table, forest plot, delta distributions, regression lists and the environment record, as
Markdown and self-contained HTML with hand-written SVG."""

from embedpyramid.reports.report import (
    ComparisonReport,
    Figure,
    ReportFiles,
    ReportSection,
    render_html,
    render_markdown,
    report_figures,
    write_report,
)
from embedpyramid.reports.svg import delta_histogram_svg, forest_plot_svg, histogram_svg, svg_markdown
from embedpyramid.reports.tables import (
    comparison_summary,
    hsd_summary,
    html_table,
    key_table_markdown,
    leaderboard_tables,
    markdown_table,
    slice_summary,
)

__all__ = [
    "ComparisonReport",
    "Figure",
    "ReportFiles",
    "ReportSection",
    "comparison_summary",
    "delta_histogram_svg",
    "forest_plot_svg",
    "histogram_svg",
    "hsd_summary",
    "html_table",
    "key_table_markdown",
    "leaderboard_tables",
    "markdown_table",
    "render_html",
    "render_markdown",
    "report_figures",
    "slice_summary",
    "svg_markdown",
    "write_report",
]
