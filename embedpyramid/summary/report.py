"""The comparison report over every level: what it shows and in which order.

It opens with the pyramid overview and the verdict, then a table of contents linking every
section by anchor; the sections each level describes (:class:`~embedpyramid.rendering.document.ReportSection`)
follow, folded. The blocks are rendered as Markdown and as self-contained HTML by
:mod:`embedpyramid.rendering.document`, so the two formats cannot drift apart.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from embedpyramid.config.measures import parse_measure
from embedpyramid.config.slices import ALL_QUERIES
from embedpyramid.rendering import document
from embedpyramid.rendering.document import (
    Block,
    DocumentFiles,
    Figure,
    Heading,
    Links,
    Paragraph,
    ReportSection,
    Table,
    anchor,
    section_blocks,
    slug,
)
from embedpyramid.rendering.svg import delta_histogram_svg, forest_plot_svg
from embedpyramid.rendering.tables import (
    clip_text,
    comparison_summary,
    confidence_label,
    format_cell,
    hsd_pairs_summary,
    hsd_summary,
    interval_method,
    leaderboard_tables,
    slice_summary,
)
from embedpyramid.store import StorePath, read_json
from embedpyramid.summary.overview import OverviewLine

_PAIR_KEYS = ["dataset", "system", "model_a", "model_b"]
EXACT = "exact"
VERDICT_FILE = "verdict.json"
"""The file that holds verdicts: one dataset's in its comparisons folder, and every verdict the
report opens with in the report folder."""


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """Everything one comparison report shows.

    ``leaderboard``: dataset, model, system, metric, mean, n. ``comparisons``: the table of
    :func:`embedpyramid.stats.comparisons.compare_models`. ``regressions``: the table of
    :func:`embedpyramid.summary.regressions.regressions` for ``metric``. ``deltas``: the table of
    :func:`embedpyramid.stats.pairing.query_deltas` (per-query deltas, for the distributions).
    ``metric`` is the headline metric of the slice table, the plots and the regression list;
    ``metrics`` limits the leaderboard and comparison table rows (None: every metric).
    ``verdict_lines`` the verdict of each dataset on one line (:func:`verdict_lines`), on the first
    screen under the ranking; ``verdicts`` the verdict paragraphs, folded below; ``hsd`` and ``hsd_pairs``
    the Tukey HSD tables (:func:`embedpyramid.stats.hsd_tables.tukey_hsd_tables`); ``floor`` the
    random-ranking floor per dataset and metric (dataset, metric, mean); ``notes`` sentences
    under the leaderboard (ties, judged documents); ``environment`` the closing sections that
    record how the numbers were made; ``overview`` the pyramid overview the report opens with
    (:func:`embedpyramid.summary.overview.pyramid_overview`), each line linked to its section.
    """

    leaderboard: pl.DataFrame
    comparisons: pl.DataFrame
    regressions: pl.DataFrame
    deltas: pl.DataFrame
    metric: str
    metrics: tuple[str, ...] | None = None
    title: str = "Embedding model comparison"
    sections: tuple[ReportSection, ...] = ()
    verdicts: tuple[str, ...] = ()
    verdict_lines: tuple[str, ...] = ()
    hsd: pl.DataFrame = field(default_factory=pl.DataFrame)
    hsd_pairs: pl.DataFrame = field(default_factory=pl.DataFrame)
    floor: pl.DataFrame = field(default_factory=pl.DataFrame)
    notes: tuple[str, ...] = ()
    environment: tuple[ReportSection, ...] = ()
    overview: tuple[OverviewLine, ...] = ()


def report_figures(report: ComparisonReport) -> list[Figure]:
    """The forest plots of ``report.metric`` (every model against the baseline over all queries, then
    per slice), one delta histogram per model pair, and the figures of the further sections."""
    return (_overall_forest(report) + _forest_figures(report) + _histogram_figures(report)
            + [f for s in report.sections for f in s.figures])


def _forest_figures(report: ComparisonReport) -> list[Figure]:
    metric, comparisons = report.metric, report.comparisons
    if comparisons.filter(pl.col("metric") == metric).is_empty():
        return []
    caption = (
        f"Slice deltas on {metric} with {confidence_label(comparisons)} intervals, coloured by the "
        "adjusted decision; small slices are not coloured"
    )
    return [Figure(f"forest-{slug(metric)}", caption, forest_plot_svg(comparisons, metric))]


def _histogram_figures(report: ComparisonReport) -> list[Figure]:
    metric = report.metric
    figures = []
    deltas = report.deltas.filter(pl.col("metric") == metric)
    for index, ((dataset, system, model_a, model_b), pair) in enumerate(
        deltas.partition_by(_PAIR_KEYS, as_dict=True, maintain_order=True).items(), start=1
    ):
        caption = f"Per-query Δ {metric}, {model_b} − {model_a} ({dataset} · {system})"
        svg = delta_histogram_svg(pair["delta"].to_numpy(), title=f"Δ {metric}: {model_b} − {model_a}")
        figures.append(Figure(f"deltas-{index:02d}-{slug(metric)}", caption, svg))
    return figures


def render_markdown(report: ComparisonReport, *, figures_dir: str = "figures") -> str:
    """The report as Markdown (:func:`embedpyramid.rendering.document.render_markdown`)."""
    return document.render_markdown(_blocks(report), figures_dir=figures_dir)


def render_html(report: ComparisonReport) -> str:
    """The report as one self-contained HTML page (:func:`embedpyramid.rendering.document.render_html`):
    the sections of each model and each model pair (a further section, one pair's regressions)
    are folded, so the page opens on the verdict and the shared tables."""
    return document.render_html(report.title, _blocks(report))


def write_report(out_dir: str | os.PathLike[str] | StorePath, report: ComparisonReport) -> DocumentFiles:
    """Write ``report.md``, ``report.html`` and ``figures/*.svg`` under ``out_dir`` (a local
    folder or a store URL), each moved into place whole."""
    return document.write_document(out_dir, report.title, _blocks(report), report_figures(report))


def headline_metrics(metrics: Sequence[str], report_metric: str) -> list[str]:
    """The report metric, then Recall at the deepest measured cutoff and MRR@10 (else MRR at the
    smallest cutoff), each once and only where measured."""
    measures = {}
    for metric in metrics:
        try:
            measures[metric] = parse_measure(metric)
        except ValueError:
            continue
    recalls = sorted((m.cutoff or 0, name) for name, m in measures.items() if m.name == "Recall")
    mrrs = sorted((m.cutoff != 10, m.cutoff or math.inf, name) for name, m in measures.items() if m.name == "MRR")
    chosen = [report_metric, *(recalls[-1][1:] if recalls else ()), *(mrrs[0][2:] if mrrs else ())]
    return [metric for metric in dict.fromkeys(chosen) if metric in metrics]


SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def ranking_table(report: ComparisonReport, dataset: str) -> pl.DataFrame:
    """One dataset's models (exact search) ranked by the report metric, with each headline metric's
    mean; a superscript ``i`` marks a significant win over the model ranked ``i``: on the report
    metric by the Tukey HSD over every pair (three or more models) or else by the confirmatory
    comparison, on another metric by its comparison with the baseline (adjusted in its family)."""
    board = report.leaderboard.filter((pl.col("dataset") == dataset) & (pl.col("system") == EXACT))
    means = {(row["model"], row["metric"]): row["mean"] for row in board.iter_rows(named=True)}
    metrics = headline_metrics(board["metric"].unique().to_list(), report.metric)
    models = sorted(dict.fromkeys(board["model"].to_list()),
                    key=lambda model: -(means.get((model, report.metric)) or -math.inf))
    rank = {model: index for index, model in enumerate(models, start=1)}
    wins: dict[tuple[str, str], set[int]] = {}
    for metric, winner, loser in _significant_wins(report, dataset):
        if winner in rank and loser in rank:
            wins.setdefault((metric, winner), set()).add(rank[loser])
    n = board.filter(pl.col("metric") == report.metric)["n"].max()
    rows = [{"#": str(rank[model]), "model": model,
             **{metric: (f"{means[(model, metric)]:.4f}" + "".join(str(i).translate(SUPERSCRIPTS)
                                                                  for i in sorted(wins.get((metric, model), ())))
                         if (model, metric) in means else "-") for metric in metrics},
             "queries": f"{n:,}" if n is not None else "-"} for model in models]
    return pl.DataFrame(rows, schema=dict.fromkeys(["#", "model", *metrics, "queries"], pl.String()))


def _significant_wins(report: ComparisonReport, dataset: str) -> list[tuple[str, str, str]]:
    """(metric, winner, loser) of every significant difference the ranking marks: the HSD's pairs
    on the report metric where there is one, the comparisons over all queries otherwise."""
    hsd_pairs = (report.hsd_pairs.filter((pl.col("dataset") == dataset) & (pl.col("system") == EXACT))
                 if report.hsd_pairs.height else report.hsd_pairs)
    found = [(row["metric"], row["model_b"], row["model_a"]) if row["mean_delta"] > 0
             else (row["metric"], row["model_a"], row["model_b"])
             for row in hsd_pairs.iter_rows(named=True) if row["significant"]]
    decided_by_hsd = {row["metric"] for row in hsd_pairs.iter_rows(named=True)}
    if report.comparisons.height:
        overall = report.comparisons.filter((pl.col("dataset") == dataset) & (pl.col("system") == EXACT)
                                            & (pl.col("slice_column") == ALL_QUERIES)
                                            & ~pl.col("metric").is_in(list(decided_by_hsd)))
        found += [(row["metric"], row["model_b"], row["model_a"]) if row["decision"] == "better"
                  else (row["metric"], row["model_a"], row["model_b"])
                  for row in overall.iter_rows(named=True) if row["decision"] in ("better", "worse")]
    return found


def _ranking_blocks(report: ComparisonReport) -> list[Block]:
    """The first screen after the verdict: each dataset's ranking table and the forest plot of the
    report metric's deltas over all queries."""
    datasets = list(dict.fromkeys(report.leaderboard.filter(pl.col("system") == EXACT)["dataset"].to_list()))
    if not datasets:
        return []
    baseline = report.comparisons["model_a"][0] if report.comparisons.height else None
    blocks: list[Block] = [Heading(2, f"Ranking: {report.metric}", "ranking"), Paragraph(
        f"Models ranked by {report.metric} over all queries (exact search), with the headline metrics. A superscript "
        f"i marks a significant win over the model ranked i — on {report.metric} by the Tukey HSD over every pair "
        "(three or more models) or the confirmatory Holm test (two); on the other metrics by the comparison with "
        f"the baseline{f' {baseline}' if baseline else ''}, Benjamini–Hochberg-adjusted. A difference without a "
        "mark is not distinguishable at this number of queries.")]
    for dataset in datasets:
        blocks += [Paragraph(dataset), Table(ranking_table(report, dataset))]
    return blocks + _overall_forest(report)


def _overall_forest(report: ComparisonReport) -> list[Figure]:
    overall = report.comparisons.filter((pl.col("slice_column") == ALL_QUERIES) & (pl.col("metric") == report.metric)
                                        & (pl.col("system") == EXACT)) if report.comparisons.height else report.comparisons
    if overall.is_empty():
        return []
    caption = (f"Δ {report.metric} of each model against the baseline over all queries, with its unadjusted "
               f"{confidence_label(overall)} interval, coloured by the confirmatory family's decision (each model "
               "against the baseline, Holm); the ranking's Tukey HSD compares every pair at once and separates less")
    return [Figure(f"forest-all-{slug(report.metric)}", caption,
                   forest_plot_svg(overall, report.metric, title=f"Δ {report.metric} against the baseline"))]


def _blocks(report: ComparisonReport) -> list[Block]:
    comparisons, metric = report.comparisons, report.metric
    sections: list[list[Block]] = [
        [
            Heading(2, "Leaderboard", folded=True),
            Paragraph(
                "Mean over the evaluated queries of every measure, beside what a random ranking of the corpus "
                "scores (its floor, in closed form). Judged@k is the share of the top k with any qrel: unjudged "
                "documents count as non-relevant, so a low Judged@k says a model's other numbers are lower bounds."
            ),
            *(block for caption, table in leaderboard_tables(report.leaderboard, report.floor, report.metrics)
              for block in (Paragraph(caption), Table(table))),
            *(Paragraph(note) for note in report.notes),
        ],
    ]
    if report.hsd.height:
        sections.append([
            Heading(2, f"Model groups: {metric} (Tukey HSD)", folded=True),
            Paragraph(
                "Randomized Tukey HSD over every pair of models on all queries: models sharing a group letter are "
                "not distinguishable; the rank interval is every rank a model could hold given the significant "
                "pairs. Two models differ exactly when their HSD intervals (mean ± half the critical range) do not "
                f"overlap. {report.hsd['n_permutations'][0]:,} permutations, seed {report.hsd['seed'][0]}."
            ),
            Table(hsd_summary(report.hsd)),
            Paragraph("Every pair, with its simultaneous interval:"),
            Table(hsd_pairs_summary(report.hsd_pairs)),
        ])
    sections += [
        [
            Heading(2, "Comparisons over all queries", folded=True),
            Paragraph(_settings_note(comparisons)),
            Table(comparison_summary(comparisons, report.metrics)),
        ],
        [
            Heading(2, f"Slices: {metric}", folded=True),
            Paragraph(
                "Each slice's mean delta with its interval and n, so that an average gain cannot hide a regression "
                "in one slice. Slices are exploratory (Benjamini–Hochberg). Slices marked 'small n' have too few "
                "queries for a reliable interval: they are shown, not hidden, and not coloured in the plot."
            ),
            Table(slice_summary(comparisons, metric)),
            *_forest_figures(report),
        ],
        [Heading(2, f"Per-query delta distribution: {metric}", folded=True), *_histogram_figures(report)],
        [Heading(2, f"Worst regressions and best improvements: {metric}", folded=True),
         *_regression_blocks(report.regressions)],
        *(section_blocks(section) for section in (*report.sections, *report.environment)),
    ]
    anchors: dict[str, int] = {}
    linked: list[list[Block]] = []
    for blocks in sections:
        heading = blocks[0]
        assert isinstance(heading, Heading)
        linked.append([replace(heading, anchor=anchor(heading.text, anchors)), *blocks[1:]])
    contents = [(block.anchor, block.text) for blocks in linked for block in blocks[:1] if isinstance(block, Heading)]
    lines = [Paragraph(text, "verdict") for text in report.verdict_lines] or [Paragraph("No model pairs to compare.")]
    paragraphs = [Heading(2, "Verdicts in full", "verdicts-in-full", folded=True),
                  *(Paragraph(text, "verdict") for text in report.verdicts)] if report.verdicts else []
    return [
        Heading(1, report.title),
        *_ranking_blocks(report),
        Heading(2, "Verdict", "verdict"),
        *lines,
        *paragraphs,
        *_overview_blocks(report.overview, linked),
        Heading(2, "Contents", "contents", folded=True),
        Links(tuple(contents)),
        *(block for blocks in linked for block in blocks),
    ]


def _overview_blocks(lines: tuple[OverviewLine, ...], linked: list[list[Block]]) -> list[Block]:
    """The overview: each line linked to the anchor of its section; the lines whose section is
    absent (or not in this report) as one paragraph per dataset."""
    if not lines:
        return []
    anchors: dict[str, str] = {}
    for blocks in linked:
        heading = blocks[0]
        if isinstance(heading, Heading):
            anchors.setdefault(heading.text, heading.anchor)
    blocks: list[Block] = [Heading(2, "Overview", "overview", folded=True)]
    for dataset in dict.fromkeys(line.dataset for line in lines):
        own = [line for line in lines if line.dataset == dataset]
        items = tuple((anchors[line.section], f"{dataset} · {line.level}: {line.text}") for line in own
                      if line.section in anchors)
        unlinked = [f"{line.level}: {line.text}" for line in own if line.section not in anchors]
        blocks += [Links(items)] if items else []
        blocks += [Paragraph(f"{dataset} · not in this report — " + "; ".join(unlinked))] if unlinked else []
    return blocks


def _settings_note(comparisons: pl.DataFrame) -> str:
    if comparisons.is_empty():
        return "No model pairs to compare."
    first = comparisons.row(0, named=True)
    families = []
    for (dataset, family), rows in comparisons.partition_by(["dataset", "family"], as_dict=True, maintain_order=True).items():
        metrics = rows["metric"].unique(maintain_order=True).to_list()
        adjustment = "Holm" if rows["adjustment"][0] == "holm" else "Benjamini–Hochberg"
        what = f"{', '.join(metrics)} over all queries against the baseline" if family == "confirmatory" else (
            "every other metric, slice and pair")
        families.append(f"{dataset}, {family}: {what} — {rows.height} tests, {adjustment}")
    return (
        "Deltas are B − A per query (A is the baseline). Intervals: unadjusted (each interval "
        "holds its level on its own, not jointly over the family; the adjusted p-value is the family's decision, "
        "and the Tukey HSD table gives simultaneous intervals), "
        f"{confidence_label(comparisons)} {interval_method(comparisons)}, {first['n_resamples']:,} resamples, seed "
        f"{first['seed']}, resampling by {first['resampling']}; † marks a BCa interval where the studentized "
        "one would be unbounded (too few distinct deltas); 'CI MC error' is the Monte-Carlo error of the ends. d_z: mean delta / sd of the deltas. p (sign-flip): two-sided paired sign-flip test "
        f"({first['n_permutations']:,} sign patterns, exact when fewer exist; ± its Monte-Carlo error), the test "
        "the families adjust; p (t-test): the paired t-test, which disagrees on sparse deltas. Families — "
        + "; ".join(families)
        + ". Confirmatory results control the family-wise error; exploratory ones the false discovery rate and "
        "are leads, not conclusions. W/T/L: queries where B wins, ties or loses. Metrics identical by "
        "construction are tested once and listed together."
    )


def _regression_blocks(regressions: pl.DataFrame) -> list[Block]:
    if regressions.is_empty():
        return [Paragraph("No query changed by more than the tie tolerance.")]
    blocks: list[Block] = []
    for (dataset, system, model_a, model_b), pair in regressions.partition_by(
        _PAIR_KEYS, as_dict=True, maintain_order=True
    ).items():
        blocks.append(Heading(3, f"{model_b} − {model_a} ({dataset} · {system})", folded=True))
        for direction, title in (("regression", "Regressions"), ("improvement", "Improvements")):
            listed = pair.filter(pl.col("direction") == direction)
            table = pl.DataFrame(
                [
                    {
                        "#": str(row["rank"]),
                        "query": row["query_id"],
                        "text": clip_text(row["text"] or "", 120),
                        "A": f"{row['value_a']:.4f}",
                        "B": f"{row['value_b']:.4f}",
                        "Δ": f"{row['delta']:+.4f}",
                        "gold": clip_text(format_cell(row["gold_doc_ids"]), 80),
                        "top-1 A": _top_document(row, "a"),
                        "top-1 B": _top_document(row, "b"),
                    }
                    for row in listed.iter_rows(named=True)
                ],
                schema=dict.fromkeys(
                    ["#", "query", "text", "A", "B", "Δ", "gold", "top-1 A", "top-1 B"],
                    pl.String(),
                ),
            )
            blocks += [Paragraph(_listing_note(title, listed)), Table(table)]
    return blocks


def _listing_note(title: str, listed: pl.DataFrame) -> str:
    """``Regressions: 10 of 120 shown; 57 queries tie at Δ = -1.0000, 10 of them shown (ties
    ordered by query id).``"""
    if listed.is_empty():
        return f"{title}: none."
    total = listed["n_direction"][0]
    note = f"{title}: {listed.height} of {total:,} shown"
    ties = (
        listed.group_by("delta", maintain_order=True)
        .agg(pl.len().alias("shown"), pl.col("n_tied").first())
        .filter(pl.col("n_tied") > pl.col("shown"))
    )
    disclosed = [
        f"{row['n_tied']:,} queries tie at Δ = {row['delta']:+.4f}, {row['shown']} of them shown"
        for row in ties.iter_rows(named=True)
    ]
    if disclosed:
        note += "; " + "; ".join(disclosed) + " (ties ordered by query id)"
    return note + "."


def _top_document(row: dict, side: str) -> str:
    doc_id = row[f"top1_{side}"]
    if doc_id is None:
        return "(nothing retrieved)"
    text = row.get(f"top1_{side}_text")
    return f"{doc_id}: {clip_text(text, 80)}" if text else doc_id


def verdict_texts(report_dir: StorePath) -> list[str]:
    """The verdict paragraphs the last report written in ``report_dir`` opens with: retrieval's
    per dataset, then the task families' (none before a report)."""
    path = report_dir / VERDICT_FILE
    return [verdict["text"] for verdict in read_json(path)] if path.is_file() else []


def verdict_lines(verdicts: Sequence[dict]) -> list[str]:
    """One line per dataset: its first verdict's line, and how many more the report holds."""
    by_dataset: dict[str, list[dict]] = {}
    for verdict in verdicts:
        by_dataset.setdefault(verdict["dataset"], []).append(verdict)
    lines = []
    for found in by_dataset.values():
        more = len(found) - 1
        lines.append(found[0].get("line", found[0]["text"]) + (f" (+{more} more in the report)" if more else ""))
    return lines
