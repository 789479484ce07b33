import dataclasses
import json

import duckdb
import polars as pl
import pytest

from embedpyramid.current_inputs import EvaluatedPartition
from embedpyramid.efficiency import EFFICIENCY_SCHEMA, efficiency_frame
from embedpyramid.summary.results import build_results_db, format_leaderboard, read_leaderboard


def partition(tmp_path, model: str, values: list[float]) -> EvaluatedPartition:
    folder = tmp_path / model
    folder.mkdir()
    pl.DataFrame({
        "dataset": ["d"] * 4, "model": [model] * 4, "system": ["exact"] * 4,
        "query_id": ["q1", "q2", "q1", "q2"], "metric": ["nDCG@10", "nDCG@10", "P@1", "P@1"], "value": values,
    }).write_parquet(folder / "metrics.parquet")
    pl.DataFrame({"query_id": ["q1", "q2"], "rank": [1, 1], "doc_id": ["a", "b"], "score": [0.5, 0.4]}).write_parquet(
        folder / "run.parquet")
    qrels = tmp_path / "qrels.parquet"
    pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a", "c"], "relevance": [1, 2]}).write_parquet(qrels)
    return EvaluatedPartition("d", model, model.split("@")[0], "abc", {"backend": "x"}, "exact",
                              folder / "metrics.parquet", folder / "run.parquet", qrels, {"gain": "linear"})


def test_results_db_views_and_leaderboard(tmp_path):
    pl.DataFrame({"metric": ["P@1"], "mean_delta": [-0.5]}).write_parquet(tmp_path / "comparisons.parquet")
    pl.DataFrame(schema={"metric": pl.String, "delta": pl.Float64}).write_parquet(tmp_path / "regressions.parquet")
    db = build_results_db(tmp_path / "results.duckdb", [
        partition(tmp_path, "a@1", [1.0, 0.5, 1.0, 0.0]),
        partition(tmp_path, "b@2", [0.0, 0.25, 0.0, 0.0]),
    ], {"comparisons": tmp_path / "comparisons.parquet", "regressions": tmp_path / "regressions.parquet"}).path
    with duckdb.connect(str(db), read_only=True) as con:
        columns = {view: [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()]
                   for view in ("per_query_metrics", "leaderboard", "runs", "qrels")}
        assert con.sql("SELECT count(*) FROM runs").fetchall() == [(4,)]
        assert con.sql("SELECT count(*) FROM qrels").fetchall() == [(2,)]
        assert con.sql("SELECT metric, mean_delta FROM comparisons").fetchall() == [("P@1", -0.5)]
        assert con.sql("SELECT count(*) FROM regressions").fetchall() == [(0,)]
    assert columns == {
        "per_query_metrics": ["dataset", "model", "system", "query_id", "metric", "value"],
        "leaderboard": ["dataset", "model", "system", "metric", "mean", "n"],
        "runs": ["dataset", "model", "system", "query_id", "rank", "doc_id", "score"],
        "qrels": ["dataset", "query_id", "doc_id", "relevance"],
    }
    board = read_leaderboard(db)
    assert board.select("model", "metric", "mean", "n").rows() == [
        ("a@1", "nDCG@10", 0.75, 2), ("a@1", "P@1", 0.5, 2), ("b@2", "nDCG@10", 0.125, 2), ("b@2", "P@1", 0.0, 2),
    ]
    table = format_leaderboard(board).splitlines()
    assert table[1].split() == ["metric", "a@1", "b@2"]
    assert table[3].split() == ["n", "queries", "2", "2"] and table[4].split() == ["nDCG@10", "0.7500", "0.1250"]
    assert json.loads(format_leaderboard(board, "json"))[0]["mean"] == 0.75
    assert format_leaderboard(board, "csv").splitlines()[0] == "dataset,model,system,metric,mean,n"


