import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest

from embedpyramid.reports import (
    ComparisonReport,
    Figure,
    ReportSection,
    comparison_summary,
    delta_histogram_svg,
    forest_plot_svg,
    histogram_svg,
    html_table,
    key_table_markdown,
    markdown_table,
    render_html,
    render_markdown,
    report_figures,
    slice_summary,
    write_report,
)
from embedpyramid.stats.compare import ComparisonSettings, compare_models, query_deltas, regressions

SVG = "{http://www.w3.org/2000/svg}"
BASELINE, CHALLENGER = "base", "tuned <v2> & co"  # a name that needs escaping everywhere


def make_report() -> ComparisonReport:
    rng = np.random.default_rng(0)
    n = 30
    query_ids = [f"q{i:02d}" for i in range(n)]
    queries = pl.DataFrame(
        {
            "query_id": query_ids,
            "text": [" ".join(["word"] * (1 + i % 9)) for i in range(n)],
            "category": ["greetings"] * 24 + ["science"] * 6,
        }
    )
    rows = []
    for model, shift in ((BASELINE, 0.0), (CHALLENGER, 0.05)):
        for metric in ("nDCG@10", "Recall@100"):
            values = np.clip(rng.uniform(0.2, 0.8, size=n) + shift, 0, 1)
            rows += [
                ("chat", model, "exact", q, metric, float(v))
                for q, v in zip(query_ids, values, strict=True)
            ]
    per_query = pl.DataFrame(
        rows, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row"
    )
    settings = ComparisonSettings(baseline=BASELINE, n_resamples=1_000, worst_n=3)
    qrels = pl.DataFrame(
        {"query_id": query_ids, "doc_id": [f"d{i}" for i in range(n)], "relevance": 1}
    )
    runs = {
        model: pl.DataFrame(
            {"query_id": query_ids, "rank": 1, "doc_id": [f"d{(i + k) % n}" for i in range(n)]}
        )
        for k, model in enumerate((BASELINE, CHALLENGER))
    }
    leaderboard = per_query.group_by(
        "dataset", "model", "system", "metric", maintain_order=True
    ).agg(mean=pl.col("value").mean(), n=pl.len())
    return ComparisonReport(
        leaderboard=leaderboard,
        comparisons=compare_models(per_query, queries, settings),
        regressions=regressions(per_query, queries, qrels, runs, settings, "nDCG@10"),
        deltas=query_deltas(per_query, settings),
        metric="nDCG@10",
    )


REPORT = make_report()


class TagCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_markdown_table_formats_and_escapes_cells():
    table = pl.DataFrame(
        {"name": ["a|b", "line\nbreak"], "value": [0.123456, None], "ids": [["d1", "d2"], []]}
    )
    assert markdown_table(table).splitlines() == [
        "| name | value | ids |",
        "|---|---|---|",
        "| a\\|b | 0.1235 | d1, d2 |",
        "| line break |  |  |",
    ]
    assert "<td>&lt;b&gt;</td>" in html_table(pl.DataFrame({"x": ["<b>"]}))


def test_key_table_lists_every_pair_and_metric_over_all_queries():
    summary = comparison_summary(REPORT.comparisons)
    assert summary.height == 2
    assert summary["metric"].to_list() == ["nDCG@10", "Recall@100"]
    everything = REPORT.comparisons.filter(pl.col("slice_column") == "all").row(0, named=True)
    markdown = key_table_markdown(REPORT.comparisons)
    assert markdown.splitlines()[0].startswith("| dataset | system | metric | A | B | n |")
    assert f"[{everything['ci_low']:+.4f}, {everything['ci_high']:+.4f}]" in markdown
    assert key_table_markdown(REPORT.comparisons, ["Recall@100"]).count("\n") == 2


def test_slice_summary_shows_small_slices_flagged():
    summary = slice_summary(REPORT.comparisons, "nDCG@10")
    science = summary.filter(pl.col("slice") == "category = science").row(0, named=True)
    assert (science["n"], science["small n"]) == ("6", "yes")
    assert summary.filter(pl.col("slice") == "all queries")["small n"].to_list() == [""]


def test_forest_plot_is_valid_svg_with_one_mark_per_slice():
    svg = forest_plot_svg(REPORT.comparisons, "nDCG@10")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    rows = REPORT.comparisons.filter(pl.col("metric") == "nDCG@10")
    marks = root.findall(f"{SVG}g")
    assert len(marks) == rows.height
    tooltips = [mark.find(f"{SVG}title").text for mark in marks]
    assert all(CHALLENGER in tooltip for tooltip in tooltips)  # escaped in, parsed back out
    with pytest.raises(ValueError, match="no comparisons for metric 'MAP@10'"):
        forest_plot_svg(REPORT.comparisons, "MAP@10")


