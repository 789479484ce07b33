"""benchmarks/bench_pipeline.py's retrieval-only config: the pipeline it times must do what its
bare core does and no more, with the same cards and protocol as the folder it was given."""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_helpers import beir_folder

from embedpyramid.config import load_config

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def bench_pipeline(benchmark_script):
    return benchmark_script("bench_pipeline")


def test_the_full_settings_keep_their_cards_protocol_and_l4_but_only_the_retrieval_dataset(bench_pipeline, tmp_path):
    source = REPO / "configs" / "full"
    restricted = load_config(bench_pipeline.retrieval_only_configs(source, tmp_path / "restricted"))
    full = load_config(source)
    assert sorted(path.name for path in (tmp_path / "restricted").iterdir()) == [
        "ann.yaml", "datasets.yaml", "models.yaml", "protocol.yaml"]
    assert list(restricted.datasets) == full.datasets_with_data() == ["chatterbot-en"]
    assert full.task_datasets and full.systems is not None and full.downstream is not None
    assert restricted.task_datasets == {} and restricted.systems is None and restricted.downstream is None
    # The same cards (their keys hash every setting) and the full protocol, laid over its base.
    assert [model.key for model in restricted.models.values()] == [model.key for model in full.models.values()]
    assert restricted.protocol == full.protocol and restricted.protocol.comparison.n_resamples == 10000
    assert restricted.ann == full.ann


def test_a_relative_dataset_path_still_names_the_same_folder_from_the_copy(bench_pipeline, write_configs, tmp_path):
    beir_folder(tmp_path / "configs" / "tiny-beir")
    folder = write_configs(datasets={"tiny": {"loader": "beir", "path": "tiny-beir"},
                                     "lee-sts": {"loader": "gensim-lee", "task": "sts"}})
    restricted = load_config(bench_pipeline.retrieval_only_configs(folder, tmp_path / "restricted"))
    assert list(restricted.datasets) == ["tiny"] and restricted.task_datasets == {}
    assert Path(restricted.datasets["tiny"].path) == (folder / "tiny-beir").resolve()
