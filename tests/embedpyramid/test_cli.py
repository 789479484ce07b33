import duckdb

from embedpyramid.cli import main


def test_every_command_defaults_to_the_checkouts_data_folder_wherever_it_is_run(tmp_path, monkeypatch, capsys):
    checkout = tmp_path / "checkout"
    (checkout / "pipelines").mkdir(parents=True)
    (checkout / "workspace.yaml").write_text("load_from: []\n")
    (checkout / "pipelines" / "runner.py").write_text("")
    elsewhere = checkout / "notebooks"
    (elsewhere / "data").mkdir(parents=True)  # a ./data here must not be read
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("EMBEDPYRAMID_DATA", raising=False)
    assert main(["leaderboard"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {checkout / 'data' / 'results.duckdb'}: no results database yet; run `embedpyramid run` first")
    monkeypatch.setenv("EMBEDPYRAMID_DATA", str(tmp_path / "shared"))
    assert main(["leaderboard"]) == 2
    assert str(tmp_path / "shared" / "results.duckdb") in capsys.readouterr().err


def test_query_prints_rows_and_refuses_bad_sql_naming_the_database_and_its_views(tmp_path, capsys):
    db = tmp_path / "results.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE board AS SELECT * FROM (VALUES ('a@1', 'nDCG@10', 0.5::DOUBLE), ('b@2', 'nDCG@10', 0.25::DOUBLE))"
                    " AS t(model, metric, mean)")
        con.execute("CREATE VIEW leaderboard AS SELECT * FROM board")
    assert main(["query", "SELECT model, mean FROM leaderboard ORDER BY mean DESC", "--data", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["2 rows", "model  mean  ", "-----  ------",
                                                     "a@1    0.5000", "b@2    0.2500"]
    assert main(["query", "SELECT model FROM leaderboard", "--data", str(tmp_path), "--format", "csv"]) == 0
    assert capsys.readouterr().out == "model\na@1\nb@2\n\n"
    assert main(["query", "SELECT nope FROM leaderboard", "--data", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: {db}: Binder Error: ") and error.endswith("(views: leaderboard)")
    assert main(["query", "DELETE FROM board", "--data", str(tmp_path)]) == 2
    assert "read-only" in capsys.readouterr().err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM board").fetchall() == [(2,)]


def test_an_install_without_the_orchestration_packages_says_how_to_fix_it(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "pipelines.runner", None)  # what an install from before they were packaged meets
    monkeypatch.setitem(sys.modules, "pipelines", None)
    assert main(["status"]) == 2
    assert capsys.readouterr().err.strip().endswith("run `pip install -e .` in the checkout")
