import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest
from markdown_it import MarkdownIt

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.rendering.svg import delta_histogram_svg, forest_plot_svg, histogram_svg
from embedpyramid.rendering.tables import (
    comparison_summary,
    escape_markdown,
    first_few,
    hsd_pairs_summary,
    html_table,
    key_table_markdown,
    leaderboard_tables,
    markdown_table,
    slice_summary,
)
from embedpyramid.stats.comparisons import compare_models
from embedpyramid.stats.hsd_tables import tukey_hsd_tables
from embedpyramid.stats.pairing import query_deltas
from embedpyramid.stats.verdict import dataset_verdicts
from embedpyramid.summary.environment import environment_section
from embedpyramid.summary.regressions import regressions
from embedpyramid.summary.report import (
    ComparisonReport,
    Figure,
    ReportSection,
    ranking_table,
    render_html,
    render_markdown,
    report_figures,
    write_report,
)

SVG = "{http://www.w3.org/2000/svg}"
BASELINE, CHALLENGER = "base", "tuned <v2> & co"  # a name that needs escaping everywhere


def make_report() -> ComparisonReport:
    rng = np.random.default_rng(0)
    n = 30
    query_ids = [f"q{i:02d}" for i in range(n)]
    texts = [" ".join(["word"] * (1 + i % 9)) for i in range(n)]
    texts[:2] = ["<script>alert(1)</script> word", "<img src=x onerror=alert(1)>"]  # raw HTML in the data
    queries = pl.DataFrame({"query_id": query_ids, "text": texts, "category": ["greetings"] * 24 + ["science"] * 6})
    rows = []
    for model, shift in ((BASELINE, 0.0), (CHALLENGER, 0.05)):
        for metric in ("nDCG@10", "Recall@100"):
            values = np.clip(rng.uniform(0.2, 0.8, size=n) + shift, 0, 1)
            values[:3] = 0.0 if model == CHALLENGER else 1.0  # three tied worst regressions, two with HTML
            rows += [
                ("chat", model, "exact", q, metric, float(v))
                for q, v in zip(query_ids, values, strict=True)
            ]
    per_query = pl.DataFrame(
        rows, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row"
    )
    settings = ComparisonSettings(baseline=BASELINE, n_resamples=1_000, worst_n=2, report_metric="nDCG@10")
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
    comparisons = compare_models(per_query, queries, settings)
    verdicts = dataset_verdicts(comparisons, pl.DataFrame(), power=0.8, detectable_delta=0.02)
    return ComparisonReport(
        leaderboard=leaderboard,
        comparisons=comparisons,
        regressions=regressions(per_query, queries, qrels, runs, settings, "nDCG@10"),
        deltas=query_deltas(per_query, settings),
        metric="nDCG@10",
        verdicts=tuple(v.text() for v in verdicts),
        verdict_lines=tuple(v.line() for v in verdicts),
        floor=pl.DataFrame({"dataset": ["chat", "chat"], "metric": ["nDCG@10", "Recall@100"], "mean": [0.01, 0.1],
                            "n": [n, n]}),
    )


REPORT = make_report()


class TagCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_markdown_table_formats_escapes_and_aligns_cells():
    table = pl.DataFrame(
        {"name": ["a|b", "line\nbreak <b>"], "value": [0.123456, None], "ids": [["d1", "d2"], []]}
    )
    assert markdown_table(table).splitlines() == [
        "| name | value | ids |",
        "|---|---:|---|",
        "| a\\|b | 0.1235 | d1, d2 |",
        "| line break &lt;b&gt; |  |  |",
    ]
    assert "<td>&lt;b&gt;</td>" in html_table(pl.DataFrame({"x": ["<b>"]}))


def test_numbers_get_a_precision_that_suits_their_column_and_align_right():
    table = pl.DataFrame({"spec": ["flat", "hnsw"], "qps": [12345.678, 987.65], "recall": [0.98765, 1.0],
                          "bytes": [1536, 393216], "p50_ms": [12.3456, 0.5]})
    lines = markdown_table(table).splitlines()
    assert lines[1] == "|---|---:|---:|---:|---:|"
    assert lines[2] == "| flat | 12,346 | 0.9877 | 1,536 | 12.35 |"
    assert lines[3] == "| hnsw | 988 | 1.0000 | 393,216 | 0.50 |"
    assert '<td class="num">12,346</td>' in html_table(table) and "<td>flat</td>" in html_table(table)


