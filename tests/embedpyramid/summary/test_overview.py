"""The pyramid overview from hand-built tables: every line present when its source exists,
absent with its reason when not, and the cheapest index keeping 99% chosen by hand."""

import json

import polars as pl
import pytest

from embedpyramid.summary.overview import (
    LEVELS,
    OVERVIEW_FILE,
    OverviewLine,
    cheapest_keeping,
    overview_text,
    pyramid_overview,
    read_overview,
)

METRIC = "nDCG@10"


def verdict(**changes):
    base = {
        "dataset": "chat", "system": "exact", "metric": METRIC, "n": 120, "first": "b", "second": "a",
        "winner": "b", "top_group": ["b"], "delta": 0.0312, "ci_low": 0.0101, "ci_high": 0.0523, "interval": "unadjusted",
        "p_adjusted": 0.0042, "adjustment": "holm", "family_size": 1, "d_z": 0.41, "confidence": 0.95, "text": "…",
    }
    return {**base, **changes}


def comparison_rows(rows):
    """Comparisons rows with the columns the overview reads; the rest of each row by default."""
    default = {"dataset": "chat", "system": "exact", "metric": METRIC, "model_a": "a", "model_b": "b",
               "slice_column": "all", "slice_value": "all", "n": 120, "mean_delta": 0.0312, "ci_low": 0.0101,
               "ci_high": 0.0523, "confidence": 0.95, "decision": "better", "adjustment": "holm",
               "p_adjusted": 0.0042, "small_slice": False}
    return pl.DataFrame([{**default, **row} for row in rows])


COMPARISONS = comparison_rows([
    {},
    # significant regressions: -0.08 on category = science is the largest
    {"slice_column": "category", "slice_value": "science", "n": 24, "mean_delta": -0.08, "ci_low": -0.14,
     "ci_high": -0.02, "decision": "worse", "adjustment": "bh", "p_adjusted": 0.012, "small_slice": True},
    {"slice_column": "category", "slice_value": "sports", "n": 40, "mean_delta": -0.05, "ci_low": -0.09,
     "ci_high": -0.01, "decision": "worse", "adjustment": "bh", "p_adjusted": 0.03},
    # more negative but not significant, or not the report metric, or not exact search: ignored
    {"slice_column": "query_length", "slice_value": ">16 words", "n": 8, "mean_delta": -0.3, "ci_low": -0.7,
     "ci_high": 0.1, "decision": "not significant", "adjustment": "bh", "p_adjusted": 0.2, "small_slice": True},
    {"metric": "Recall@100", "slice_column": "category", "slice_value": "science", "mean_delta": -0.2,
     "decision": "worse", "adjustment": "bh"},
    {"system": "rrf", "slice_column": "category", "slice_value": "science", "mean_delta": -0.4, "decision": "worse",
     "adjustment": "bh"},
])

EFFICIENCY = pl.DataFrame({
    "dataset": ["chat", "chat", "chat"], "model": ["a", "b", "c"],
    "documents_per_second": [812.4, 1530.0, 99.0], "bytes_per_vector": [1536, 2048, 768],
    "search_qps": [4100.0, 3050.7, 9000.0],
})


def sweep(rows):
    default = {"dataset": "chat", "sweep_param": None, "sweep_value": None, "k": 10, "ann_recall": 1.0,
               "delta_metric": METRIC, "exact_value": 0.5}
    return pl.DataFrame([{**default, **row} for row in rows])


# Exact nDCG@10 0.5: 99% is 0.495. Kept: Flat (1536 B), HNSW (1600 B), SQ8 at 384 B twice (the faster
# one wins the tie on bytes), and IVF-PQ m=24 at 96 B with exactly 0.495 (kept: >= 99%); not kept: PQ at
# 48 B (0.475, 95%) and binary at 48 B (0.45, 90%). Cheapest kept: IVF-PQ m=24, 96 B.
FRONTIER = sweep([
    {"spec": "flat", "ann_value": 0.5, "bytes_per_vector": 1536.0, "qps": 900.0},
    {"spec": "hnsw32", "sweep_param": "efSearch", "sweep_value": 64, "ann_value": 0.4975, "ann_recall": 0.98,
     "bytes_per_vector": 1600.0, "qps": 5000.0},
    {"spec": "sq8", "ann_value": 0.496, "bytes_per_vector": 384.0, "qps": 3000.0, "ann_recall": 0.97},
    {"spec": "ivf-sq8", "sweep_param": "nprobe", "sweep_value": 16, "ann_value": 0.4955, "bytes_per_vector": 384.0,
     "qps": 3500.0, "ann_recall": 0.96},
    {"spec": "ivf-pq24", "sweep_param": "nprobe", "sweep_value": 32, "ann_value": 0.495, "bytes_per_vector": 96.0,
     "qps": 7000.0, "ann_recall": 0.93},
    {"spec": "ivf-pq12", "sweep_param": "nprobe", "sweep_value": 32, "ann_value": 0.475, "bytes_per_vector": 48.0,
     "qps": 9000.0, "ann_recall": 0.85},
    {"spec": "binary", "ann_value": 0.45, "bytes_per_vector": 48.0, "qps": 20000.0, "ann_recall": 0.7},
])

