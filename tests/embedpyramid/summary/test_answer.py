import json

import polars as pl
import pytest

from embedpyramid.current_inputs import EvaluatedPartition
from embedpyramid.summary.answer import compact_leaderboard, headline_metrics, terminal_answer, verdict_lines
from embedpyramid.summary.results import build_results_db

METRICS = ["nDCG@10", "Recall@10", "Recall@100", "MRR@10", "MRR", "P@1"]


def partition(tmp_path, model: str, ndcg: list[float]) -> EvaluatedPartition:
    """A model's per-query rows: nDCG@10 as given, every other metric 0.5, on four queries."""
    folder = tmp_path / model
    folder.mkdir(parents=True)
    queries = [f"q{i}" for i in range(len(ndcg))]
    rows = [{"dataset": "d", "model": model, "system": "exact", "query_id": q, "metric": metric,
             "value": value if metric == "nDCG@10" else 0.5}
            for metric in METRICS for q, value in zip(queries, ndcg, strict=True)]
    pl.DataFrame(rows).write_parquet(folder / "metrics.parquet")
    pl.DataFrame({"query_id": queries, "rank": [1] * len(queries), "doc_id": ["x"] * len(queries),
                  "score": [0.5] * len(queries)}).write_parquet(folder / "run.parquet")
    pl.DataFrame({"query_id": queries, "doc_id": ["x"] * len(queries), "relevance": [1] * len(queries)}).write_parquet(
        tmp_path / "qrels.parquet")
    return EvaluatedPartition("d", model, model.split("@")[0], "abc", {"backend": "x"}, "exact",
                              folder / "metrics.parquet", folder / "run.parquet", tmp_path / "qrels.parquet", {})


def database(tmp_path, decision: str):
    comparisons = pl.DataFrame({"dataset": ["d"], "system": ["exact"], "metric": ["nDCG@10"], "model_a": ["a@1"],
                                "model_b": ["b@2"], "slice_column": ["all"], "family": ["confirmatory"],
                                "decision": [decision]})
    return build_results_db(tmp_path / "results.duckdb", [
        partition(tmp_path, "a@1", [0.0, 1.0, 1.0, 0.5]), partition(tmp_path, "b@2", [1.0, 1.0, 1.0, 1.0])],
        {"comparisons": comparisons.to_arrow()}, quality_metric="nDCG@10").path


def test_headline_metrics_are_the_report_metric_the_deepest_recall_and_mrr_at_10():
    assert headline_metrics(METRICS, "nDCG@10") == ["nDCG@10", "Recall@100", "MRR@10"]
    assert headline_metrics(["MRR@5", "MRR", "P@1", "judge:relevance"], "P@1") == ["P@1", "MRR@5"]
    assert headline_metrics(["Recall@10", "nDCG@10"], "Recall@10") == ["Recall@10"]


def test_the_table_shows_the_t_interval_of_the_report_metric_and_the_holm_groups(tmp_path):
    table = compact_leaderboard(database(tmp_path, "better")).splitlines()
    assert table[0] == "d · 4 queries · exact search"
    assert table[1].split() == ["model", "nDCG@10", "(95%", "CI)", "Recall@100", "MRR@10", "group"]
    # a@1: mean 0.625, sd 0.4787 (n - 1 = 3), t(0.975, 3) = 3.1824: 0.625 ± 0.7617. b@2: sd 0, no width.
    assert table[2].split() == ["b@2", "1.0000", "[1.0000,", "1.0000]", "0.5000", "0.5000", "a"]
    assert table[3].split() == ["a@1", "0.6250", "[-0.1367,", "1.3867]", "0.5000", "0.5000", "b"]
    assert [line.split()[-1] for line in compact_leaderboard(database(tmp_path / "n", "not significant"))
            .splitlines()[2:]] == ["a", "a"]


def test_one_verdict_line_per_dataset_says_how_many_more_the_report_holds(tmp_path):
    verdicts = [{"dataset": "d", "text": "long d", "line": "d: b wins"},
                {"dataset": "t", "task": "sts", "text": "long t1", "line": "[sts, cosine] t: first"},
                {"dataset": "t", "task": "sts", "text": "long t2", "line": "[sts, cosine] t: second"},
                {"dataset": "u", "text": "only a paragraph"}]
    assert verdict_lines(verdicts) == ["d: b wins", "[sts, cosine] t: first (+1 more in the report)",
                                       "only a paragraph"]
    report = tmp_path / "report"
    report.mkdir()
    (report / "verdict.json").write_text(json.dumps(verdicts[:1]))
    answer = terminal_answer(database(tmp_path, "better"), report)
    assert answer.endswith("verdict (one line per dataset; the report has every system and metric):\n  d: b wins")


def test_a_database_without_the_report_settings_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results database yet; run `embedpyramid run` first"):
        compact_leaderboard(tmp_path / "missing.duckdb")
