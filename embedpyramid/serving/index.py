"""Building, measuring, saving and loading the index of one spec.

Reproducibility: the spec's seed is set on every stochastic FAISS component reachable from the
factory's index — the k-means of IVF coarse quantizers (``cp.seed``), of product quantizers
(``pq.cp.seed``) and the level draws of HNSW graphs (``hnsw.rng``); other components (OPQ
rotations, PCA) use FAISS's fixed internal seeds. Multi-threaded HNSW insertion and k-means
reductions depend on thread scheduling, so only a build with ``threads=1`` is guaranteed to
serialize to the same bytes for the same seed.
"""

from __future__ import annotations

import io
import resource
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import psutil
import torch

from embedpyramid.serving.specs import IndexSpec, resolve_factory
from embedpyramid.serving.vectors import Int8Vectors, binarize, truncate_and_normalize
from embedpyramid.store import atomic_path, read_json, write_json

AnnIndex = faiss.Index | faiss.IndexBinary | Int8Vectors

_FAISS_METRICS = {"inner_product": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}
_RSS_POLL_SECONDS = 0.005
# ru_maxrss is in KiB on Linux and in bytes on macOS.
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


@dataclass(frozen=True, eq=False)
class BuiltIndex:
    """An index built for one spec, with what its build cost.

    ``factory`` is the resolved factory string (``{n}`` replaced); ``dimension`` the indexed
    dimension (after a cut); ``index_bytes`` the size of the serialized index, the file
    :func:`save_index` writes (binary rescoring also reads the float vectors, not counted);
    ``peak_rss_bytes`` the largest resident set size of the process during the build.
    """

    spec: IndexSpec
    index: AnnIndex = field(repr=False)
    factory: str
    dimension: int
    n_vectors: int
    seed: int
    threads: int
    build_seconds: float
    peak_rss_bytes: int
    index_bytes: int
    faiss_version: str

    @property
    def bytes_per_vector(self) -> float:
        return self.index_bytes / self.n_vectors

    def manifest(self) -> dict[str, Any]:
        """Everything but the index itself, as plain JSON values."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("spec", "index")}
        return {"spec": self.spec.model_dump(mode="json"), **record, "bytes_per_vector": self.bytes_per_vector}


@contextmanager
def thread_limit(threads: int, *, torch_threads: bool = False) -> Iterator[None]:
    """Run FAISS (OpenMP) on ``threads`` threads, and torch too when ``torch_threads``; restore
    the previous counts after.

    torch is left alone unless asked: setting its thread count starts torch's own OpenMP
    runtime, whose idle threads then compete with FAISS's for the cores (on 2 cores, a
    2-thread FAISS search becomes several times slower and its timings quantized).
    """
    previous_faiss = faiss.omp_get_max_threads()
    previous_torch = torch.get_num_threads() if torch_threads else None
    faiss.omp_set_num_threads(threads)
    if previous_torch is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous_faiss)
        if previous_torch is not None:
            torch.set_num_threads(previous_torch)


class _PeakRss:
    """Peak resident set size over a block: sampled by a thread (FAISS releases the GIL), and
    exact when the block raises the process's lifetime peak (``ru_maxrss``)."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._process = psutil.Process()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._lifetime_before = 0

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)
            self._stop.wait(_RSS_POLL_SECONDS)

    def __enter__(self) -> _PeakRss:
        self._lifetime_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        lifetime_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)
        if lifetime_after > self._lifetime_before:
            self.peak_bytes = max(self.peak_bytes, lifetime_after * _MAXRSS_UNIT)


def _prepare_training(index: faiss.Index, seed: int) -> None:
    """Seed every stochastic component, and skip polysemous training: that centroid permutation
    serves only Hamming pre-filtering (``polysemous_ht``), which no sweep uses, and dominates
    the build time of IVF-PQ."""
    index = faiss.downcast_index(index)
    if hasattr(index, "do_polysemous_training"):
        index.do_polysemous_training = False
    if hasattr(index, "cp"):
        index.cp.seed = seed
    if getattr(index, "pq", None) is not None:
        index.pq.cp.seed = seed
    if hasattr(index, "hnsw"):
        index.hnsw.rng = faiss.RandomGenerator(seed)
    for child in ("index", "quantizer", "storage"):
        inner = getattr(index, child, None)
        if inner is not None:
            _prepare_training(inner, seed)