def test_the_table_shows_exact_search_per_model_then_the_systems_on_one_metric():
    rows = [("d", "a@1", "exact", "nDCG@10", 0.5, 4), ("d", "b@2", "exact", "nDCG@10", 0.25, 4),
            ("d", "a@1", "exact", "judge:relevance", 3.5, 4), ("d", "none", "bm25", "nDCG@10", 0.125, 4),
            ("d", "a@1", "rrf", "nDCG@10", 0.375, 4), ("d", "a@1", "rrf", "P@1", 0.25, 4)]
    board = pl.DataFrame(rows, schema=["dataset", "model", "system", "metric", "mean", "n"], orient="row")
    table = format_leaderboard(board).splitlines()
    assert table[1].split() == ["metric", "a@1", "b@2"]
    assert table[4].split() == ["nDCG@10", "0.5000", "0.2500"] and table[5].split() == ["judge:relevance", "3.5000", "-"]
    assert table[7] == "dataset: d · L5 systems, nDCG@10" and table[8].split() == ["system", "none", "a@1"]
    assert table[10].split() == ["bm25", "0.1250", "-"] and table[11].split() == ["rrf", "-", "0.3750"]
    assert len(table) == 12


def test_the_efficiency_view_joins_each_row_to_its_leaderboard_quality(tmp_path):
    a, b = partition(tmp_path, "a@1", [1.0, 0.5, 1.0, 0.0]), partition(tmp_path, "b@2", [0.0, 0.25, 0.0, 0.0])
    rows = [{**dict.fromkeys(EFFICIENCY_SCHEMA), "dataset": "d", "model": "a@1", "documents_per_second": 50.0}]
    efficiency_frame(rows).write_parquet(tmp_path / "efficiency.parquet")
    a = dataclasses.replace(a, efficiency_path=tmp_path / "efficiency.parquet")
    db = build_results_db(tmp_path / "results.duckdb", [a, b], quality_metric="P@1").path
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT model, documents_per_second, quality_metric, quality FROM efficiency").fetchall() == [
            ("a@1", 50.0, "P@1", 0.5)]
    db = build_results_db(tmp_path / "empty.duckdb", [b]).path
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM efficiency").fetchall() == [(0,)]
        assert [row[0] for row in con.execute("DESCRIBE efficiency").fetchall()] == [
            *EFFICIENCY_SCHEMA, "quality_metric", "quality"]


def test_nothing_to_summarize_and_missing_db(tmp_path):
    with pytest.raises(ValueError, match="materialize retrieval_metrics or a task first"):
        build_results_db(tmp_path / "r.duckdb", [])
    with pytest.raises(FileNotFoundError, match="run `embedpyramid run` first"):
        read_leaderboard(tmp_path / "r.duckdb")


def test_paths_with_glob_characters_are_read_literally(tmp_path):
    # DuckDB would expand 'runs?' to both runs? and runsx, and 'm[1]' to m1 only.
    literal, decoy = tmp_path / "runs?" / "m[1]", tmp_path / "runsx" / "m[1]"
    literal.mkdir(parents=True)
    decoy.mkdir(parents=True)
    (tmp_path / "runs?" / "m1").mkdir()
    chosen = partition(literal, "a@1", [1.0, 0.5, 1.0, 0.0])
    partition(decoy, "a@1", [0.0, 0.0, 0.0, 0.0])
    partition(tmp_path / "runs?" / "m1", "a@1", [0.0, 0.0, 0.0, 0.0])
    db = build_results_db(tmp_path / "results.duckdb", [chosen], {"extra": chosen.run_path}).path
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT count(*), sum(value) FROM per_query_metrics").fetchall() == [(4, 2.5)]
        assert con.sql("SELECT count(*) FROM runs").fetchall() == [(2,)]
        assert con.sql("SELECT count(*) FROM qrels").fetchall() == [(2,)]
        assert con.sql("SELECT count(*) FROM extra").fetchall() == [(2,)]


