"""The artefact store on a non-local filesystem: the whole graph over fsspec's memory://, which
stands for object storage (s3://, gs://): the same code, only the data folder is a URL."""

import dagster as dg
import duckdb
import polars as pl
import pytest
from graph_helpers import quick_protocol, small_ann, toy
from upath import UPath

from embedpyramid.store import local_file, read_frame
from embedpyramid.summary.results import read_leaderboard
from pipelines.runner import run_pipeline


@pytest.fixture
def memory_data():
    root = UPath("memory://embedpyramid-graph-test/data")
    yield root
    if root.exists():
        root.fs.rm(root.path, recursive=True)


def test_the_whole_graph_runs_on_an_fsspec_store_and_matches_a_local_run(
        write_configs, small_chatterbot, tmp_path, memory_data, monkeypatch):
    ann = small_ann(flat={"factory": "Flat"}, hnsw={"factory": "HNSW32", "sweep": {"efSearch": [16, 64]}},
                    cut={"factory": "Flat", "dimension": 16})
    folder = write_configs(models={"ngrams-48": toy(48), "ngrams-32": toy(32)}, datasets=small_chatterbot,
                           protocol=quick_protocol(baseline="ngrams-48"), ann=ann)
    monkeypatch.chdir(tmp_path)
    remote = run_pipeline(folder, str(memory_data), instance=dg.DagsterInstance.ephemeral())
    assert remote.failures == [] and remote.summary_built and len(remote.materialized) == 2
    # Nothing of the store landed on the local disk (the folder only holds the config).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]

    local = run_pipeline(folder, tmp_path / "local", instance=dg.DagsterInstance.ephemeral())
    assert local.failures == []
    for relative in ("metrics/chatterbot-small/{}/exact.parquet", "serving/chatterbot-small/{}/cut/summary.parquet",
                     "geometry/chatterbot-small/{}/price.parquet"):
        for key in {key for key, _ in remote.materialized}:
            remote_frame = read_frame(memory_data / relative.format(key))
            local_frame = read_frame(tmp_path / "local" / relative.format(key))
            timing = [c for c in remote_frame.columns if c in ("qps", "p50_ms", "p95_ms", "build_seconds", "peak_rss_bytes")]
            assert remote_frame.drop(timing).equals(local_frame.drop(timing)), relative
    assert read_leaderboard(memory_data / "results.duckdb").equals(read_leaderboard(tmp_path / "local" / "results.duckdb"))
    with local_file(memory_data / "results.duckdb") as db, duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM comparisons").fetchall()[0][0] > 0
    html = (memory_data / "report" / "report.html").read_text()
    assert "L4 serving approximation" in html and "<svg" in html
    assert sorted(p.name for p in (memory_data / "indexes").iterdir()) == sorted(
        p.name for p in (tmp_path / "local" / "indexes").iterdir())
    assert pl.read_parquet(tmp_path / "local" / "comparisons" / "datasets" / "chatterbot-small" / "comparisons.parquet").height > 0
