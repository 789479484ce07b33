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
