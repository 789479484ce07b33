import polars as pl
import pyarrow as pa
import pytest
from upath import UPath

from embedpyramid.store import (
    CORRUPT_ADVICE,
    ArtifactStore,
    CorruptFileError,
    atomic_path,
    local_file,
    parquet_file,
    read_frame,
    read_json,
    read_table,
    read_table_metadata,
    store_path,
    write_json,
    write_parquet,
    write_text,
    write_with,
)


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = write_text("old", tmp_path / "artefact.txt")
    with pytest.raises(RuntimeError), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["artefact.txt"]


def test_a_data_folder_is_a_literal_path_or_a_url(tmp_path):
    assert store_path(str(tmp_path / "runs[1]?x")) == tmp_path / "runs[1]?x"
    assert isinstance(store_path("memory://evals/data"), UPath)
    assert store_path("memory://evals/data").protocol == "memory"
    assert str(ArtifactStore.at("s3://bucket/evals").metrics_path("d", "m@1", "exact")) == \
        "s3://bucket/evals/metrics/d/m@1/exact.parquet"


def test_brackets_and_question_marks_in_local_paths_are_not_patterns(tmp_path):
    folder = tmp_path / "runs[1]?"
    table = pa.table({"x": [1, 2]}).replace_schema_metadata({"embedpyramid": '{"k": 1}'})
    write_parquet(table, folder / "t.parquet")
    write_parquet(pa.table({"x": [9]}), tmp_path / "runs1" / "t.parquet")  # what a glob would also match
    assert read_frame(folder / "t.parquet")["x"].to_list() == [1, 2]
    assert read_table(folder / "t.parquet").num_rows == 2


@pytest.fixture
def memory_root():
    root = UPath(f"memory://store-test/{id(object())}")
    yield root
    root.fs.rm(root.path, recursive=True)


def test_every_helper_reads_and_writes_on_an_fsspec_filesystem(memory_root, tmp_path):
    """memory:// stands for object storage: the same calls, no local file left behind."""
    table = pa.table({"x": [1, 2, 3]}).replace_schema_metadata({"embedpyramid": '{"conventions": "linear"}'})
    target = memory_root / "metrics" / "d" / "m@1" / "exact.parquet"
    assert write_parquet(table, target) == target
    assert target.is_file() and [p.name for p in target.parent.iterdir()] == ["exact.parquet"]
    assert read_table(target).column("x").to_pylist() == [1, 2, 3]
    assert read_frame(target, columns=["x"]).equals(pl.DataFrame({"x": [1, 2, 3]}))
    assert read_table_metadata(target) == {"conventions": "linear"}
    write_json({"a": [1]}, memory_root / "m.json")
    assert read_json(memory_root / "m.json") == {"a": [1]}

    def writer(path):
        path.write_bytes(b"database")

    db = write_with(writer, memory_root / "results.duckdb")
    with local_file(db) as local:
        assert local.read_bytes() == b"database"
    assert not local.exists()


def test_a_failed_remote_write_leaves_the_previous_object(memory_root):
    target = write_text("old", memory_root / "report.md")
    with pytest.raises(RuntimeError), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in memory_root.iterdir()] == ["report.md"]


def _read_row_group(path):
    with parquet_file(path) as parquet:
        return parquet.read_row_group(0)


@pytest.mark.parametrize("reader", [read_frame, read_table, read_table_metadata, _read_row_group])
@pytest.mark.parametrize(("damage", "detail"), [
    (lambda content: content[: len(content) // 2], "Parquet magic bytes not found in footer. Either the file is "
                                                    "corrupted or this is not a parquet file."),
    (lambda content: b"", "Parquet file size is 0 bytes"),
])
def test_a_damaged_parquet_file_is_refused_naming_it_and_what_to_do(tmp_path, reader, damage, detail):
    path = write_parquet(pa.table({"id": ["a", "b"], "value": [1.0, 2.0]}).replace_schema_metadata(
        {"embedpyramid": "{}"}), tmp_path / "runs" / "exact.parquet")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptFileError) as refused:
        reader(path)
    assert str(refused.value) == f"{path}: not a readable Parquet file ({detail}); {CORRUPT_ADVICE}"
    assert CORRUPT_ADVICE.endswith("delete it and materialize the asset that writes it again (in the Dagster UI, "
                                   "that partition's Materialize)")


def test_a_sound_parquet_file_keeps_its_own_errors(tmp_path):
    path = write_parquet(pa.table({"id": ["a"]}), tmp_path / "t.parquet")
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        read_frame(path, columns=["nope"])
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "missing.parquet")