def test_key_table_lists_every_pair_and_metric_over_all_queries():
    summary = comparison_summary(REPORT.comparisons)
    assert summary.height == 2
    assert summary["metric"].to_list() == ["nDCG@10", "Recall@100"]
    everything = REPORT.comparisons.filter(pl.col("slice_column") == "all").row(0, named=True)
    markdown = key_table_markdown(REPORT.comparisons)
    assert markdown.splitlines()[0].startswith("| dataset | system | metric | A | B | n |")
    assert f"\\[{everything['ci_low']:+.4f}, {everything['ci_high']:+.4f}\\]" in markdown  # brackets escaped
    assert key_table_markdown(REPORT.comparisons, ["Recall@100"]).count("\n") == 2
    # Family, adjustment, effect size, second test and Monte-Carlo errors are all shown.
    first = summary.row(0, named=True)
    assert first["family"] == "confirmatory (Holm, 1)" and summary.row(1, named=True)["family"].startswith("exploratory (BH")
    assert first["d_z"] == f"{everything['d_z']:+.2f}" and first["p (t-test)"] and first["CI MC error"].startswith("±")
    assert first["decision"] in ("better", "worse", "not significant")
    # The interval beside the adjusted p is the unadjusted one, and says so.
    assert first["unadjusted 95% CI"] == f"[{everything['ci_low']:+.4f}, {everything['ci_high']:+.4f}]"


def test_slice_summary_shows_small_slices_flagged():
    summary = slice_summary(REPORT.comparisons, "nDCG@10")
    science = summary.filter(pl.col("slice") == "category = science").row(0, named=True)
    assert (science["n"], science["small n"]) == ("6", "yes")
    assert science["family"].startswith("exploratory")
    # The default threshold is 30 queries: 24 is flagged, 30 is not.
    greetings = summary.filter(pl.col("slice") == "category = greetings").row(0, named=True)
    assert (greetings["n"], greetings["small n"]) == ("24", "yes")
    assert summary.filter(pl.col("slice") == "all queries")["small n"].to_list() == [""]


def test_comparison_summary_flags_a_comparison_over_fewer_than_30_queries():
    assert comparison_summary(REPORT.comparisons)["small n"].to_list() == ["", ""]
    small = REPORT.comparisons.with_columns(n=pl.lit(29, dtype=pl.Int64), small_slice=pl.lit(True))
    assert comparison_summary(small)["small n"].to_list() == ["yes", "yes"]
    assert "| small n |" in key_table_markdown(small).splitlines()[0]


def test_forest_plot_is_valid_svg_with_one_mark_per_slice():
    svg = forest_plot_svg(REPORT.comparisons, "nDCG@10")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    rows = REPORT.comparisons.filter(pl.col("metric") == "nDCG@10")
    marks = root.findall(f"{SVG}g")
    assert len(marks) == rows.height
    tooltips = [mark.find(f"{SVG}title").text for mark in marks]
    assert all(CHALLENGER in tooltip for tooltip in tooltips)  # escaped in, parsed back out
    # Coloured by the adjusted decision; small slices not coloured; a legend says so.
    for mark, row in zip(marks, rows.iter_rows(named=True), strict=True):
        stroke = mark.find(f"{SVG}line").get("stroke")
        if row["small_slice"]:
            assert stroke == "#8c8c8c" and mark.find(f"{SVG}rect").get("fill") == "white"
        else:
            assert stroke == {"better": "#1b7837", "worse": "#b2182b", "not significant": "#4d4d4d"}[row["decision"]]
    assert "small slice: not coloured" in svg and "B better (adjusted p ≤ α)" in svg
    assert "mean and unadjusted 95% interval" in svg
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


