"""MTEB task data in the layouts people keep on disk, written here by ``datasets`` itself (a test
dependency) and by pyarrow, loaded offline into the frozen task tables of every family."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

datasets = pytest.importorskip("datasets")

from embedpyramid.config import ConfigError, MtebDataset, load_config  # noqa: E402
from embedpyramid.data import DataError, find_layout, freeze_task_dataset, load_mteb_task, load_task_dataset  # noqa: E402

STS = {"sentence1": ["A man plays.", "A cat sleeps.", "A man plays."],
       "sentence2": ["A man is playing.", "A dog runs.", "Someone plays music."], "score": [4.8, 0.4, 2.5]}


def dataset_dict(**splits: dict) -> datasets.DatasetDict:
    return datasets.DatasetDict({name: datasets.Dataset.from_dict(columns) for name, columns in splits.items()})


def spec(task: str, **options) -> MtebDataset:
    return MtebDataset(loader="mteb", task=task, path=".", **options)


def write_card(folder, configs: list[dict]) -> None:
    import yaml

    (folder / "README.md").write_text("---\n" + yaml.safe_dump({"configs": configs}) + "---\n# card\n")


def test_sts_from_save_to_disk_keeps_rows_splits_and_encodes_each_sentence_once(tmp_path):
    dataset_dict(test=STS, train={k: v[:1] for k, v in STS.items()}).save_to_disk(tmp_path / "stsb")
    tables = load_mteb_task(tmp_path / "stsb", spec("sts"))
    assert tables.pairs.column("pair_id").to_pylist() == ["test/000000", "test/000001", "test/000002"]
    assert tables.pairs.column("gold").to_pylist() == [4.8, 0.4, 2.5]
    assert set(tables.pairs.column("split").to_pylist()) == {"test"}
    assert tables.texts.num_rows == 5  # "A man plays." is one text used by two pairs
    by_id = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["text"].to_pylist(), strict=True))
    assert [by_id[i] for i in tables.pairs.column("text_id_2").to_pylist()] == STS["sentence2"]
    assert tables.source["layout"] == "save_to_disk" and tables.source["splits"] == {"test": "test"}
    frozen = freeze_task_dataset("stsb", tables, tmp_path / "frozen")
    assert frozen.manifest["counts"] == {"texts": 5, "pairs": 3, "pairs_test": 3}
    train = load_mteb_task(tmp_path / "stsb", spec("sts", split="train"))
    assert train.pairs.column("split").to_pylist() == ["train"]


def test_pair_classification_from_a_hub_snapshot_with_configs_maps_dev_and_test(tmp_path):
    snapshot = tmp_path / "datasets--mteb--dups" / "snapshots" / "abc123"
    (snapshot / "data").mkdir(parents=True)
    (tmp_path / "datasets--mteb--dups" / "refs").mkdir()
    (tmp_path / "datasets--mteb--dups" / "refs" / "main").write_text("abc123")
    rows = {"sentence1": ["a", "b", "c", "d"], "sentence2": ["a!", "x", "c!", "y"], "labels": [1, 0, 1, 0]}
    datasets.Dataset.from_dict(rows).to_parquet(snapshot / "data" / "test-00000-of-00001.parquet")
    datasets.Dataset.from_dict({k: v[:2] for k, v in rows.items()}).to_parquet(
        snapshot / "data" / "validation-00000-of-00001.parquet")
    write_card(snapshot, [{"config_name": "default", "data_files": [
        {"split": "test", "path": "data/test-*"}, {"split": "validation", "path": "data/validation-*"}]}])
    layout = find_layout(tmp_path / "datasets--mteb--dups")
    assert layout.kind == "hub configs" and set(layout.subsets["default"]) == {"test", "validation"}
    tables = load_mteb_task(tmp_path / "datasets--mteb--dups", spec("pair_classification", dev_split="validation"))
    pairs = tables.pairs.to_pydict()
    assert pairs["split"] == ["test"] * 4 + ["dev"] * 2  # sorted by pair id: test/… then validation/…
    assert pairs["gold"] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert tables.source["splits"] == {"dev": "validation", "test": "test"}


def test_pair_classification_v1_row_of_lists_in_jsonl_gz_is_flattened(tmp_path):
    row = {"sentence1": ["a", "b", "c"], "sentence2": ["a?", "q", "c?"], "labels": [1, 0, 1]}
    with gzip.open(tmp_path / "test.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(row) + "\n")
    tables = load_mteb_task(tmp_path, spec("pair_classification", pair_classification={"protocol": "mteb"}))
    assert tables.pairs.num_rows == 3 and tables.pairs.column("gold").to_pylist() == [1.0, 0.0, 1.0]
    assert tables.source["layout"] == "split files"


def test_classification_reads_train_and_eval_splits_in_row_order_with_labels_as_strings(tmp_path):
    datasets.Dataset.from_dict({"text": ["t0", "t1", "t2"], "label": [2, 0, 1]}).to_parquet(tmp_path / "train.parquet")
    datasets.Dataset.from_dict({"text": ["e0", "e1"], "label": [0, 10]}).to_parquet(tmp_path / "test.parquet")
    tables = load_mteb_task(tmp_path, spec("classification"))
    texts = tables.texts.to_pydict()
    assert texts["text_id"] == ["test/000000", "test/000001", "train/000000", "train/000001", "train/000002"]
    assert texts["label"] == ["0", "10", "2", "0", "1"] and texts["split"] == ["test"] * 2 + ["train"] * 3
    assert tables.pairs is None
    only_test = load_mteb_task(tmp_path, spec("classification", classification={"mteb": {"train_split": "dev"}}))
    assert only_test.texts.column("split").to_pylist() == ["test", "test"]


def test_clustering_v2_rows_and_v1_sets_flattened_or_deduplicated_as_the_task_version_does(tmp_path):
    (tmp_path / "v2").mkdir()
    pq.write_table(pa.table({"sentences": ["s0", "s1", "s2"], "labels": [["x"], ["y"], ["x"]]}),
                   tmp_path / "v2" / "test.parquet")
    v2 = load_mteb_task(tmp_path / "v2", spec("clustering"))
    assert v2.texts.column("label").to_pylist() == ["x", "y", "x"]
    (tmp_path / "v1").mkdir()
    pq.write_table(pa.table({"sentences": [["a", "b"], ["b", "c"]], "labels": [[1, 2], [2, 3]]}),
                   tmp_path / "v1" / "test.parquet")
    flat = load_mteb_task(tmp_path / "v1", spec("clustering"))
    assert flat.texts.column("text").to_pylist() == ["a", "b", "b", "c"]  # itertools.chain keeps "b" twice
    assert flat.texts.column("label").to_pylist() == ["1", "2", "2", "3"]
    assert flat.source["items"] == {"v1_sets": 2, "sets": "flatten", "items": 4}
    unique = load_mteb_task(tmp_path / "v1", spec("clustering", clustering={"mteb": {"sets": "deduplicate"}}))
    assert unique.texts.column("text").to_pylist() == ["a", "b", "c"]  # "b" again in set 2 is dropped
    assert unique.texts.column("label").to_pylist() == ["1", "2", "3"]
    assert unique.source["items"]["duplicates_dropped"] == 1
    (tmp_path / "deep").mkdir()
    pq.write_table(pa.table({"sentences": ["s0"], "labels": [["x", "x1"]]}), tmp_path / "deep" / "test.parquet")
    with pytest.raises(DataError, match=r"test.parquet: row 0: column 'labels' holds hierarchical labels"):
        load_mteb_task(tmp_path / "deep", spec("clustering"))


def test_bitext_reads_every_subset_folder_as_a_language_pair(tmp_path):
    for subset, rows in {"deu-eng": (["Hallo Welt", "Danke"], ["Hello world", "Thanks"]),
                         "fra-eng": (["Bonjour"], ["Hello"])}.items():
        (tmp_path / subset).mkdir()
        datasets.Dataset.from_dict({"sentence1": rows[0], "sentence2": rows[1]}).to_parquet(
            tmp_path / subset / "test-00000-of-00001.parquet")
    tables = load_mteb_task(tmp_path, spec("bitext"))
    pairs = tables.pairs.to_pydict()
    assert pairs["pair_id"] == ["deu-eng/000000", "deu-eng/000001", "fra-eng/000000"]
    assert pairs["language_pair"] == ["deu-eng", "deu-eng", "fra-eng"] and pairs["gold"] == [1.0] * 3
    one = load_mteb_task(tmp_path, spec("bitext", subset="fra-eng"))
    assert one.pairs.column("language_pair").to_pylist() == ["fra-eng"]


def test_renamed_columns_and_slices_come_from_the_file(tmp_path):
    pq.write_table(pa.table({"s1": ["a", "b"], "s2": ["c", "d"], "sim": [1, 3], "genre": ["news", "forum"]}),
                   tmp_path / "test.parquet")
    tables = load_mteb_task(tmp_path, spec("sts", columns={"sentence1": "s1", "sentence2": "s2", "score": "sim"},
                                           slices=["genre"]))
    assert tables.pairs.column("genre").to_pylist() == ["news", "forum"]
    assert tables.pairs.column("gold").to_pylist() == [1.0, 3.0]


def test_bad_input_names_the_file_and_what_to_do(tmp_path):
    dataset_dict(train=STS).save_to_disk(tmp_path / "only_train")
    with pytest.raises(DataError, match=r"only_train: subset 'default' has no split 'test' \(its splits: train\); "
                                        "set split to one of them"):
        load_mteb_task(tmp_path / "only_train", spec("sts"))
    pq.write_table(pa.table({"sentence1": ["a"], "sentence2": ["b"], "similarity": [1.0]}), tmp_path / "test.parquet")
    with pytest.raises(DataError, match=r"test.parquet: no column\(s\) score \(columns: sentence1, sentence2, "
                                        r"similarity\); MTEB sts data has sentence1, sentence2, score — name the "
                                        "file's columns with columns:"):
        load_mteb_task(tmp_path / "test.parquet", spec("sts"))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("nothing here")
    with pytest.raises(DataError, match=r"notes: no MTEB task data found .*; point path at an MTEB task's data"):
        load_mteb_task(tmp_path / "notes", spec("sts"))
    (tmp_path / "langs").mkdir()
    for subset in ("de", "fr"):
        (tmp_path / "langs" / subset).mkdir()
        pq.write_table(pa.table(STS), tmp_path / "langs" / subset / "test.parquet")
    with pytest.raises(DataError, match=r"langs: 2 subsets \(de, fr\); this task reads one: set subset:"):
        load_mteb_task(tmp_path / "langs", spec("sts"))
    with pytest.raises(DataError, match=r"langs: no subset 'es'; subsets found \(split files\): de, fr"):
        load_mteb_task(tmp_path / "langs", spec("sts", subset="es"))
    datasets.Dataset.from_dict(STS).save_to_disk(tmp_path / "nameless")
    with pytest.raises(DataError, match=r"nameless/state.json: a saved Dataset with no split name; save a DatasetDict"):
        load_mteb_task(tmp_path / "nameless", spec("sts"))
    pq.write_table(pa.table({"sentence1": ["a"], "sentence2": ["b"], "labels": [2]}), tmp_path / "pc.parquet")
    with pytest.raises(DataError, match=r"pc.parquet: row 0: label 2 in column 'labels' is not 0 or 1"):
        load_mteb_task(tmp_path / "pc.parquet", spec("pair_classification", split="pc",
                                                     pair_classification={"protocol": "mteb"}))


def test_the_config_entry_checks_its_options_and_loads_relative_to_the_folder(tmp_path, write_configs):
    with pytest.raises(ValueError, match="set dev_split .*, or pair_classification.protocol: mteb"):
        spec("pair_classification")
    with pytest.raises(ValueError, match=r"columns: \['text'\] are not columns of MTEB sts data"):
        spec("sts", columns={"text": "t"})
    with pytest.raises(ValueError, match="classification reads the splits of classification.mteb"):
        spec("classification", split="validation")
    with pytest.raises(ConfigError, match=r"datasets.missing.path: .*missing-folder does not exist"):
        load_config(write_configs(datasets={"missing": {"loader": "mteb", "task": "sts", "path": "missing-folder"}}))
    folder = write_configs(datasets={"stsb": {"loader": "mteb", "task": "sts", "path": "data/stsb",
                                              "sts": {"protocol": "mteb"}}})
    dataset_dict(test=STS).save_to_disk(folder / "data" / "stsb")
    tables = load_task_dataset(load_config(folder), "stsb")
    assert tables.task == "sts" and tables.pairs.num_rows == 3
