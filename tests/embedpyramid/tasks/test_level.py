import polars as pl
import pytest
from toy_encoders import CharacterNgrams

from embedpyramid.config import load_config
from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.data import freeze_task_dataset, load_task_dataset, task_encoding_inputs
from embedpyramid.stats.comparisons import compare_models
from embedpyramid.store import ArtifactStore, read_table_metadata
from embedpyramid.tasks import (
    STATISTIC_COMPARISON_SCHEMA,
    compare_task,
    evaluate_task,
    read_task_result,
    task_groups,
    task_items,
    tasks_dir,
    write_task_result,
)
from embedpyramid.vectors import TextVectors

DATASETS = {
    "duplicates": {"loader": "chatterbot", "task": "pair_classification", "slices": ["category"],
                   "group_column": "answer_group"},
    "lee": {"loader": "gensim-lee"},
    "clusters": {"loader": "chatterbot", "task": "clustering", "categories": ["ai", "computers", "emotion"],
                 "clustering": {"seeds": [0, 1]}},
}


@pytest.fixture
def frozen_tasks(write_configs, tmp_path):
    config = load_config(write_configs(datasets=DATASETS))
    return config, {name: freeze_task_dataset(name, load_task_dataset(config, name), tmp_path / "datasets" / name)
                    for name in DATASETS}


def toy_vectors(frozen, dim: int) -> TextVectors:
    inputs = task_encoding_inputs(frozen)
    return TextVectors(inputs.ids, CharacterNgrams(dim).encode(inputs.texts))


def test_evaluate_write_and_read_back_with_settings(frozen_tasks, tmp_path):
    config, frozen = frozen_tasks
    store = ArtifactStore(tmp_path / "data")
    for name in DATASETS:
        spec = config.task_dataset(name)
        result = evaluate_task(spec, frozen[name], toy_vectors(frozen[name], 64), dataset=name, model="toy@1")
        assert result.task == spec.task and result.summary.height > 0
        directory = write_task_result(result, tasks_dir(store, name, "toy@1"))
        back = read_task_result(directory)
        assert back.task == result.task and back.settings == result.settings
        for table in ("per_item", "predictions", "summary", "per_seed"):
            assert getattr(back, table).equals(getattr(result, table))
        assert read_table_metadata(directory / "per_item.parquet")["task"] == spec.task
    clusters = read_task_result(tasks_dir(store, "clusters", "toy@1"))
    assert clusters.settings["seeds"] == [0, 1] and set(clusters.per_seed["seed"]) == {0, 1}


def test_per_item_rows_feed_the_existing_paired_comparisons(frozen_tasks):
    config, frozen = frozen_tasks
    spec, dataset = config.task_dataset("duplicates"), frozen["duplicates"]
    results = [evaluate_task(spec, dataset, toy_vectors(dataset, dim), dataset="duplicates", model=f"toy-{dim}")
               for dim in (16, 64)]
    items = task_items(dataset, spec)
    assert items.columns == ["query_id", "text", "category", "answer_group"] and " ⟷ " in items["text"][0]
    settings = ComparisonSettings(baseline="toy-16", n_resamples=200, n_permutations=200,
                                  slice_columns=("category",), group_column="answer_group", length_buckets=())
    table = compare_models(pl.concat([r.per_item for r in results]), items, settings)
    overall = table.filter(pl.col("slice_column") == "all").row(0, named=True)
    assert (overall["metric"], overall["n"], overall["resampling"]) == ("accuracy", 30, "group:answer_group")
    assert "category" in set(table["slice_column"])
    groups = task_groups(items, spec)
    statistics = compare_task("pair_classification", results[0].predictions, results[1].predictions,
                              n_resamples=200, groups=groups)
    assert statistics.schema == pl.Schema(STATISTIC_COMPARISON_SCHEMA)
    assert set(statistics["resampling"]) == {"group"} and statistics["n"].to_list() == [30] * 4
