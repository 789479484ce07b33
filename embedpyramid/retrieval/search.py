"""Exact top-k search in a card's own similarity, over documents held in memory or streamed.

Scores are "larger is better" in every metric:

- ``inner_product``: ``q·d``;
- ``cosine``: ``q·d / (‖q‖‖d‖)`` (a zero vector scores 0 against everything);
- ``l2``: ``−‖q − d‖²``, ranked through the inner product of extended vectors,
  ``[q, 1]·[d, −‖d‖²/2] = q·d − ‖d‖²/2``, which orders like ``−‖q − d‖²`` for a fixed query;
  the returned score is ``2s − ‖q‖²``.

The documents are consumed block by block, each block once, while a running top-k per query
is merged (the products go through the BLAS that is faster on the CPU: :func:`product_blas`): a block's scores are
compared with each query's current k-th score and only the few that beat it are collected and
merged by partition, so the selection costs little beside the product itself (see
:class:`_RunningTopK`). Peak memory is the queries, their top-k, one block of documents and one
``query_block_size × doc_block_size`` block of scores — never the corpus. Ties in score are broken by document position, and the corpus is stored sorted by
doc_id: by default (``ties_at_cut="first"``) ties go to the smaller doc_id — the convention every
metric in this project assumes; ``"last"`` keeps the larger ones, as MTEB's search does (its
heap of ``(score, doc_id)`` pairs pops the smallest pair).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Literal

import numpy as np
import pyarrow as pa

Metric = Literal["inner_product", "cosine", "l2"]
TiesAtCut = Literal["first", "last"]

RUN_SCHEMA = pa.schema([
    ("query_id", pa.string()), ("rank", pa.int32()), ("doc_id", pa.string()), ("score", pa.float32()),
])


def search_metric(similarity: Metric, normalized: bool) -> Metric:
    """The metric a search needs: cosine over vectors that are already unit is the inner product."""
    return "inner_product" if similarity == "cosine" and normalized else similarity


ProductBlas = Literal["mkl", "openblas"]


@cache
def product_blas() -> ProductBlas:
    """The BLAS that computes a search's products on this machine: ``"mkl"`` (torch's, imported
    then) on an Intel CPU, numpy's OpenBLAS on any other.

    MKL chooses its kernels by CPU vendor and runs its best only on Intel's: at the search's
    shape it is the faster of the two on Intel CPUs and the slower on AMD's
    (``benchmarks/bench_search.py`` names the BLAS beside its timings). The choice depends on
    the CPU alone, so one machine always rounds its products alike (two BLAS kernels may differ
    in a score's last bit, and so in which of two near-tied documents ranks first).
    """
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            vendor = next((line for line in cpuinfo if line.startswith("vendor_id")), "")
    except OSError:  # not Linux: no MKL build of torch to prefer
        vendor = ""
    return "mkl" if "GenuineIntel" in vendor else "openblas"


def _product(queries: np.ndarray, block: np.ndarray, out: np.ndarray, blas: ProductBlas) -> np.ndarray:
    """``queries @ block.T`` written into ``out``, through ``blas``."""
    if blas == "openblas":
        return np.matmul(queries, block.T, out=out)
    import torch

    with torch.inference_mode():
        torch.matmul(torch.from_numpy(queries), torch.from_numpy(block).T, out=torch.from_numpy(out))
    return out


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def prepared_queries(queries: np.ndarray, metric: Metric) -> np.ndarray:
    """The query vectors whose inner product with :func:`prepared_block`'s ranks under ``metric``."""
    queries = np.ascontiguousarray(queries, np.float32)
    if metric == "cosine":
        return _unit(queries)
    if metric == "l2":
        return np.hstack([queries, np.ones((len(queries), 1), np.float32)])
    return queries


def prepared_block(block: np.ndarray, metric: Metric) -> np.ndarray:
    """A block of document vectors prepared for ``metric`` (see the module docstring)."""
    block = np.ascontiguousarray(block, np.float32)
    if metric == "cosine":
        return _unit(block)
    if metric == "l2":
        half_norms = 0.5 * np.einsum("nd,nd->n", block, block)
        return np.hstack([block, -half_norms[:, None].astype(np.float32)])
    return block


def order_rows(scores: np.ndarray, indices: np.ndarray, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row by (score descending, index ascending; descending when ``last``); missing
    entries (index -1) last."""
    scores = np.where(indices < 0, -np.inf, scores).astype(np.float32)
    order = np.lexsort((-indices if last else indices, -scores), axis=-1)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(indices, order, axis=1)


# A row with more documents passing its threshold in one chunk than this many times k has its
# best k taken from its kept documents and the whole chunk at once, rather than collected.
_MOST_PASSING = 4
# Every row keeps its first _FIRST_PER_K * k documents whole (at most _FIRST_MOST and the first
# block, at least k) before its first selection: the threshold starts from the k-th of many.
_FIRST_PER_K = 16
_FIRST_MOST = 4096


def _best_k(values: np.ndarray, indices: np.ndarray, k: int, last: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` best columns of each row (``k`` below the width), unordered, and each row's k-th
    score. Best: score descending, then index ascending (descending when ``last``).

    A partition finds them, picking arbitrarily among scores equal to the k-th: a row with more
    than k scores at or above its k-th (a tie at the cut) is ordered in full instead.
    """
    cut = values.shape[1] - k
    best = np.argpartition(values, cut, axis=1)[:, cut:]  # the k-th largest first
    best_values, best_indices = np.take_along_axis(values, best, 1), np.take_along_axis(indices, best, 1)
    kth = best_values[:, 0].copy()  # the rows ordered below overwrite best_values
    tied = np.flatnonzero(np.count_nonzero(values >= kth[:, None], axis=1) > k)
    if tied.size:
        tied_values, tied_indices = values[tied], indices[tied]
        order = np.lexsort((-tied_indices if last else tied_indices, -tied_values), axis=1)[:, :k]
        best_values[tied] = np.take_along_axis(tied_values, order, 1)
        best_indices[tied] = np.take_along_axis(tied_indices, order, 1)
    return best_values, best_indices, kth


class _RunningTopK:
    """The best ``k`` (score, index) pairs of some queries over the documents seen so far (score
    descending, then index ascending; descending when ``last``), in no order until
    :meth:`result` orders them.

    The rows keep their first documents whole (16 k of them, at most 4,096 and the first block,
    at least k) and then their best k, whose k-th score is the row's threshold: a later document
    can enter a row only by beating it (strictly; or equalling it, when ``last``: a later
    document has a larger index), so a block of scores costs one comparison against that
    threshold. The few documents that pass are collected; once some row holds more than k of
    them, every row keeps the best k of its kept and collected documents (a partition, not a
    sort: :func:`_best_k`) and its threshold rises. A stale threshold lets a few more documents
    pass, and the selections become rare. The block is taken in chunks as large as what was
    seen before them (doubling until a chunk is the whole block): a chunk beats the k-th of the
    documents before it about k times per row, whatever the scores.
    """

    def __init__(self, k: int, last: bool) -> None:
        self.k, self.last = k, last
        self._first = k
        # A merge's padding: below every document's score, and after it among equal scores.
        self._pad_index = -1 if last else np.iinfo(np.int64).max
        self.values = np.empty((0, 0), np.float32)
        self.indices = np.empty((0, 0), np.int64)
        self.threshold = np.empty(0, np.float32)  # empty until the first documents are in
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_counts = np.empty(0, np.int64)

    def add(self, scores: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Take the documents ``offset, offset + 1, ...`` (the columns of ``scores``; ``mask`` is
        a flat bool buffer of at least its size), every earlier document already taken."""
        if not self.values.size:
            self._first = max(self.k, min(_FIRST_PER_K * self.k, _FIRST_MOST, scores.shape[1]))
            self.values = np.empty((scores.shape[0], 0), np.float32)
            self.indices = np.empty((scores.shape[0], 0), np.int64)
            self._pending_counts = np.zeros(scores.shape[0], np.int64)
        start, width = 0, scores.shape[1]
        while start < width:
            if not self.threshold.size:
                stop = start + min(self._first - self.values.shape[1], width - start)
                self._keep_all(scores[:, start:stop], offset + start)
            else:
                stop = min(width, start + offset + start)
                self._collect_passing(scores[:, start:stop], offset + start, mask)
            start = stop

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's best k documents (all of them, with fewer), ordered."""
        self._flush()
        if self.values.shape[1] > self.k:  # a corpus smaller than the first documents
            self.values, self.indices, _ = _best_k(self.values, self.indices, self.k, self.last)
        return order_rows(self.values, self.indices, self.last)

    def _keep_all(self, scores: np.ndarray, offset: int) -> None:
        """Keep every column (the rows hold fewer than their first documents, and will not hold
        more); with the first documents in, keep the best k and take the threshold."""
        indices = np.broadcast_to(np.arange(offset, offset + scores.shape[1]), scores.shape)
        if self.values.shape[1]:
            scores = np.concatenate([self.values, scores], axis=1)
            indices = np.concatenate([self.indices, indices], axis=1)
        if scores.shape[1] == self._first > self.k:
            self.values, self.indices, self.threshold = _best_k(scores, indices, self.k, self.last)
            return
        self.values, self.indices = scores.copy(), indices.copy()  # not views of the block's buffer
        if scores.shape[1] == self._first:
            self.threshold = self.values.min(axis=1)

    def _collect_passing(self, scores: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Collect the columns that beat their row's k-th score (every row is full)."""
        compare = np.greater_equal if self.last else np.greater
        passed = mask[: scores.size]
        compare(scores, self.threshold[:, None], out=passed.reshape(scores.shape))
        passing = np.flatnonzero(passed)
        rows, columns = np.divmod(passing, scores.shape[1])
        # A whole block is contiguous: its values are read at the flat positions.
        values = scores.reshape(-1)[passing] if scores.flags.c_contiguous else scores[rows, columns]
        counts = np.bincount(rows, minlength=scores.shape[0])
        heavy = counts > _MOST_PASSING * self.k
        if heavy.any():
            self._flush()
            self._keep_best_of_chunk(scores, offset, np.flatnonzero(heavy))
            light = ~heavy[rows]
            rows, columns, values, counts = rows[light], columns[light], values[light], np.where(heavy, 0, counts)
        if not rows.size:
            return
        # The passing documents come row by row: a document's slot in its row's collection is
        # the row's earlier count plus its place among the row's new ones.
        slots = self._pending_counts[rows] + np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]
        self._pending.append((rows, slots, columns + offset, values))
        self._pending_counts += counts
        if self._pending_counts.max() > self.k:
            self._flush()

    def _flush(self) -> None:
        """Keep each row's best k of its kept and collected documents."""
        if not self._pending:
            return
        rows, slots, indices, values = (np.concatenate(parts) for parts in zip(*self._pending, strict=True))
        n_rows, width = self.values.shape[0], self.k + int(self._pending_counts.max())
        merged_values = np.empty((n_rows, width), np.float32)
        merged_indices = np.empty((n_rows, width), np.int64)
        merged_values[:, : self.k], merged_indices[:, : self.k] = self.values, self.indices
        merged_values[:, self.k :], merged_indices[:, self.k :] = -np.inf, self._pad_index
        at = rows * width + self.k + slots
        merged_values.reshape(-1)[at], merged_indices.reshape(-1)[at] = values, indices
        self.values, self.indices, self.threshold = _best_k(merged_values, merged_indices, self.k, self.last)
        self._pending, self._pending_counts = [], np.zeros(n_rows, np.int64)

    def _keep_best_of_chunk(self, scores: np.ndarray, offset: int, rows: np.ndarray) -> None:
        """Keep, in ``rows``, the best k of the kept documents and the whole chunk."""
        columns = np.broadcast_to(np.arange(offset, offset + scores.shape[1]), (rows.size, scores.shape[1]))
        merged_values = np.concatenate([self.values[rows], scores[rows]], axis=1)
        merged_indices = np.concatenate([self.indices[rows], columns], axis=1)
        self.values[rows], self.indices[rows], self.threshold[rows] = _best_k(merged_values, merged_indices, self.k, self.last)


def exact_topk(
    queries: np.ndarray,
    documents: np.ndarray | Iterable[np.ndarray],
    k: int,
    *,
    metric: Metric = "inner_product",
    doc_block_size: int = 16384,
    query_block_size: int = 1024,
    n_documents: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    ties_at_cut: TiesAtCut = "first",
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of every query over all documents under ``metric`` (see the module docstring).

    ``documents`` is a matrix (cut into blocks of ``doc_block_size``) or an iterable of blocks
    in corpus order, e.g. :func:`embedpyramid.encode.iter_embedding_blocks` over a stored table;
    each block is read once. Returns ``(scores, indices)`` of shape (n_queries, min(k,
    n_documents)), each row ordered by score descending then document index ascending
    (``ties_at_cut="first"``), or descending (``"last"``): documents tied at the k-th score are
    kept by the smallest, or the largest, index. ``"last"`` over a corpus in doc_id order keeps
    the top-k set of MTEB's search (``chunked_full_corpus_search``, mteb 2.26), ordered as
    pytrec_eval ranks it, wherever MTEB's per-chunk ``torch.topk(k + 1)`` returns every
    document of the tie group at its cut (which of more tied documents torch returns is not
    specified). ``progress(done, total)`` counts documents (``total`` is ``n_documents`` or 0
    if unknown). Raises ``ValueError`` for NaN or inf in a query vector and for a document
    that scores NaN against the first query of a query block (a NaN component). A document with
    an inf component is not refused here: it scores ±inf, or NaN against a query that is 0 in
    that dimension, and such a NaN takes a place in that query's row. The pipeline never
    searches such vectors: the blocking ``vectors_valid`` check of the embeddings refuses any
    NaN or inf (:func:`embedpyramid.encode.tables.stats_problems`).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    last = ties_at_cut == "last"

    if isinstance(documents, np.ndarray):
        if documents.ndim != 2:
            raise ValueError(f"document vectors must be a matrix, got shape {documents.shape}")
        n_documents = len(documents)
        blocks: Iterable[np.ndarray] = (documents[s : s + doc_block_size] for s in range(0, len(documents), doc_block_size))
    else:
        blocks = documents
    if queries.ndim != 2:
        raise ValueError(f"query vectors must be a matrix, got shape {queries.shape}")
    blas = product_blas()

    prepared = prepared_queries(queries, metric)
    if not np.isfinite(prepared).all():
        bad = np.flatnonzero(~np.isfinite(prepared).all(axis=1))
        raise ValueError(f"{bad.size} query vectors hold NaN or inf (first at row {bad[0]}); fix or drop them before searching")
    query_starts = range(0, len(prepared), query_block_size)
    running = [_RunningTopK(k, last) for _ in query_starts]
    # One score buffer and one mask buffer serve every block: a fresh 64 MiB product per block
    # would pay its page faults again. numpy allocates them, since it asks the kernel for huge
    # pages for large arrays (torch's allocator does not).
    score_buffer, mask_buffer = np.empty(0, np.float32), np.empty(0, bool)
    seen = 0
    for raw_block in blocks:
        if raw_block.ndim != 2 or raw_block.shape[1] != queries.shape[1]:
            raise ValueError(f"query vectors {queries.shape} and document vectors {raw_block.shape} must share a dimension")
        block = prepared_block(raw_block, metric)
        for q_start, top in zip(query_starts, running, strict=True) if len(block) else ():
            query_block = prepared[q_start : q_start + query_block_size]
            shape, size = (len(query_block), len(block)), len(query_block) * len(block)
            if score_buffer.size < size:
                score_buffer, mask_buffer = np.empty(size, np.float32), np.empty(size, bool)
            scores = _product(query_block, block, score_buffer[:size].reshape(shape), blas)
            if q_start == 0 and np.isnan(scores[0]).any():  # a NaN document scores NaN against every query
                bad = np.flatnonzero(np.isnan(scores[0]))
                raise ValueError(f"{bad.size} document vectors in rows {seen}..{seen + len(block) - 1} score NaN, "
                                 f"a NaN or inf component (first at row {seen + bad[0]}); fix or drop them before searching")
            top.add(scores, seen, mask_buffer)
        seen += len(block)
        if progress is not None:
            progress(seen, n_documents or 0)
    depth = min(k, seen)
    all_scores = np.empty((len(prepared), depth), np.float32)
    all_indices = np.empty((len(prepared), depth), np.int64)
    for q_start, top in zip(query_starts, running, strict=True) if depth else ():
        all_scores[q_start : q_start + query_block_size], all_indices[q_start : q_start + query_block_size] = top.result()
    if metric == "l2":
        query_norms = np.einsum("nd,nd->n", queries, queries, dtype=np.float32)[:, None]
        return order_rows(2 * all_scores - query_norms, all_indices, last)
    return all_scores, all_indices


def run_table(query_ids: Sequence[str], doc_ids: Sequence[str], scores: np.ndarray, indices: np.ndarray) -> pa.Table:
    """The long-format run: ``query_id, rank, doc_id, score`` (rank starts at 1)."""
    n_queries, depth = scores.shape
    doc_array = pa.array(doc_ids, pa.string())
    return pa.table(
        {
            "query_id": pa.array(query_ids, pa.string()).take(pa.array(np.repeat(np.arange(n_queries), depth))),
            "rank": pa.array(np.tile(np.arange(1, depth + 1, dtype=np.int32), n_queries)),
            "doc_id": doc_array.take(pa.array(indices.reshape(-1))),
            "score": pa.array(scores.reshape(-1), pa.float32()),
        },
        schema=RUN_SCHEMA,
    )