def test_the_conventions_view_records_the_protocol_of_task_numbers_beside_the_retrieval_rows(tmp_path):
    from embedpyramid.config.tasks import MTEB_VERSION
    from embedpyramid.tasks.common import TaskResult
    from embedpyramid.tasks.comparison import task_conventions

    summary = pl.DataFrame({"system": ["cosine", "manhattan"]})
    settings = {"protocol": "mteb", "mteb_version": MTEB_VERSION, "similarity": "inner_product", "n_pairs": 3,
                "main_score": {"system": "cosine", "metric": "spearman", "mteb_key": "cosine_spearman"}}
    result = TaskResult("sts", pl.DataFrame(), pl.DataFrame(), summary, pl.DataFrame(), settings)
    task_conventions("stsb", "a@1", result).write_parquet(tmp_path / "task_conventions.parquet")
    db = build_results_db(tmp_path / "results.duckdb", [partition(tmp_path, "a@1", [1.0, 0.5, 1.0, 0.0])],
                          extra_conventions=[tmp_path / "task_conventions.parquet"]).path
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.sql("SELECT dataset, model, system, conventions FROM conventions ORDER BY dataset, system").fetchall()
    assert [row[:3] for row in rows] == [("d", "a@1", "exact"), ("stsb", "a@1", "cosine"), ("stsb", "a@1", "manhattan")]
    assert json.loads(rows[0][3]) == {"gain": "linear"}
    assert json.loads(rows[1][3]) == json.loads(rows[2][3]) == {
        "task": "sts", "protocol": "mteb", "mteb_version": MTEB_VERSION, "similarity": "inner_product",
        "main_score": {"system": "cosine", "metric": "spearman", "mteb_key": "cosine_spearman"}}


def view_rows(db) -> dict[str, list[tuple]]:
    """Every view of a results database, its rows sorted (row order is not part of a view)."""
    with duckdb.connect(str(db), read_only=True) as con:
        views = [name for (name,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]
        return {view: sorted(con.execute(f'SELECT * FROM "{view}"').fetchall(), key=repr) for view in views}


def test_the_database_is_updated_file_by_file_and_equals_a_build_from_scratch(tmp_path):
    pl.DataFrame({"metric": ["P@1"], "mean_delta": [-0.5]}).write_parquet(tmp_path / "comparisons.parquet")
    a, b = partition(tmp_path, "a@1", [1.0, 0.5, 1.0, 0.0]), partition(tmp_path, "b@2", [0.0, 0.25, 0.0, 0.0])
    c = partition(tmp_path, "c@3", [0.5, 0.5, 0.0, 1.0])  # (each call writes the shared qrels again)
    target, summary = tmp_path / "results.duckdb", {"comparisons": tmp_path / "comparisons.parquet"}

    def build(partitions, extra=summary):
        built = build_results_db(target, partitions, extra)
        fresh = build_results_db(tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}.duckdb", partitions, extra)
        assert fresh.sources_kept == 0
        assert view_rows(built.path) == view_rows(fresh.path)
        return built.sources_read, built.sources_kept

    # Two partitions: their metrics and runs, and the dataset's qrels.
    assert build([a, b]) == (5, 0)
    assert build([a, b]) == (0, 5)  # nothing changed: no file is read again
    assert build([a, b, c]) == (2, 5)  # a new model: only its two files
    pl.DataFrame({"dataset": ["d"] * 5, "model": ["a@1"] * 5, "system": ["exact"] * 5,
                  "query_id": ["q1", "q2", "q3", "q1", "q2"], "metric": ["nDCG@10"] * 3 + ["P@1"] * 2,
                  "value": [0.0, 0.5, 1.0, 0.0, 1.0]}).write_parquet(a.metrics_path)
    assert build([a, b, c]) == (1, 6)  # a re-evaluated partition: its rewritten file
    assert build([a, c], extra={}) == (0, 5)  # a card that left: its rows go; so does a summary table
    rows = view_rows(target)
    assert "comparisons" not in rows and {row[1] for row in rows["runs"]} == {"a@1", "c@3"}
    assert ("d", "a@1", "exact", "nDCG@10", 0.5, 3) in rows["leaderboard"]


def test_a_database_that_cannot_take_the_update_is_built_again(tmp_path):
    a = partition(tmp_path, "a@1", [1.0, 0.5, 1.0, 0.0])
    target = tmp_path / "results.duckdb"
    with duckdb.connect(str(target)) as con:  # an older layout: no sources, no _source column
        con.execute("CREATE TABLE t_runs (query_id VARCHAR)")
    assert build_results_db(target, [a]).sources_read == 3
    with duckdb.connect(str(target)) as con:  # a table whose columns no longer fit
        con.execute("ALTER TABLE t_runs DROP COLUMN score")
        con.execute("DELETE FROM t_sources WHERE \"table\" = 'runs'")
    built = build_results_db(target, [a])
    assert (built.sources_read, built.sources_kept) == (3, 0)
    assert view_rows(target) == view_rows(build_results_db(tmp_path / "fresh.duckdb", [a]).path)