SYSTEM_VERDICTS = pl.DataFrame([
    {"dataset": "chat", "metric": METRIC, "slice_column": "all", "family": "confirmatory", "system_b": system,
     "model": model, "mean_a": exact, "mean_b": mean, "mean_delta": mean - exact, "ci_low": mean - exact - 0.02,
     "ci_high": mean - exact + 0.02, "confidence": 0.95, "p_adjusted": p, "verdict": words}
    for system, model, exact, mean, p, words in [
        ("rrf", "b", 0.50, 0.53, 0.001, "better than exact"),
        ("rerank", "b", 0.50, 0.56, 0.0001, "better than exact"),
        ("bm25", "none", 0.50, 0.40, 0.0001, "worse than exact"),
    ]
] + [{"dataset": "chat", "metric": METRIC, "slice_column": "category", "family": "exploratory", "system_b": "bm25",
      "model": "none", "mean_a": 0.1, "mean_b": 0.9, "mean_delta": 0.8, "ci_low": 0.7, "ci_high": 0.9,
      "confidence": 0.95, "p_adjusted": 0.01, "verdict": "better than exact"}])

DOWNSTREAM = {"chat": [("L6 downstream answers: chat · exact", "chat · exact: the answer quality differs by model.")]}
TRANSFER = [("chat", "scifact (public) vs chat (own): the public ranking holds."),
            ("other", "scifact (public) vs other (own): …")]


def full_overview():
    return pyramid_overview(
        ["chat"], metric=METRIC, verdicts=[verdict()], comparisons=COMPARISONS, efficiency=EFFICIENCY,
        serving={"b": FRONTIER, "a": FRONTIER.with_columns(pl.lit(0.0).alias("bytes_per_vector"))},
        system_verdicts=SYSTEM_VERDICTS, downstream=DOWNSTREAM, transfer=TRANSFER,
    )


def test_every_line_is_present_and_linked_when_its_source_exists():
    lines = {line.level: line for line in full_overview()}
    assert list(lines) == list(LEVELS)
    assert {level: line.section for level, line in lines.items()} == {
        "verdict": "Comparisons over all queries", "slices": f"Slices: {METRIC}", "cost": "Cost and quality: chat",
        "L4": "L4 serving approximation: b (chat)", "L5": "L5 hybrid and rerank systems: chat",
        "L6": "L6 downstream answers: chat · exact", "L3": "Transfer",
    }
    assert lines["verdict"].text == (
        "winner b over a (nDCG@10, 120 queries; Δ +0.0312, unadjusted 95% CI [+0.0101, +0.0523], d_z +0.41, "
        "p (Holm) 0.0042)")
    assert lines["slices"].text == (
        "largest significant slice regression: b vs a on category = science (n = 24, small n): Δ -0.0800, "
        "unadjusted 95% CI [-0.1400, -0.0200], p (BH) 0.0120")
    # The verdict's models, leader first; c is not in the verdict.
    assert lines["cost"].text == ("encode docs/s · bytes/vector · exact-search QPS: b 1,530 docs/s · 2,048 B/vector · "
                                  "3,051 QPS; a 812 docs/s · 1,536 B/vector · 4,100 QPS")
    assert lines["L4"].text == (
        "cheapest index of b keeping ≥ 99% of exact nDCG@10: ivf-pq24, nprobe=32 — 0.4950 vs 0.5000 (99.0% of exact), "
        "96 B/vector, 7,000 QPS, ANN recall@10 0.930")
    assert lines["L5"].text == (
        "best system rerank on b: nDCG@10 0.5600 vs exact 0.5000, Δ +0.0600, unadjusted 95% CI [+0.0400, +0.0800], "
        "p (Holm) 0.0001 — better than exact")
    assert lines["L6"].text == "chat · exact: the answer quality differs by model."
    assert lines["L3"].text == "scifact (public) vs chat (own): the public ranking holds."


