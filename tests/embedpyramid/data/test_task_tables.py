import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embedpyramid.config import load_config
from embedpyramid.data import (
    PAIRS_SCHEMA,
    DataError,
    freeze_task_dataset,
    load_lee,
    load_task_dataset,
    open_frozen,
    task_encoding_inputs,
    task_tables,
    verify_task_frozen,
)


def texts(ids, values=None):
    return pa.table({"text_id": ids, "text": values or [f"text {i}" for i in ids]})


def pairs(rows):
    return pa.table({"pair_id": [r[0] for r in rows], "text_id_1": [r[1] for r in rows],
                     "text_id_2": [r[2] for r in rows], "gold": [1.0] * len(rows), "split": ["test"] * len(rows)},
                    schema=PAIRS_SCHEMA)


def test_tables_are_sorted_by_id_and_checked():
    tables = task_tables("sts", texts(["b", "a"]), pairs([("p2", "a", "b"), ("p1", "b", "a")]), {}, "where")
    assert tables.texts["text_id"].to_pylist() == ["a", "b"] and tables.pairs["pair_id"].to_pylist() == ["p1", "p2"]
    with pytest.raises(DataError, match=r"where: duplicate text ids \['a'\]"):
        task_tables("sts", texts(["a", "a"]), pairs([("p", "a", "a")]), {}, "where")
    with pytest.raises(DataError, match=r"where: texts \['b'\] are empty"):
        task_tables("sts", texts(["a", "b"], ["x", " "]), pairs([("p", "a", "b")]), {}, "where")
    with pytest.raises(DataError, match=r"where: pairs name unknown text ids \['c'\] in text_id_2"):
        task_tables("sts", texts(["a", "b"]), pairs([("p", "a", "c")]), {}, "where")
    with pytest.raises(DataError, match="where: task classification needs a label for every text"):
        task_tables("classification", texts(["a", "b"]), None, {}, "where")
    with pytest.raises(DataError, match="where: task bitext needs pairs"):
        task_tables("bitext", texts(["a"]), None, {}, "where")


def test_refreezing_keeps_the_version_and_tampering_is_reported(tmp_path):
    first = freeze_task_dataset("lee", load_lee(), tmp_path / "lee")
    second = freeze_task_dataset("lee", load_lee(), tmp_path / "lee")
    assert first.version == second.version == open_frozen(tmp_path / "lee").version
    assert first.manifest["task"] == "sts" and first.manifest["counts"] == {"texts": 50, "pairs": 1225,
                                                                              "pairs_test": 1225}
    assert verify_task_frozen(second) == []
    inputs = task_encoding_inputs(second)
    assert len(inputs.ids) == 50 and inputs.table_sha == second.table_sha("texts")
    pq.write_table(second.read("pairs").slice(1), second.path("pairs"))
    assert any("does not match the sha256" in problem for problem in verify_task_frozen(second))


def test_configured_task_datasets_load_through_their_loaders(write_configs):
    config = load_config(write_configs(datasets={
        "lee": {"loader": "gensim-lee"},
        "cats": {"loader": "chatterbot", "task": "clustering", "categories": ["ai", "computers"]},
        "bad-slice": {"loader": "gensim-lee", "slices": ["genre"]},
    }))
    assert load_task_dataset(config, "lee").pairs.num_rows == 1225
    assert set(load_task_dataset(config, "cats").texts["label"].to_pylist()) == {"AI", "computers"}
    with pytest.raises(DataError, match=r"datasets\.bad-slice: slice/group columns \['genre'\] are not columns"):
        load_task_dataset(config, "bad-slice")


def test_task_settings_the_data_cannot_honour_are_refused_when_the_dataset_is_loaded(write_configs):
    # ai + computers hold 61 + 10 = 71 distinct questions; 5 stratified folds deal them
    # round-robin, so a test fold holds at most ceil(71 / 5) = 15 and a training fold 71 - 15 = 56.
    folder = write_configs(datasets={
        "cats": {"loader": "chatterbot", "task": "classification", "categories": ["ai", "computers"],
                 "classification": {"k": 5000}},
        "cats-56": {"loader": "chatterbot", "task": "classification", "categories": ["ai", "computers"],
                    "classification": {"k": 56}},
        "ko": {"loader": "django-bitext", "languages": ["ko"], "bitext": {"hubness_k": 300}},
    })
    config = load_config(folder)
    with pytest.raises(ValueError) as refused:
        load_task_dataset(config, "cats")
    assert str(refused.value) == (
        f"{folder / 'datasets.yaml'}: datasets.cats.classification.k: 5000 neighbours, but a training fold holds "
        "56 items (71 items in 2 classes, folds 5); allowed: 1 to 56")
    assert load_task_dataset(config, "cats-56").texts.num_rows == 71
    # Korean: 263 English strings with 261 distinct translations (a shared translation is one target).
    with pytest.raises(ValueError, match=r"datasets\.ko\.bitext\.hubness_k: 300 neighbours, but en-ko has 261 "
                                         r"targets; allowed: 1 to 261"):
        load_task_dataset(config, "ko")
