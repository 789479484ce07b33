"""Building, measuring, saving and loading the index of one spec.

Reproducibility: the spec's seed is set on every stochastic FAISS component reachable from the
factory's index — the k-means of IVF coarse quantizers (``cp.seed``), of product quantizers
(``pq.cp.seed``) and the level draws of HNSW graphs (``hnsw.rng``); other components (OPQ
rotations, PCA) use FAISS's fixed internal seeds. Multi-threaded HNSW insertion and k-means
reductions depend on thread scheduling, so only a build with ``threads=1`` is guaranteed to
serialize to the same bytes for the same seed.

Memory: an index is built from the document vectors block by block (a stored table is read
``block_rows`` rows at a time, never whole; :mod:`~embedpyramid.serving.vectors`): one pass
decides the preparation (:class:`~embedpyramid.serving.vectors.Preparation`), one gathers the
training sample of a trained index, one adds the blocks (int8 adds a pass for its range). The
build then holds one block, the training sample (at most ``training_rows`` vectors) and the
index. Adding block by block gives the same index, byte for byte, as one ``add`` of the whole
matrix, except for graph indexes: FAISS inserts the points of one HNSW ``add`` level by level,
highest first, so smaller adds build a different graph. A graph index (HNSW, NSG) is therefore
built with one ``add`` of all the prepared vectors — it holds every vector (HNSW,Flat) or code
in its graph anyway, so its build is O(N) in memory by nature, about twice the index for
HNSW,Flat: the prepared vectors, filled block by block, beside FAISS's copy of them in the graph's
storage while ``add`` runs. An index is saved and measured (its serialized size) by streaming it in
chunks (:func:`stream_index`), never as a second copy in memory.

Training sets: a trained index is trained on every vector when there are at most
``training_rows`` (:data:`~embedpyramid.serving.specs.TRAINING_ROWS`) of them — the training
set of earlier versions, so those indexes are unchanged — and otherwise on a uniform sample of
``training_rows`` rows drawn without replacement with the build seed
(``numpy.random.default_rng(seed)``), in table order (:func:`training_rows_for`). The int8 range
(:func:`~embedpyramid.serving.vectors.int8_peak`) is a running maximum over every vector.

FAISS's k-means asks for at least 39 training points per centroid and prints a
warning per k-means run below that (once per PQ sub-quantizer: 32 lines for ``PQ32``). Those
prints are silenced (the threshold only gates the message, the training is the same), and a
spec trained on fewer points becomes one finding in :attr:`BuiltIndex.training_findings`,
e.g. "IVF22,PQ32 trained on 870 vectors; FAISS recommends ≥ 9,984".

Saving: an index and its manifest are written into a temporary folder that is renamed into
place, so a reader sees both or neither; a folder missing either file (an interrupted save of
an older layout, or a file removed by hand) counts as absent and is rebuilt.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import reduce
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from embedpyramid.config.ann import IndexSpec
from embedpyramid.serving.specs import MIN_POINTS_PER_CENTROID, TRAINING_ROWS, resolve_factory
from embedpyramid.serving.vectors import (
    Preparation,
    Vectors,
    binarize,
    gather_rows,
    int8_peak,
    symmetric_int8_index,
    vector_blocks,
    vector_shape,
)
from embedpyramid.store import CorruptFileError, StorePath, is_local, read_json, remove_tree, write_bytes, write_json
from embedpyramid.usage import PeakRss

AnnIndex = faiss.Index | faiss.IndexBinary

INDEX_FILE = "index.faiss"
MANIFEST_FILE = "manifest.json"
_FAISS_LOCATION = re.compile(r"^Error in .*? at \S+:\d+: ", re.DOTALL)
_FAISS_METRICS = {"inner_product": faiss.METRIC_INNER_PRODUCT, "cosine": faiss.METRIC_INNER_PRODUCT,
                  "l2": faiss.METRIC_L2}


@dataclass(frozen=True, eq=False)
class BuiltIndex:
    """An index built for one spec, with what its build cost.

    ``factory`` is the resolved factory string (``{n}`` replaced); ``dimension`` the indexed
    dimension (after a cut); ``index_bytes`` the size of the serialized index, the file
    :func:`save_index` writes (binary rescoring also reads the float vectors, not counted);
    ``peak_rss_bytes`` the largest resident set size of the process during the build;
    ``training_findings`` one line per training set smaller than FAISS recommends;
    ``training_vectors`` how many vectors the training read (0 for an index without training).
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
    training_findings: tuple[str, ...] = ()
    training_vectors: int = 0

    @property
    def bytes_per_vector(self) -> float:
        return self.index_bytes / self.n_vectors

    def manifest(self) -> dict[str, Any]:
        """Everything but the index itself, as plain JSON values."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("spec", "index")}
        record["training_findings"] = list(self.training_findings)
        return {"spec": self.spec.model_dump(mode="json"), **record, "bytes_per_vector": self.bytes_per_vector}


@contextmanager
def faiss_thread_limit(threads: int) -> Iterator[None]:
    """Run FAISS (OpenMP) on ``threads`` threads; restore the previous count after."""
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def _prepare_training(index: faiss.Index, seed: int, found: list[tuple[str, int]]) -> None:
    """Seed every stochastic component, silence FAISS's small-training-set prints (collecting
    each k-means in ``found`` as (what, centroids) instead), and skip polysemous training: that
    centroid permutation serves only Hamming pre-filtering (``polysemous_ht``), which no sweep
    uses, and dominates the build time of IVF-PQ."""
    index = faiss.downcast_index(index)
    if hasattr(index, "do_polysemous_training"):
        index.do_polysemous_training = False
    if hasattr(index, "cp"):
        index.cp.seed = seed
        index.cp.min_points_per_centroid = 1
        if hasattr(index, "nlist"):
            found.append(("IVF coarse quantizer", int(index.nlist)))
    if getattr(index, "pq", None) is not None:
        index.pq.cp.seed = seed
        index.pq.cp.min_points_per_centroid = 1
        found.append(("PQ sub-quantizer", int(index.pq.ksub)))
    if hasattr(index, "hnsw"):
        index.hnsw.rng = faiss.RandomGenerator(seed)
    for child in ("index", "quantizer", "storage"):
        inner = getattr(index, child, None)
        if inner is not None:
            _prepare_training(inner, seed, found)


def training_findings(factory: str, n_vectors: int, kmeans: list[tuple[str, int]]) -> tuple[str, ...]:
    """One finding when some k-means of the index has fewer than 39 training points per
    centroid: the largest requirement, as FAISS would have printed it (once, not per run)."""
    short = [(centroids * MIN_POINTS_PER_CENTROID, what, centroids) for what, centroids in kmeans
             if n_vectors < centroids * MIN_POINTS_PER_CENTROID]
    if not short:
        return ()
    needed, what, centroids = max(short)
    return (f"{factory} trained on {n_vectors:,} vectors; FAISS recommends ≥ {needed:,} "
            f"({centroids} centroids per {what} × {MIN_POINTS_PER_CENTROID})",)


def spec_preparation(spec: IndexSpec, vectors: Vectors) -> Preparation:
    """How a spec prepares the vectors it indexes or searches with (its cut, its metric), decided
    in one pass over ``vectors``."""
    dimension = vector_shape(vectors)[1]
    if spec.dimension is not None and spec.dimension > dimension:
        raise ValueError(f"{spec.describe()} cuts to {spec.dimension} dimensions, but the vectors have {dimension}")
    return Preparation.of(vector_blocks(vectors), spec.metric or "inner_product", spec.dimension)


def indexed_vectors(spec: IndexSpec, vectors: np.ndarray) -> np.ndarray:
    """The vectors a spec indexes or searches with (see :class:`~embedpyramid.serving.vectors.Preparation`)."""
    return spec_preparation(spec, vectors)(vectors)


def training_rows_for(n_vectors: int, seed: int, training_rows: int = TRAINING_ROWS) -> np.ndarray:
    """The rows a trained index is trained on (see the module docstring): all of them up to
    ``training_rows``, else that many drawn with ``seed``, in table order."""
    if n_vectors <= training_rows:
        return np.arange(n_vectors)
    return np.sort(np.random.default_rng(seed).choice(n_vectors, training_rows, replace=False))


def _graph_index(index: faiss.Index) -> bool:
    """Whether the index that stores the vectors is a graph (HNSW, NSG), below any transform."""
    index = faiss.downcast_index(index)
    if hasattr(index, "hnsw") or hasattr(index, "nsg"):
        return True
    inner = getattr(index, "index", None)
    return inner is not None and _graph_index(inner)


@dataclass
class _Timer:
    """Seconds spent in the timed calls (FAISS's training and adding), reading excluded."""

    seconds: float = 0.0

    @contextmanager
    def timed(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start


def _cannot_build(spec: IndexSpec, factory: str, n_vectors: int, dimension: int, error: RuntimeError) -> ValueError:
    return ValueError(f"{spec.describe()}: FAISS cannot build {factory!r} over {n_vectors} vectors of "
                      f"dimension {dimension}: {error}")


def _factory_index(spec: IndexSpec, factory: str, documents: Vectors, preparation: Preparation, dimension: int,
                   seed: int, training_rows: int, timer: _Timer) -> tuple[faiss.Index, tuple[str, ...], int]:
    """The factory's index, seeded and trained on the training sample: (index, findings, training vectors)."""
    n_vectors = vector_shape(documents)[0]
    kmeans: list[tuple[str, int]] = []
    try:
        index = faiss.index_factory(dimension, factory, _FAISS_METRICS[spec.metric or "inner_product"])
        _prepare_training(index, seed, kmeans)
        if index.is_trained:
            return index, (), 0
        sample = preparation(gather_rows(documents, training_rows_for(n_vectors, seed, training_rows)))
        with timer.timed():
            index.train(sample)
    except RuntimeError as error:
        raise _cannot_build(spec, factory, n_vectors, dimension, error) from None
    return index, training_findings(factory, len(sample), kmeans), len(sample)


def _build(spec: IndexSpec, factory: str, documents: Vectors, preparation: Preparation, seed: int,
           training_rows: int, timer: _Timer) -> tuple[AnnIndex, tuple[str, ...], int]:
    """(index, training findings, training vectors); see the module docstring for the passes."""
    n_vectors, stored_dimension = vector_shape(documents)
    dimension = preparation.dimension or stored_dimension

    def blocks() -> Iterator[np.ndarray]:
        return (preparation(block) for block in vector_blocks(documents))

    index: AnnIndex
    findings: tuple[str, ...] = ()
    if spec.kind == "int8":
        peaks = []
        for block in blocks():
            with timer.timed():
                peaks.append(int8_peak(block))
        with timer.timed():
            index = symmetric_int8_index(reduce(np.maximum, peaks), spec.metric or "inner_product")
        training = n_vectors
    elif spec.kind == "binary":
        index, training = faiss.IndexBinaryFlat(dimension), 0
    else:
        index, findings, training = _factory_index(spec, factory, documents, preparation, dimension, seed,
                                                   training_rows, timer)
    try:
        if isinstance(index, faiss.IndexBinary):
            for block in blocks():
                with timer.timed():
                    index.add(binarize(block))
        elif _graph_index(index):
            # Filled block by block: concatenating a list of the blocks would hold them twice.
            vectors, filled = None, 0
            for block in blocks():
                if vectors is None:
                    vectors = np.empty((n_vectors, block.shape[1]), block.dtype)
                vectors[filled : filled + len(block)] = block
                filled += len(block)
            with timer.timed():
                index.add(vectors)
        else:
            for block in blocks():
                with timer.timed():
                    index.add(block)
    except RuntimeError as error:
        raise _cannot_build(spec, factory, n_vectors, dimension, error) from None
    return index, findings, training


def serialize_index(index: AnnIndex) -> bytes:
    if isinstance(index, faiss.IndexBinary):
        return faiss.serialize_index_binary(index).tobytes()
    return faiss.serialize_index(index).tobytes()


def stream_index(index: AnnIndex, write: Callable[[bytes], object]) -> None:
    """Serialize ``index`` (the bytes :func:`serialize_index` returns) in chunks of 1 MiB, each
    given to ``write``: nothing the size of the index is held beside it (``serialize_index``
    holds two copies, a million 256-d vectors' worth 2 GB)."""
    writer = faiss.PyCallbackIOWriter(write)
    try:
        if isinstance(index, faiss.IndexBinary):
            faiss.write_index_binary(index, writer)
        else:
            faiss.write_index(index, writer)
    finally:
        del writer  # flushes the last chunk


def serialized_size(index: AnnIndex) -> int:
    """The length of :func:`serialize_index`'s bytes, counted as they stream (:func:`stream_index`)."""
    chunks: list[int] = []
    stream_index(index, lambda chunk: chunks.append(len(chunk)))
    return sum(chunks)


def _read_index(spec: IndexSpec, path: StorePath) -> AnnIndex:
    """The index in the file ``path``: read by FAISS from a local disk (no copy of its bytes
    beside it), downloaded whole from a remote one."""
    if not is_local(path):
        return _deserialize_index(spec, path.read_bytes())
    return faiss.read_index_binary(str(path)) if spec.kind == "binary" else faiss.read_index(str(path))


def _deserialize_index(spec: IndexSpec, data: bytes) -> AnnIndex:
    buffer = np.frombuffer(data, dtype=np.uint8)
    if spec.kind == "binary":
        return faiss.deserialize_index_binary(buffer)
    return faiss.deserialize_index(buffer)


def build_index(spec: IndexSpec, doc_vectors: Vectors, *, seed: int, threads: int = 1,
                training_rows: int = TRAINING_ROWS) -> BuiltIndex:
    """Build ``spec`` over the document vectors (cut first if the spec has a dimension): a matrix,
    or a stored table read block by block (:class:`~embedpyramid.serving.vectors.TableVectors`)
    — the same index either way; see the module docstring for what the build holds in memory.

    Timed around FAISS's training and adding only (reading and preparing blocks excluded);
    RSS-sampled around the whole build; ``seed`` and ``threads`` are recorded. See the module
    docstring for what makes two builds identical and for the training sample.
    """
    n_vectors, _ = vector_shape(doc_vectors)
    preparation = spec_preparation(spec, doc_vectors)
    if n_vectors == 0:
        raise ValueError(f"{spec.describe()}: cannot build an index over zero vectors")
    factory = resolve_factory(spec, n_vectors)
    timer = _Timer()
    with faiss_thread_limit(threads), PeakRss() as rss:
        index, findings, training = _build(spec, factory, doc_vectors, preparation, seed, training_rows, timer)
    return BuiltIndex(
        spec=spec, index=index, factory=factory, dimension=index.d, n_vectors=n_vectors, seed=seed, threads=threads, build_seconds=timer.seconds, peak_rss_bytes=rss.peak_bytes,
        index_bytes=serialized_size(index), faiss_version=faiss.__version__, training_findings=findings,
        training_vectors=training,
    )


def manifest_path(index_path: StorePath) -> StorePath:
    return index_path / MANIFEST_FILE


def index_complete(path: StorePath) -> bool:
    """Whether a saved index folder holds both its index and its manifest."""
    return (path / INDEX_FILE).is_file() and (path / MANIFEST_FILE).is_file()


def save_index(built: BuiltIndex, path: StorePath) -> StorePath:
    """Write the index and its manifest into the folder ``path``, both or neither.

    On a local disk the pair is written into a temporary folder beside ``path`` and renamed into
    place. On a remote filesystem, which has no folder rename, each file is uploaded atomically and
    the manifest last, so :func:`index_complete` (both present) never sees half an index. An
    incomplete folder at ``path`` is replaced; a complete one (a concurrent run saved the same
    content-addressed index first) is kept.
    """
    if index_complete(path):
        return path
    if not is_local(path):
        remove_tree(path)
        write_bytes(serialize_index(built.index), path / INDEX_FILE)
        write_json(built.manifest(), path / MANIFEST_FILE)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        with (temporary / INDEX_FILE).open("wb") as file:
            stream_index(built.index, file.write)
        write_json(built.manifest(), temporary / MANIFEST_FILE)
        if path.exists() and not index_complete(path):
            remove_tree(path)
        try:
            os.rename(temporary, path)
        except OSError:
            if not index_complete(path):
                raise
    finally:
        remove_tree(temporary)
    return path


def load_index(path: StorePath, spec: IndexSpec) -> BuiltIndex:
    """Read an index written by :func:`save_index`; refuse one built from a different spec, and
    one whose index or manifest is damaged (:class:`~embedpyramid.store.CorruptFileError`, naming
    the file and the folder to delete so that it is rebuilt)."""
    if not index_complete(path):
        raise FileNotFoundError(f"{path}: no complete saved index (index and manifest) here; it is rebuilt when needed")
    rebuild = f"delete the folder {path} and rerun: the index is rebuilt from the cached vectors"
    try:
        manifest = read_json(manifest_path(path))
        stored = IndexSpec.model_validate(manifest.pop("spec"))
        manifest.pop("bytes_per_vector")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        detail = " ".join(str(error).split()) if not isinstance(error, KeyError) else f"no {error} entry"
        raise CorruptFileError(f"{manifest_path(path)}: not a readable index manifest ({detail}); {rebuild}") from None
    if stored.identity() != spec.identity():
        raise ValueError(f"{path} was built from {stored.identity()}, not from {spec.describe()} {spec.identity()}")
    manifest["training_findings"] = tuple(manifest.get("training_findings", ()))
    try:
        index = _read_index(spec, path / INDEX_FILE)
    except RuntimeError as error:  # FAISS: "Error in <function> at <file>.cpp:<line>: <what>"
        detail = " ".join(_FAISS_LOCATION.split(str(error), maxsplit=1)[-1].split())
        raise CorruptFileError(f"{path / INDEX_FILE}: not a readable FAISS index ({detail}); {rebuild}") from None
    return BuiltIndex(spec=spec, index=index, **manifest)
