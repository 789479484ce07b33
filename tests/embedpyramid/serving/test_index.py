import os
import re
import subprocess
import sys
import threading

import faiss
import numpy as np
import pytest

from embedpyramid.serving import build_index, index_complete, index_file_name, load_index, save_index
from embedpyramid.serving.index import INDEX_FILE, faiss_thread_limit, manifest_path, serialize_index
from embedpyramid.store import CorruptFileError


def ivf_centroids(built) -> np.ndarray:
    quantizer = faiss.extract_index_ivf(built.index).quantizer
    return quantizer.reconstruct_n(0, quantizer.ntotal)


@pytest.mark.parametrize("factory", ["IVF{n},PQ4x4", "HNSW16"])
def test_same_seed_one_thread_serializes_to_identical_bytes(clustered, make_spec, factory):
    documents, _ = clustered(n_docs=2000, dim=16)
    spec = make_spec(factory=factory)
    first, second = (build_index(spec, documents, seed=7, threads=1) for _ in range(2))
    assert serialize_index(first.index) == serialize_index(second.index)
    assert first.seed == 7 and first.threads == 1
    other = build_index(spec, documents, seed=8, threads=1)
    assert serialize_index(other.index) != serialize_index(first.index)


def test_a_different_seed_gives_different_ivf_centroids(clustered, make_spec):
    documents, _ = clustered(n_docs=2000, dim=16)
    spec = make_spec(factory="IVF{n},Flat")
    built = build_index(spec, documents, seed=1)
    assert built.factory == "IVF51,Flat"
    np.testing.assert_array_equal(ivf_centroids(built), ivf_centroids(build_index(spec, documents, seed=1)))
    assert not np.array_equal(ivf_centroids(built), ivf_centroids(build_index(spec, documents, seed=2)))


def test_build_records_its_cost(clustered, make_spec):
    documents, _ = clustered(n_docs=1000, dim=32)
    built = build_index(make_spec(factory="SQ8"), documents, seed=0)
    assert built.n_vectors == 1000 and built.dimension == 32 and built.build_seconds > 0
    assert built.index_bytes == len(serialize_index(built.index)) and 32 <= built.bytes_per_vector < 33
    assert built.peak_rss_bytes > documents.nbytes
    cut = build_index(make_spec(factory="Flat", dimension=8), documents, seed=0)
    assert cut.dimension == 8 and cut.index.d == 8
    int8 = build_index(make_spec(kind="int8"), documents, seed=0)
    assert int8.factory == "Int8Flat" and 32 <= int8.bytes_per_vector < 33
    binary = build_index(make_spec(kind="binary", sweep={"rescore": [10]}), documents, seed=0)
    assert binary.factory == "BFlat" and binary.index.code_size == 4


def test_build_errors_name_the_spec(clustered, make_spec):
    documents, _ = clustered(n_docs=500, dim=16)
    with pytest.raises(ValueError, match=r"spec 'bad-pq' \(faiss PQ5\): FAISS cannot build 'PQ5' over 500 vectors of dimension 16"):
        build_index(make_spec("bad-pq", factory="PQ5"), documents, seed=0)
    with pytest.raises(ValueError, match=r"spec 'cut' .* cuts to 64 dimensions, but the vectors have 16"):
        build_index(make_spec("cut", factory="Flat", dimension=64), documents, seed=0)


def test_thread_limit_restores_the_previous_counts():
    before = faiss.omp_get_max_threads()
    with faiss_thread_limit(1):
        assert faiss.omp_get_max_threads() == 1
    assert faiss.omp_get_max_threads() == before


