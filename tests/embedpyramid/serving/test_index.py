import faiss
import numpy as np
import pytest

from embedpyramid.serving import build_index, index_file_name, load_index, save_index
from embedpyramid.serving.index import manifest_path, serialize_index, thread_limit


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
    assert int8.factory == "Int8Flat" and 32 <= int8.bytes_per_vector < 34
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
    with thread_limit(1):
        assert faiss.omp_get_max_threads() == 1
    assert faiss.omp_get_max_threads() == before


@pytest.mark.parametrize("fields", [{"factory": "HNSW16"}, {"kind": "int8"}, {"kind": "binary", "sweep": {"rescore": [10]}}])
def test_save_and_load_round_trip_under_a_content_addressed_name(tmp_path, clustered, make_spec, fields):
    documents, _ = clustered(n_docs=500, dim=16)
    spec = make_spec("idx", **fields)
    built = build_index(spec, documents, seed=3)
    path = save_index(built, tmp_path / index_file_name(spec, "embeddings-sha", 3))
    assert manifest_path(path).is_file() and not list(tmp_path.glob(".*.tmp"))
    loaded = load_index(path, spec)
    assert serialize_index(loaded.index) == serialize_index(built.index)
    assert loaded.manifest() == built.manifest()
    with pytest.raises(ValueError, match="was built from"):
        load_index(path, make_spec("idx", factory="Flat"))
    manifest_path(path).unlink()
    with pytest.raises(FileNotFoundError, match="not saved completely"):
        load_index(path, spec)