def test_markdown_report_opens_with_the_ranking_and_the_verdict_then_a_table_of_contents():
    markdown = render_markdown(REPORT)
    lines = markdown.splitlines()
    headings = [line for line in lines if line.startswith("#")]
    assert headings[:5] == ["# Embedding model comparison", "## Ranking: nDCG@10", "## Verdict", "## Verdicts in full",
                            "## Contents"]
    assert lines[lines.index("## Verdict") + 2] == escape_markdown(REPORT.verdict_lines[0], line_start=True)
    for heading in (
        "## Leaderboard",
        "## Comparisons over all queries",
        "## Slices: nDCG@10",
        "## Per-query delta distribution: nDCG@10",
        "## Worst regressions and best improvements: nDCG@10",
    ):
        assert heading in lines
    verdict = lines[lines.index("## Verdicts in full") + 2]
    assert verdict.startswith("chat · nDCG@10 over 30 queries: ") and "p (Holm, 1 test)" in verdict and "d\\_z" in verdict
    # Every section is linked from the contents, by an anchor placed before its heading.
    assert "- [Leaderboard](#leaderboard)" in lines and '<a id="leaderboard"></a>' in lines
    assert "- [Slices: nDCG@10](#slices-ndcg-10)" in lines and '<a id="slices-ndcg-10"></a>' in lines
    assert key_table_markdown(REPORT.comparisons) in markdown
    assert "chat, confirmatory: nDCG@10 over all queries against the baseline — 1 tests, Holm" in markdown
    assert "chat, exploratory: every other metric, slice and pair — 11 tests, Benjamini–Hochberg" in markdown
    for figure in report_figures(REPORT):
        assert f"(figures/{figure.name}.svg)" in markdown


def test_markdown_report_escapes_raw_html_from_the_data():
    markdown = render_markdown(REPORT)
    assert "<script>" not in markdown and "<img" not in markdown
    assert "&lt;script&gt;alert(1)&lt;/script&gt; word" in markdown
    assert "&lt;img src=x onerror=alert(1)&gt;" in markdown
    assert "tuned &lt;v2&gt; &amp; co" in markdown and CHALLENGER not in markdown


HOSTILE = "![x](http://127.0.0.1:9/pixel.png) [link](https://example.org) *em* __strong__ a|b ~~gone~~ <b>raw</b>"


def test_escape_markdown_leaves_every_markdown_construct_as_text():
    assert escape_markdown(HOSTILE) == (
        "!\\[x\\](http\\://127.0.0.1:9/pixel.png) \\[link\\](https\\://example.org) \\*em\\* \\_\\_strong\\_\\_ "
        "a\\|b \\~\\~gone\\~\\~ &lt;b&gt;raw&lt;/b&gt;"
    )
    assert escape_markdown("see www.example.org, `code`, $x$ and C:\\dir") == (
        "see www\\.example.org, \\`code\\`, \\$x\\$ and C:\\\\dir")
    # A line opening a block: only at the start of a line, and only when asked.
    assert escape_markdown("# title\n- item\n1. first\n0.5 stays\n=== ", line_start=True) == (
        "\\# title\n\\- item\n1\\. first\n0.5 stays\n\\=== ")
    assert escape_markdown("- item") == "- item"


def test_markdown_report_keeps_markdown_from_the_data_inert():
    section = ReportSection(
        title=f"Section {HOSTILE}",
        intro=f"# {HOSTILE}\n- second line",
        tables=((f"caption {HOSTILE}", pl.DataFrame({"text": [HOSTILE], "value": [1.5]})),),
        figures=(Figure("hostile", f"figure {HOSTILE}", histogram_svg({"x": [1.0]}, title="t", xlabel="x")),),
    )
    report = ComparisonReport(REPORT.leaderboard, REPORT.comparisons, REPORT.regressions, REPORT.deltas, "nDCG@10",
                              sections=(section,), verdicts=(f"verdict {HOSTILE}",))
    markdown = render_markdown(report)
    escaped = escape_markdown(HOSTILE)
    assert f"## Section {escaped}" in markdown.splitlines()
    assert f"\\# {escaped}\n\\- second line" in markdown
    assert f"| {escaped} | 1.5000 |" in markdown.splitlines()
    assert f"![figure {escaped}](figures/hostile.svg)" in markdown
    assert "http://" not in markdown and "<b>" not in markdown
    # What a CommonMark renderer (with GFM tables and strikethrough) makes of it: the only
    # image is the report's own figure, the only links its own anchors, no emphasis, and one
    # cell per column.
    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    collector = TagCollector()
    collector.feed(rendered)
    images = [attrs["src"] for tag, attrs in collector.tags if tag == "img"]
    assert "figures/hostile.svg" in images and all(src.startswith("figures/") for src in images)
    assert all(attrs["href"].startswith("#") for tag, attrs in collector.tags if tag == "a" and "href" in attrs)
    tags = [tag for tag, _ in collector.tags]
    assert tags.count("h1") == 1 and not {"em", "strong", "s", "b"} & set(tags)
    assert "<td>![x](http://127.0.0.1:9/pixel.png) [link](https://example.org) *em* __strong__ a|b ~~gone~~ " \
           "&lt;b&gt;raw&lt;/b&gt;</td>" in rendered