@pytest.mark.parametrize("fields", [{"factory": "HNSW16"}, {"kind": "int8"}, {"kind": "binary", "sweep": {"rescore": [10]}}])
def test_save_and_load_round_trip_under_a_content_addressed_name(tmp_path, clustered, make_spec, fields):
    documents, _ = clustered(n_docs=500, dim=16)
    spec = make_spec("idx", metric="inner_product", **fields)
    built = build_index(spec, documents, seed=3)
    path = save_index(built, tmp_path / index_file_name(spec, "embeddings-sha", 3))
    assert index_complete(path) and manifest_path(path).is_file() and os.listdir(tmp_path) == [path.name]
    loaded = load_index(path, spec)
    assert serialize_index(loaded.index) == serialize_index(built.index)
    assert loaded.manifest() == built.manifest()
    with pytest.raises(ValueError, match="was built from"):
        load_index(path, make_spec("idx", factory="Flat", metric="inner_product"))


def test_an_index_without_its_manifest_counts_as_absent_and_is_replaced(tmp_path, clustered, make_spec):
    """The state a run killed between the index and its manifest used to leave behind."""
    documents, _ = clustered(n_docs=500, dim=16)
    spec = make_spec("idx", factory="Flat", metric="inner_product")
    path = tmp_path / index_file_name(spec, "sha", 0)
    path.mkdir()
    (path / INDEX_FILE).write_bytes(b"half an index")
    assert not index_complete(path)
    with pytest.raises(FileNotFoundError, match="no complete saved index"):
        load_index(path, spec)
    built = build_index(spec, documents, seed=0)
    save_index(built, path)
    assert serialize_index(load_index(path, spec).index) == serialize_index(built.index)