def test_delta_histogram_counts_every_query():
    deltas = np.array([-0.5, -0.1, 0.0, 0.0, 0.0, 0.2, 0.5])
    root = ET.fromstring(delta_histogram_svg(deltas, title="Δ <nDCG>", bins=5))
    assert root.tag == f"{SVG}svg"
    bar_counts = [
        int(re.search(r": (\d+) quer", bar.find(f"{SVG}title").text).group(1))
        for bar in root.iter(f"{SVG}rect")
        if bar.find(f"{SVG}title") is not None
    ]
    assert sum(bar_counts) == deltas.size
    assert ET.fromstring(delta_histogram_svg(np.zeros(4))).tag == f"{SVG}svg"
    with pytest.raises(ValueError, match="odd"):
        delta_histogram_svg(deltas, bins=4)


def test_markdown_report_holds_the_tables_and_links_the_figures():
    markdown = render_markdown(REPORT)
    for heading in (
        "# Embedding model comparison",
        "## Leaderboard",
        "## Comparisons over all queries",
        "## Slices: nDCG@10",
        "## Per-query delta distribution: nDCG@10",
        "## Worst regressions and best improvements: nDCG@10",
    ):
        assert heading in markdown.splitlines()
    assert key_table_markdown(REPORT.comparisons) in markdown
    # all + 2 categories + 3 length buckets (1 to 9 words).
    assert "dataset=chat: 1 pair × 2 metrics × 6 slices = 12 tests" in markdown
    for figure in report_figures(REPORT):
        assert f"(figures/{figure.name}.svg)" in markdown


def test_html_report_is_self_contained_and_its_figures_are_valid_svg():
    page = render_html(REPORT)
    assert not re.search(r"https?://", page)
    collector = TagCollector()
    collector.feed(page)
    tags = [tag for tag, _ in collector.tags]
    assert not {"script", "link", "img", "iframe", "object"} & set(tags)
    assert not any("src" in attrs or "href" in attrs for _, attrs in collector.tags)
    assert tags.count("svg") == len(report_figures(REPORT)) == 2
    assert tags.count("table") >= 4
    assert "tuned &lt;v2&gt; &amp; co" in page and CHALLENGER not in page
    for inline in re.findall(r"<svg .*?</svg>", page, flags=re.DOTALL):
        standalone = inline.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
        assert ET.fromstring(standalone).tag == f"{SVG}svg"


def test_write_report_writes_every_file_atomically(tmp_path):
    files = write_report(tmp_path / "out", REPORT)
    assert files.markdown.read_text(encoding="utf-8") == render_markdown(REPORT)
    assert files.html.read_text(encoding="utf-8") == render_html(REPORT)
    names = [f"{figure.name}.svg" for figure in report_figures(REPORT)]
    assert [path.name for path in files.figures] == names
    for path in files.figures:
        assert ET.fromstring(path.read_text(encoding="utf-8")).tag == f"{SVG}svg"
    again = write_report(tmp_path / "out", REPORT)
    assert again == files
    leftovers = [p.name for p in (tmp_path / "out").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_report_without_pairs_still_renders():
    alone = ComparisonReport(
        leaderboard=REPORT.leaderboard.filter(pl.col("model") == BASELINE),
        comparisons=REPORT.comparisons.clear(),
        regressions=REPORT.regressions.clear(),
        deltas=REPORT.deltas.clear(),
        metric="nDCG@10",
    )
    assert report_figures(alone) == []
    markdown = render_markdown(alone)
    assert "No model pairs to compare." in markdown and "## Leaderboard" in markdown
    assert "<svg" not in render_html(alone)


def test_value_histogram_counts_finite_values_of_every_series():
    svg = histogram_svg({"documents": [0.5, 1.0, 1.5, np.nan], "queries": [1.0, 1.1]}, title="Norms", xlabel="norm", bins=5)
    root = ET.fromstring(svg)
    bars = [el for el in root.iter("{http://www.w3.org/2000/svg}rect") if el.find("{http://www.w3.org/2000/svg}title") is not None]
    counts = {}
    for bar in bars:
        name, count = re.fullmatch(r"(\w+) \[.*\): (\d+)", bar.find("{http://www.w3.org/2000/svg}title").text).groups()
        counts[name] = counts.get(name, 0) + int(count)
    assert counts == {"documents": 3, "queries": 2}
    assert "documents: n=3, 1 not finite" in svg
    with pytest.raises(ValueError, match="needs at least one finite value"):
        histogram_svg({"x": [np.nan]}, title="t", xlabel="x")


def test_further_sections_follow_the_comparisons_with_their_tables_and_figures(tmp_path):
    figure = Figure("norms-m", "Norms of m", histogram_svg({"documents": [1.0, 2.0]}, title="Norms", xlabel="norm"))
    section = ReportSection("Geometry: m", "Raw norms.", (("Norm summary", pl.DataFrame({"n": [2]})),), (figure,))
    base = make_report()
    report = ComparisonReport(base.leaderboard, base.comparisons, base.regressions, base.deltas, base.metric,
                              sections=(section,))
    markdown = render_markdown(report)
    assert markdown.index("## Geometry: m") > markdown.index("## Worst regressions")
    assert "Norm summary" in markdown and "(figures/norms-m.svg)" in markdown
    files = write_report(tmp_path, report)
    assert tmp_path / "figures" / "norms-m.svg" in files.figures