def test_worst_regressions_disclose_ties():
    markdown = render_markdown(REPORT)
    # q00, q01 and q02 all fall from 1 to 0: two are listed (worst_n = 2), the tie is said.
    assert "Regressions: 2 of " in markdown
    assert "3 queries tie at Δ = -1.0000, 2 of them shown (ties ordered by query id)." in markdown


def test_leaderboard_puts_metrics_in_rows_with_the_random_floor_beside_the_models():
    (caption, table), = leaderboard_tables(REPORT.leaderboard, REPORT.floor)
    assert caption == "chat · exact"
    assert table.columns == ["metric", "random ranking", BASELINE, CHALLENGER]
    assert table["metric"].to_list() == ["queries", "nDCG@10", "Recall@100"]
    assert table.row(1, named=True)["random ranking"] == "0.0100" and table.row(0, named=True)[BASELINE] == "30"
    many = pl.concat([REPORT.leaderboard.with_columns(pl.col("model") + f"-{i}") for i in range(4)])
    (_, wide), = leaderboard_tables(many, REPORT.floor)
    assert wide.columns == ["model", "queries", "nDCG@10", "Recall@100"] and wide["model"][0] == "random ranking"


def test_hsd_section_shows_groups_rank_intervals_and_simultaneous_intervals():
    copy = REPORT.leaderboard  # the models' per-query values are not kept: rebuild three models
    rng = np.random.default_rng(5)
    per_query = pl.DataFrame(
        [("chat", model, "exact", f"q{i}", "nDCG@10", float(np.clip(rng.uniform(0.2, 0.6) + shift, 0, 1)))
         for model, shift in (("a", 0.0), ("b", 0.01), ("c", 0.3)) for i in range(40)],
        schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(40)], "text": ["w"] * 40})
    settings = ComparisonSettings(baseline="a", n_resamples=1_000, n_permutations=2_000, report_metric="nDCG@10")
    hsd, pairs = tukey_hsd_tables(per_query, queries, settings, "nDCG@10")
    report = ComparisonReport(copy, REPORT.comparisons, REPORT.regressions, REPORT.deltas, "nDCG@10",
                              hsd=hsd, hsd_pairs=pairs)
    markdown = render_markdown(report)
    assert "## Model groups: nDCG@10 (Tukey HSD)" in markdown
    assert "| chat | c | 40 |" in markdown and "| 1 |" in markdown  # c ranks first, alone
    assert hsd_pairs_summary(pairs)["different"].to_list() == ["no", "yes", "yes"]
    verdict, = dataset_verdicts(compare_models(per_query, queries, settings), hsd, power=0.8, detectable_delta=0.02,
                                hsd_pairs=pairs)
    # The HSD ranks c first alone and puts a and b together: c wins, by its margin over the
    # runner-up b (the higher mean of the other two), with the simultaneous interval of that pair.
    runner_up = hsd.row(1, named=True)
    b_c = pairs.filter((pl.col("model_a") == "b") & (pl.col("model_b") == "c")).row(0, named=True)
    assert runner_up["model"] == "b" and hsd.row(0, named=True)["rank_high"] == 1
    assert (verdict.winner, verdict.second, verdict.family_size, verdict.interval) == ("c", "b", 3, "simultaneous")
    assert (verdict.delta, verdict.ci_low, verdict.p_adjusted) == (b_c["mean_delta"], b_c["ci_low"], b_c["p_value"])
    assert verdict.text().startswith("chat · nDCG@10 over 40 queries: c wins, better than every other model")
    assert verdict.text().endswith("Better than the baseline a (Holm, confirmatory family): c. "
                                   "Tukey HSD groups: a: c; b: b, a.")