@pytest.mark.parametrize(("damage", "detail"), [
    # Cut in half inside the 200 x 16 float32 vectors: 12,800 bytes were due (FAISS reads the file
    # itself, and names it).
    (lambda data: data[: len(data) // 2], r"Error: 'ret == \(size\)' failed: read error in [^:]*: \d+ != 12800 \(Success\)"),
    (lambda data: b"xxxxyyyyzzzz", re.escape('Index type 0x78787878 ("xxxx") not recognized')),
])
def test_a_damaged_saved_index_is_refused_naming_the_file_and_the_folder_to_delete(tmp_path, clustered, make_spec,
                                                                                   damage, detail):
    documents, _ = clustered(n_docs=200, dim=16)
    spec = make_spec("idx", factory="Flat", metric="inner_product")
    path = save_index(build_index(spec, documents, seed=0), tmp_path / index_file_name(spec, "sha", 0))
    (path / INDEX_FILE).write_bytes(damage((path / INDEX_FILE).read_bytes()))
    with pytest.raises(CorruptFileError) as refused:
        load_index(path, spec)
    assert re.fullmatch(re.escape(f"{path / INDEX_FILE}: not a readable FAISS index (") + detail + re.escape(
        f"); delete the folder {path} and rerun: the index is rebuilt from the cached vectors"), str(refused.value))
    # A damaged manifest is refused the same way.
    save_index(build_index(spec, documents, seed=0), tmp_path / "again")
    manifest_path(tmp_path / "again").write_text('{"spec": ')
    with pytest.raises(CorruptFileError, match=r"again/manifest\.json: not a readable index manifest \(Expecting "
                                               r"value: line 1 column 10 \(char 9\)\); delete the folder .*again"):
        load_index(tmp_path / "again", spec)


def test_two_runs_saving_the_same_index_both_succeed(tmp_path, clustered, make_spec):
    documents, _ = clustered(n_docs=500, dim=16)
    spec = make_spec("idx", factory="HNSW16", metric="inner_product")
    path = tmp_path / index_file_name(spec, "sha", 0)
    builds = [build_index(spec, documents, seed=0) for _ in range(4)]
    barrier, errors = threading.Barrier(len(builds)), []

    def save(built):
        barrier.wait()
        try:
            save_index(built, path)
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=save, args=(built,)) for built in builds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and index_complete(path) and os.listdir(tmp_path) == [path.name]
    assert serialize_index(load_index(path, spec).index) == serialize_index(builds[0].index)


def test_a_small_training_set_is_one_finding_not_faiss_prints():
    """FAISS prints one warning per PQ sub-quantizer (32 for PQ32); the build says it once."""
    script = (
        "import numpy as np\n"
        "from embedpyramid.config import IndexSpec\n"
        "from embedpyramid.serving import build_index\n"
        "vectors = np.random.default_rng(0).standard_normal((870, 64)).astype(np.float32)\n"
        "spec = IndexSpec(name='ivf-pq', factory='IVF{n},PQ32', metric='inner_product', seed=1)\n"
        "print(build_index(spec, vectors, seed=1).training_findings)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=os.getcwd())
    assert "WARNING" not in result.stderr and "clustering" not in result.stderr
    assert result.stdout.strip() == ("('IVF22,PQ32 trained on 870 vectors; FAISS recommends ≥ 9,984 "
                                     "(256 centroids per PQ sub-quantizer × 39)',)")


@pytest.mark.parametrize(("fields", "training_vectors"), [
    ({"factory": "Flat"}, 0), ({"factory": "IVF{n},PQ4x4"}, 2000), ({"factory": "SQ8"}, 2000),
    ({"factory": "OPQ4,IVF16,PQ4"}, 2000), ({"factory": "HNSW16"}, 0),
    ({"factory": "Flat", "dimension": 8, "metric": "cosine"}, 0), ({"kind": "int8"}, 2000),
    ({"kind": "binary", "sweep": {"rescore": [10]}}, 0),
])
def test_a_table_read_in_blocks_builds_the_index_of_the_whole_matrix(clustered, make_spec, stored, fields,
                                                                     training_vectors):
    """Seven blocks of 300 rows (the last shorter) from row groups of 128: the same bytes as one add."""
    documents, _ = clustered(n_docs=2000, dim=16)
    spec = make_spec(**{"metric": "inner_product", **fields})
    whole = build_index(spec, documents, seed=5)
    blocks = build_index(spec, stored(documents, block_rows=300, row_group_rows=128), seed=5)
    assert serialize_index(blocks.index) == serialize_index(whole.index)
    assert blocks.manifest() | {"build_seconds": 0, "peak_rss_bytes": 0} == whole.manifest() | {
        "build_seconds": 0, "peak_rss_bytes": 0}
    assert blocks.training_vectors == training_vectors


def test_a_table_over_the_training_cap_trains_on_a_seeded_sample_in_table_order(clustered, make_spec, stored):
    documents, _ = clustered(n_docs=2000, dim=16)
    spec = make_spec(factory="IVF16,Flat", metric="inner_product")
    built = build_index(spec, stored(documents, block_rows=300), seed=7, training_rows=500)
    sample = np.sort(np.random.default_rng(7).choice(2000, 500, replace=False))
    reference = faiss.index_factory(16, "IVF16,Flat", faiss.METRIC_INNER_PRODUCT)
    reference.cp.seed = 7
    reference.train(documents[sample])
    reference.add(documents)
    assert serialize_index(built.index) == serialize_index(reference)
    assert serialize_index(build_index(spec, documents, seed=7, training_rows=500).index) == serialize_index(reference)
    assert built.training_vectors == 500 and built.training_findings == (
        "IVF16,Flat trained on 500 vectors; FAISS recommends ≥ 624 (16 centroids per IVF coarse quantizer × 39)",)
    assert build_index(spec, documents, seed=7, training_rows=2000).training_vectors == 2000


@pytest.mark.parametrize("fields", [{"factory": "Flat"}, {"factory": "HNSW8"}, {"kind": "binary", "sweep": {"rescore": [10]}}], ids=str)
def test_an_index_is_measured_and_saved_as_a_stream_of_serialize_index_bytes(tmp_path, clustered, make_spec, fields):
    """The size and the file come from FAISS's writer in chunks: the bytes serialize_index gives."""
    documents, _ = clustered(n_docs=3000, dim=16)
    spec = make_spec("idx", metric="inner_product", **fields)
    built = build_index(spec, documents, seed=0)
    data = serialize_index(built.index)
    assert built.index_bytes == len(data)
    path = save_index(built, tmp_path / index_file_name(spec, "sha", 0))
    assert (path / INDEX_FILE).read_bytes() == data
    assert serialize_index(load_index(path, spec).index) == data