def test_a_top_group_is_named_and_small_n_flagged():
    top = verdict(winner=None, top_group=["b", "c"], second="c", adjustment="tukey-hsd", interval="simultaneous",
                  delta=0.01, ci_low=-0.02, ci_high=0.04, p_adjusted=0.306, n=29)
    small = COMPARISONS.with_columns(pl.when(pl.col("slice_column") == "all").then(True)
                                     .otherwise(pl.col("small_slice")).alias("small_slice"))
    line = pyramid_overview(["chat"], metric=METRIC, verdicts=[top], comparisons=small)[0]
    assert line.text == ("top group b, c: not distinguishable (nDCG@10, 29 queries; b over the closest contender c: "
                         "Δ +0.0100, simultaneous 95% CI [-0.0200, +0.0400], d_z +0.41, p (Tukey HSD) 0.3060); small n")
    two = pyramid_overview(["chat"], metric=METRIC, verdicts=[verdict(winner=None)], comparisons=COMPARISONS)[0]
    assert two.text.startswith("no detectable difference between b and a (")


def test_every_line_is_absent_with_its_reason_when_its_source_is():
    lines = pyramid_overview(["chat"], metric=METRIC, verdicts=[{"dataset": "chat", "text": "chat: no verdict: "
                                                                 "comparing would mix versions."}],
                             comparisons=COMPARISONS.filter(pl.col("slice_column") == "all"))
    assert [line.level for line in lines] == list(LEVELS)
    assert all(line.section is None for line in lines)
    assert {line.level: line.text for line in lines} == {
        "verdict": "chat: no verdict: comparing would mix versions.",
        "slices": "no slice of nDCG@10 compared on chat",
        "cost": "no current efficiency measurement on chat",
        "L4": "no verdict, so no leader to serve",
        "L5": "no current L5 system compared on chat",
        "L6": "no L6 grade analysis of chat (judge.yaml not set or not run)",
        "L3": "the L3 transfer analysis has not run",
    }
    # With a leader but no sweep of it, no L3 pair for the dataset, and no significant slice.
    lines = pyramid_overview(["chat"], metric=METRIC, verdicts=[verdict()],
                             comparisons=COMPARISONS.filter(pl.col("decision") != "worse"),
                             serving={"a": FRONTIER}, transfer=TRANSFER[1:])
    by_level = {line.level: line for line in lines}
    assert by_level["L4"].text == "no current L4 serving sweep of b on chat" and by_level["L4"].section is None
    assert by_level["L3"].text == "no public benchmark is paired with chat"
    assert by_level["slices"].text == "no slice regression is significant after adjustment (1 slice comparisons of nDCG@10)"
    assert by_level["slices"].section == f"Slices: {METRIC}"


def test_cheapest_index_keeping_99_percent_on_a_hand_built_frontier():
    chosen = cheapest_keeping(FRONTIER)
    assert (chosen["spec"], chosen["bytes_per_vector"]) == ("ivf-pq24", 96.0)
    # Without it, the two 384-byte points tie on bytes: the faster one.
    assert cheapest_keeping(FRONTIER.filter(pl.col("spec") != "ivf-pq24"))["spec"] == "ivf-sq8"
    # A stricter share leaves Flat only (0.5 >= 0.5; HNSW 0.4975 < 0.4995).
    assert cheapest_keeping(FRONTIER, share=0.999)["spec"] == "flat"
    lossy = FRONTIER.filter(pl.col("spec").is_in(["ivf-pq12", "binary"]))
    assert cheapest_keeping(lossy) is None
    line = pyramid_overview(["chat"], metric=METRIC, verdicts=[verdict()], comparisons=COMPARISONS,
                            serving={"b": lossy})[3]
    assert line.text == "no index of b keeps ≥ 99% of exact nDCG@10 (best ivf-pq12: 95.0% of exact)"


def test_written_lines_read_back_as_the_cli_prints_them(tmp_path):
    lines = [OverviewLine("chat", "verdict", "winner b", "Comparisons over all queries"),
             OverviewLine("chat", "L4", "no current L4 serving sweep of b on chat", None)]
    assert read_overview(tmp_path) == []
    (tmp_path / OVERVIEW_FILE).write_text(json.dumps([line.as_dict() for line in lines]))
    assert read_overview(tmp_path) == overview_text(lines) == [
        "chat · verdict: winner b  [Comparisons over all queries]",
        "chat · L4: no current L4 serving sweep of b on chat  [not in the report]",
    ]


@pytest.mark.parametrize("dataset", ["chat", "other"])
def test_lines_follow_the_dataset_they_describe(dataset):
    lines = pyramid_overview([dataset], metric=METRIC, verdicts=[verdict()], comparisons=COMPARISONS,
                             transfer=TRANSFER)
    assert {line.dataset for line in lines} == {dataset}
    assert lines[-1].text == dict(TRANSFER)[dataset]