def test_environment_record_lists_cards_datasets_conventions_packages_and_machine():
    section = environment_section(
        [{"model": "m@1", "card": {"backend": "entry-point", "entry_point": "pkg:Model", "normalize": True},
          "run": {"threads": 2}}],
        [{"dataset": "d", "manifest": {"counts": {"queries": 3, "documents": 5, "qrels": 4}, "version": "abcdef0123456789",
                                       "source": {"loader": "beir", "files": ["x"]}}}],
        [{"dataset": "d", "model": "m@1", "conventions": {"gain": "linear", "ties": "expected"}, "tied_queries": 2}],
    )
    tables = dict(section.tables)
    assert tables["Eval cards"].row(0, named=True)["source"] == "pkg:Model"
    assert tables["Datasets"].row(0, named=True) == {"dataset": "d", "source": "loader=beir", "queries": "3",
                                                     "documents": "5", "qrels": "4", "version": "abcdef012345"}
    assert tables["Metric conventions"].row(0, named=True)["ties"] == "expected"
    packages = dict(tables["Packages"].rows())
    assert packages["python"] and packages["numpy"] != "not installed"
    assert dict(tables["Machine"].rows())["logical CPUs"].isdigit()


def test_html_report_is_self_contained_and_its_figures_are_valid_svg():
    page = render_html(REPORT)
    assert not re.search(r"https?://", page)
    collector = TagCollector()
    collector.feed(page)
    tags = [tag for tag, _ in collector.tags]
    assert not {"script", "link", "img", "iframe", "object"} & set(tags)
    assert not any("src" in attrs for _, attrs in collector.tags)
    hrefs = [attrs["href"] for _, attrs in collector.tags if "href" in attrs]
    assert hrefs and all(href.startswith("#") for href in hrefs)  # only its own anchors
    ids = {attrs["id"] for _, attrs in collector.tags if "id" in attrs}
    assert {href[1:] for href in hrefs} <= ids
    assert tags.count("svg") == len(report_figures(REPORT)) == 3  # the ranking's forest, the slices', a histogram
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
    assert "## Model groups" not in markdown
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


def test_first_few_counts_what_it_leaves_out():
    assert first_few(["a", "b", "c"], "settings") == "a, b, c"
    assert first_few(["a", "b", "c", "d", "e"], "settings") == "5 settings: a, b, c +2 more"
    assert first_few(["a", "b", "c", "d"], separator="; ", shown=1) == "a +3 more"


def test_the_report_opens_with_the_overview_linking_each_line_to_its_section():
    from dataclasses import replace

    from embedpyramid.summary.overview import OverviewLine

    overview = (
        OverviewLine("chat", "verdict", "winner b over a", "Comparisons over all queries"),
        OverviewLine("chat", "slices", "no slice regression is significant", "Slices: nDCG@10"),
        OverviewLine("chat", "L4", "no current L4 serving sweep of b on chat", None),
        OverviewLine("chat", "L3", "the public ranking holds", "Transfer"),  # a section this report lacks
    )
    report = replace(REPORT, overview=overview)
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    start = lines.index('<a id="overview"></a>')
    assert lines[start + 2] == "## Overview"
    assert lines[start + 4:start + 6] == ["- [chat · verdict: winner b over a](#comparisons-over-all-queries)",
                                          "- [chat · slices: no slice regression is significant](#slices-ndcg-10)"]
    assert lines[start + 7] == ("chat · not in this report — L4: no current L4 serving sweep of b on chat; "
                                "L3: the public ranking holds")
    # The ranking and the verdict open the report; the overview follows, folded with the rest.
    assert markdown.index("## Ranking") < markdown.index("## Verdict") < markdown.index("## Overview")
    assert '<a id="comparisons-over-all-queries"></a>' in markdown and '<a id="slices-ndcg-10"></a>' in markdown
    page = render_html(report)
    assert ('<details id="overview"><summary><h2>Overview</h2></summary>\n<ul><li>'
            '<a href="#comparisons-over-all-queries">') in page
    assert '<details id="comparisons-over-all-queries">' in page and '<details id="slices-ndcg-10">' in page
    assert "## Overview" not in render_markdown(REPORT)


