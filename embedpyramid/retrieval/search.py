"""Exact top-k search in a card's own similarity, over documents held in memory or streamed.

Scores are "larger is better" in every metric:

- ``inner_product``: ``q·d``;
- ``cosine``: ``q·d / (‖q‖‖d‖)`` (a zero vector scores 0 against everything);
- ``l2``: ``−‖q − d‖²``, ranked through the inner product of extended vectors,
  ``[q, 1]·[d, −‖d‖²/2] = q·d − ‖d‖²/2``, which orders like ``−‖q − d‖²`` for a fixed query;
  the returned score is ``2s − ‖q‖²``.

The documents are consumed block by block, each block once, while a running top-k per query
is merged (torch, imported when a search runs, computes the products): a block's scores are
compared with each query's current k-th score and only the few that beat it are merged, so the
selection costs little beside the product itself (see :class:`_RunningTopK`). Peak memory is the queries, their top-k, one
block of documents and one ``query_block_size × doc_block_size`` block of scores — never the
corpus. Ties in score are broken by document position, and the corpus is stored sorted by
doc_id: by default (``ties_at_cut="first"``) ties go to the smaller doc_id — the convention every
metric in this project assumes; ``"last"`` keeps the larger ones, as MTEB's search does (its
heap of ``(score, doc_id)`` pairs pops the smallest pair).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import torch

Metric = Literal["inner_product", "cosine", "l2"]
TiesAtCut = Literal["first", "last"]

RUN_SCHEMA = pa.schema([
    ("query_id", pa.string()), ("rank", pa.int32()), ("doc_id", pa.string()), ("score", pa.float32()),
])


def search_metric(similarity: Metric, normalized: bool) -> Metric:
    """The metric a search needs: cosine over vectors that are already unit is the inner product."""
    return "inner_product" if similarity == "cosine" and normalized else similarity


def _order_by_score_then_index(values: torch.Tensor, indices: torch.Tensor,
                               last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by (score descending, index ascending; descending when ``last``)."""
    import torch

    by_index = torch.argsort(indices, dim=1, descending=last)
    values, indices = values.gather(1, by_index), indices.gather(1, by_index)
    by_score = torch.sort(values, dim=1, descending=True, stable=True).indices
    return values.gather(1, by_score), indices.gather(1, by_score)