def indexed_vectors(spec: IndexSpec, vectors: np.ndarray) -> np.ndarray:
    """The vectors a spec indexes or searches with: float32, cut to ``spec.dimension`` if set."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if spec.dimension is None:
        return vectors
    if spec.dimension > vectors.shape[1]:
        raise ValueError(f"{spec.describe()} cuts to {spec.dimension} dimensions, but the vectors have {vectors.shape[1]}")
    return truncate_and_normalize(vectors, spec.dimension)


def _build(spec: IndexSpec, factory: str, vectors: np.ndarray, seed: int) -> AnnIndex:
    if spec.kind == "int8":
        return Int8Vectors.quantize(vectors)
    if spec.kind == "binary":
        binary = faiss.IndexBinaryFlat(vectors.shape[1])
        binary.add(binarize(vectors))
        return binary
    try:
        index = faiss.index_factory(vectors.shape[1], factory, _FAISS_METRICS[spec.metric])
        _prepare_training(index, seed)
        if not index.is_trained:
            index.train(vectors)
        index.add(vectors)
    except RuntimeError as error:
        raise ValueError(
            f"{spec.describe()}: FAISS cannot build {factory!r} over {len(vectors)} vectors of "
            f"dimension {vectors.shape[1]}: {error}"
        ) from None
    return index


def serialize_index(index: AnnIndex) -> bytes:
    if isinstance(index, Int8Vectors):
        buffer = io.BytesIO()
        np.savez(buffer, codes=index.codes, scales=index.scales)
        return buffer.getvalue()
    if isinstance(index, faiss.IndexBinary):
        return faiss.serialize_index_binary(index).tobytes()
    return faiss.serialize_index(index).tobytes()


def _deserialize_index(spec: IndexSpec, data: bytes) -> AnnIndex:
    if spec.kind == "int8":
        with np.load(io.BytesIO(data)) as arrays:
            return Int8Vectors(arrays["codes"], arrays["scales"])
    buffer = np.frombuffer(data, dtype=np.uint8)
    if spec.kind == "binary":
        return faiss.deserialize_index_binary(buffer)
    return faiss.deserialize_index(buffer)


def build_index(spec: IndexSpec, doc_vectors: np.ndarray, *, seed: int, threads: int = 1) -> BuiltIndex:
    """Build ``spec`` over the document vectors (cut first if the spec has a dimension).

    Timed and RSS-sampled around training and adding only; ``seed`` and ``threads`` are
    recorded. See the module docstring for what makes two builds identical.
    """
    vectors = indexed_vectors(spec, doc_vectors)
    if len(vectors) == 0:
        raise ValueError(f"{spec.describe()}: cannot build an index over zero vectors")
    factory = resolve_factory(spec, len(vectors))
    with thread_limit(threads), _PeakRss() as rss:
        start = time.perf_counter()
        index = _build(spec, factory, vectors, seed)
        seconds = time.perf_counter() - start
    return BuiltIndex(
        spec=spec, index=index, factory=factory, dimension=vectors.shape[1], n_vectors=len(vectors),
        seed=seed, threads=threads, build_seconds=seconds, peak_rss_bytes=rss.peak_bytes,
        index_bytes=len(serialize_index(index)), faiss_version=faiss.__version__,
    )


def manifest_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".json")


def save_index(built: BuiltIndex, path: Path) -> Path:
    """Write the index, then its manifest beside it (``<name>.json``), each atomically.

    The manifest is written last: its presence means the index file is complete.
    """
    with atomic_path(path) as temporary:
        temporary.write_bytes(serialize_index(built.index))
    write_json(built.manifest(), manifest_path(path))
    return path


def load_index(path: Path, spec: IndexSpec) -> BuiltIndex:
    """Read an index written by :func:`save_index`; refuse one built from a different spec."""
    manifest_file = manifest_path(path)
    if not manifest_file.is_file():
        raise FileNotFoundError(f"{path}: no manifest {manifest_file.name}; the index was not saved completely")
    manifest = read_json(manifest_file)
    stored = IndexSpec.model_validate(manifest.pop("spec"))
    if stored.identity() != spec.identity():
        raise ValueError(f"{path} was built from {stored.identity()}, not from {spec.describe()} {spec.identity()}")
    manifest.pop("bytes_per_vector")
    return BuiltIndex(spec=spec, index=_deserialize_index(spec, path.read_bytes()), **manifest)