def test_the_hybrid_is_named_and_only_a_bca_fallback_is_marked():
    from embedpyramid.rendering.tables import interval_method

    rows = REPORT.comparisons.filter(pl.col("slice_column") == "all").head(1)
    mixed = pl.concat([rows.with_columns(pl.lit(name).alias("interval")) for name in ("t", "studentized", "bca")])
    assert interval_method(mixed).startswith("hybrid (t where half the deltas or more tie at 0")
    cells = comparison_summary(mixed)["unadjusted 95% CI"].to_list()
    assert [cell.endswith(" †") for cell in cells] == [False, False, True]
    assert interval_method(mixed.filter(pl.col("interval") != "t")) == "studentized"
    only_bca = comparison_summary(mixed.filter(pl.col("interval") == "bca"))["unadjusted 95% CI"].to_list()
    assert interval_method(mixed.filter(pl.col("interval") == "bca")) == "bca" and not only_bca[0].endswith(" †")


def test_axis_ticks_are_round_at_most_six_and_inside_the_range():
    from embedpyramid.rendering.svg import _ticks

    assert [label for _, label in _ticks(-0.0152, 0.0485)] == ["-0.01", "0", "+0.01", "+0.02", "+0.03", "+0.04"]
    assert [label for _, label in _ticks(0.8, 1.2, signed=False)] == ["0.8", "0.9", "1.0", "1.1", "1.2"]  # ends kept
    assert [label for _, label in _ticks(-0.35, 0.35)] == ["-0.2", "0", "+0.2"]
    rng = np.random.default_rng(1)
    for _ in range(2_000):
        lo = rng.uniform(-50, 50)
        hi = lo + 10 ** rng.uniform(-3, 2)
        ticks = [value for value, _ in _ticks(lo, hi)]
        assert 2 <= len(ticks) <= 6 and all(lo - 1e-9 <= value <= hi + 1e-9 for value in ticks)


def test_the_ranking_marks_each_significant_win_with_the_rank_of_the_model_it_beats():
    # Three models on four queries: c beats b and a on nDCG@10 by the HSD; on Recall@100 only a's
    # comparison with the baseline b is significant (b better), which the caption says is the rule.
    leaderboard = pl.DataFrame({"dataset": ["d"] * 6, "model": ["a", "b", "c"] * 2, "system": ["exact"] * 6,
                                "metric": ["nDCG@10"] * 3 + ["Recall@100"] * 3, "mean": [0.2, 0.4, 0.9, 0.5, 0.7, 0.6],
                                "n": [4] * 6})
    pairs = pl.DataFrame({"dataset": ["d"] * 3, "system": ["exact"] * 3, "metric": ["nDCG@10"] * 3,
                          "model_a": ["a", "a", "b"], "model_b": ["b", "c", "c"], "mean_delta": [0.2, 0.7, 0.5],
                          "significant": [False, True, True]})
    comparisons = pl.DataFrame({"dataset": ["d"] * 4, "system": ["exact"] * 4, "slice_column": ["all"] * 4,
                                "metric": ["nDCG@10", "nDCG@10", "Recall@100", "Recall@100"],
                                "model_a": ["b"] * 4, "model_b": ["a", "c", "a", "c"],
                                "decision": ["worse", "better", "worse", "not significant"]})
    report = ComparisonReport(leaderboard=leaderboard, comparisons=comparisons, regressions=pl.DataFrame(),
                              deltas=pl.DataFrame(), metric="nDCG@10", hsd_pairs=pairs)
    assert ranking_table(report, "d").rows() == [
        ("1", "c", "0.9000²³", "0.6000", "4"),  # ranked 1st, beats b (2nd) and a (3rd) by the HSD
        ("2", "b", "0.4000", "0.7000³", "4"),  # not separated from a on nDCG@10 (HSD); beats a on Recall@100
        ("3", "a", "0.2000", "0.5000", "4"),
    ]
    assert ranking_table(report, "d").columns == ["#", "model", "nDCG@10", "Recall@100", "queries"]