def _block_topk(scores: torch.Tensor, k: int, last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row with ties at the k-th score resolved to the smallest indices (the
    largest when ``last``: the same selection on the row read backwards).

    ``torch.topk`` picks arbitrarily among values equal to the k-th. A row is ambiguous only
    when its (k+1)-th largest value equals its k-th, so one extra column finds those rows (far
    cheaper than counting ties over the whole block); they are redone with a stable sort.
    """
    import torch

    if last:
        values, indices = _block_topk(scores.flip(1), k)
        return values, scores.shape[1] - 1 - indices

    extra = min(k + 1, scores.shape[1])
    values, indices = torch.topk(scores, extra, dim=1, largest=True, sorted=True)
    if extra > k:
        ambiguous = (values[:, k] == values[:, k - 1]).nonzero().flatten()
        values, indices = values[:, :k].clone(), indices[:, :k].clone()
        for row in ambiguous.tolist():
            ordered = torch.sort(scores[row], descending=True, stable=True)
            values[row], indices[row] = ordered.values[:k], ordered.indices[:k]
    return _order_by_score_then_index(values, indices)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def _prepared_queries(queries: np.ndarray, metric: Metric) -> np.ndarray:
    queries = np.ascontiguousarray(queries, np.float32)
    if metric == "cosine":
        return _unit(queries)
    if metric == "l2":
        return np.hstack([queries, np.ones((len(queries), 1), np.float32)])
    return queries


def _prepared_block(block: np.ndarray, metric: Metric) -> np.ndarray:
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


# A row with more documents passing its threshold than this many times k takes the chunk's own
# top-k first (a selection over the row) rather than a merge as wide as the chunk.
_MOST_PASSING = 4


class _RunningTopK:
    """The best ``k`` (score, index) pairs of some queries over the documents seen so far, each row
    ordered by score descending then index ascending (descending when ``last``).

    Once ``k`` documents are seen, a later document can enter a row only by beating the row's
    k-th score (strictly; or equalling it, when ``last``: a later document has a larger index),
    so a block of scores costs one comparison against that threshold and a merge of the few
    documents that pass with the row's current best, not a selection over the whole block.
    Until the threshold means something the block is taken in chunks as large as what was seen
    before them (k, 2k, 4k, ... documents): a chunk beats the k-th of the documents before it
    about k times per row, whatever the scores. The documents that pass are collected and
    merged once a row holds more than k of them: a stale threshold lets a few more pass, and
    the merges (a sort per row) become rare.
    """

    def __init__(self, k: int, last: bool) -> None:
        self.k, self.last = k, last
        self.values = np.empty((0, 0), np.float32)
        self.indices = np.empty((0, 0), np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_counts: np.ndarray | None = None

    def add(self, scores: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Take the documents ``offset, offset + 1, ...`` (the columns of ``scores``; ``mask`` is
        a flat bool buffer of at least its size), every earlier document already taken; call
        :meth:`flush` after the last."""
        if not self.values.size:
            self.values = np.empty((scores.shape[0], 0), np.float32)
            self.indices = np.empty((scores.shape[0], 0), np.int64)
        start, width = 0, scores.shape[1]
        while start < width:
            filled = self.values.shape[1]
            if filled < self.k:
                stop = start + min(self.k - filled, width - start)
                self._merge_all(scores[:, start:stop], offset + start)
            else:
                stop = min(width, start + offset + start)
                self._merge_passing(scores[:, start:stop], offset + start, mask)
            start = stop

    def _merge(self, values: np.ndarray, indices: np.ndarray, rows: slice | np.ndarray = slice(None)) -> None:
        """Merge documents whose indices all exceed the kept ones in ``rows``; among equal
        ``values`` the indices ascend (descend when ``last``), ``-inf`` pads after them."""
        # A stable sort of [kept, new] orders ties by index ascending; of [new, kept], descending
        # (measured faster than merging by searchsorted positions, in numpy or torch).
        kept = (self.values[rows], self.indices[rows])
        first, second = ((values, indices), kept) if self.last else (kept, (values, indices))
        merged_values = np.concatenate([first[0], second[0]], axis=1)
        merged_indices = np.concatenate([first[1], second[1]], axis=1)
        order = np.argsort(-merged_values, axis=1, kind="stable")[:, : self.k]
        values, indices = np.take_along_axis(merged_values, order, axis=1), np.take_along_axis(merged_indices, order, axis=1)
        if isinstance(rows, slice):
            self.values, self.indices = values, indices
        else:
            self.values[rows], self.indices[rows] = values, indices

    def _merge_all(self, scores: np.ndarray, offset: int) -> None:
        """Merge every column (the row is not full yet)."""
        columns = np.arange(scores.shape[1])[::-1] if self.last else np.arange(scores.shape[1])
        self._merge(scores[:, columns], np.tile(columns + offset, (scores.shape[0], 1)))

    def _merge_passing(self, scores: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Collect the columns that beat their row's k-th score (every row is full); they are
        merged once some row holds more than k of them (:meth:`flush`)."""
        threshold = self.values[:, -1]
        if self.last and np.isneginf(threshold).any():  # a -inf pad would tie at the cut
            self.flush()
            self._merge_selected(scores, offset, np.arange(scores.shape[0]))
            return
        compare = np.greater_equal if self.last else np.greater
        compare(scores, threshold[:, None], out=mask[: scores.size].reshape(scores.shape))
        passing = np.flatnonzero(mask[: scores.size])
        if not passing.size:
            return
        rows, columns = np.divmod(passing, scores.shape[1])
        counts = np.bincount(rows, minlength=scores.shape[0])
        remade = counts > _MOST_PASSING * self.k
        if remade.any():  # rows the chunk remakes: select in them first
            self.flush()
            self._merge_selected(scores, offset, np.flatnonzero(remade))
            light = ~remade[rows]
            rows, columns, counts = rows[light], columns[light], np.where(remade, 0, counts)
        self._pending.append((rows, columns + offset, scores[rows, columns]))
        self._pending_counts = counts if self._pending_counts is None else self._pending_counts + counts
        if self._pending_counts.max() > self.k:
            self.flush()

    def flush(self) -> None:
        """Merge the collected documents (their indices exceed every kept one's)."""
        if not self._pending:
            return
        rows, indices, values = (np.concatenate(parts) for parts in zip(*self._pending, strict=True))
        counts = self._pending_counts
        self._pending, self._pending_counts = [], None
        if not rows.size:
            return
        by_row = np.argsort(rows, kind="stable")  # within a row: chunk by chunk, index ascending
        rows, indices, values = rows[by_row], indices[by_row], values[by_row]
        active = np.flatnonzero(counts)
        slot = np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]
        if self.last:
            slot = counts[rows] - 1 - slot
        row = (np.cumsum(counts > 0) - 1)[rows]
        # Pads at -inf sort below every document that passed a finite threshold and every kept one.
        most = int(counts.max())
        dense_values = np.full((active.size, most), -np.inf, np.float32)
        dense_indices = np.full((active.size, most), -1, np.int64)
        dense_values[row, slot] = values
        dense_indices[row, slot] = indices
        self._merge(dense_values, dense_indices, active)

    def _merge_selected(self, scores: np.ndarray, offset: int, rows: np.ndarray) -> None:
        """Merge the chunk's own top-k of ``rows`` (torch's selection, ties resolved as in the
        kept rows)."""
        import torch

        with torch.inference_mode():
            values, indices = _block_topk(torch.from_numpy(scores[rows]), min(self.k, scores.shape[1]), self.last)
        self._merge(values.numpy(), indices.numpy() + offset, rows)


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
    that scores NaN.
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
    import torch

    prepared = _prepared_queries(queries, metric)
    if not np.isfinite(prepared).all():
        bad = np.flatnonzero(~np.isfinite(prepared).all(axis=1))
        raise ValueError(f"{bad.size} query vectors hold NaN or inf (first at row {bad[0]}); fix or drop them before searching")
    query_starts = range(0, len(prepared), query_block_size)
    running = [_RunningTopK(k, last) for _ in query_starts]
    # One score buffer and one mask buffer serve every block: a fresh 64 MiB product per block
    # pays its page faults again (measured: a third of the product's time).
    score_buffer, mask_buffer = torch.empty(0), np.empty(0, bool)
    seen = 0
    with torch.inference_mode():
        for raw_block in blocks:
            if raw_block.ndim != 2 or raw_block.shape[1] != queries.shape[1]:
                raise ValueError(f"query vectors {queries.shape} and document vectors {raw_block.shape} must share a dimension")
            block = torch.from_numpy(_prepared_block(raw_block, metric))
            for q_start, top in zip(query_starts, running, strict=True) if len(block) else ():
                query_block = torch.from_numpy(prepared[q_start : q_start + query_block_size])
                shape, size = (len(query_block), len(block)), len(query_block) * len(block)
                if score_buffer.numel() < size:
                    score_buffer, mask_buffer = torch.empty(size), np.empty(size, bool)
                # torch's BLAS (MKL on x86) computes the product, measured ~20% faster than
                # numpy's OpenBLAS for these shapes on this class of CPU.
                scores = torch.matmul(query_block, block.T, out=score_buffer[:size].view(shape)).numpy()
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
    for q_start, top in zip(query_starts, running, strict=True):
        top.flush()
        if top.values.size:
            all_scores[q_start : q_start + query_block_size] = top.values
            all_indices[q_start : q_start + query_block_size] = top.indices
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
