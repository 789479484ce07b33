"""Exact top-k search in a card's own similarity, over documents held in memory or streamed.

Scores are "larger is better" in every metric:

- ``inner_product``: ``q·d``;
- ``cosine``: ``q·d / (‖q‖‖d‖)`` (a zero vector scores 0 against everything);
- ``l2``: ``−‖q − d‖²``, ranked through the inner product of extended vectors,
  ``[q, 1]·[d, −‖d‖²/2] = q·d − ‖d‖²/2``, which orders like ``−‖q − d‖²`` for a fixed query;
  the returned score is ``2s − ‖q‖²``.

The documents are consumed block by block, each block once, while a running top-k per query
is merged (torch, imported when a search runs): peak memory is the queries, their top-k, one
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
    if unknown).
    """
    import torch

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
    prepared = _prepared_queries(queries, metric)
    query_starts = range(0, len(prepared), query_block_size)
    best: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(query_starts)
    seen = 0
    with torch.inference_mode():
        for raw_block in blocks:
            if raw_block.ndim != 2 or raw_block.shape[1] != queries.shape[1]:
                raise ValueError(f"query vectors {queries.shape} and document vectors {raw_block.shape} must share a dimension")
            block = _prepared_block(raw_block, metric)
            block_k = min(k, len(block))
            for position, q_start in enumerate(query_starts):
                # The product goes through numpy's BLAS (OpenBLAS), measured faster than torch's
                # for these shapes on this class of CPU; the selection and merge run in torch.
                scores = torch.from_numpy(prepared[q_start : q_start + query_block_size] @ block.T)
                values, indices = _block_topk(scores, block_k, last)
                indices += seen
                current = best[position]
                if current is None:
                    best[position] = (values, indices)
                    continue
                # Earlier blocks hold smaller indices, so a stable sort of [best, block] keeps
                # the (score desc, index asc) order without re-sorting by index ([block, best]
                # keeps index desc).
                first, second = ((values, indices), current) if last else (current, (values, indices))
                merged_values = torch.cat([first[0], second[0]], dim=1)
                merged_indices = torch.cat([first[1], second[1]], dim=1)
                order = torch.sort(merged_values, dim=1, descending=True, stable=True).indices[:, :k]
                best[position] = (merged_values.gather(1, order), merged_indices.gather(1, order))
            seen += len(block)
            if progress is not None:
                progress(seen, n_documents or 0)
    depth = min(k, seen)
    all_scores = np.empty((len(prepared), depth), np.float32)
    all_indices = np.empty((len(prepared), depth), np.int64)
    for position, q_start in enumerate(query_starts):
        current = best[position]
        if current is not None:
            all_scores[q_start : q_start + query_block_size] = current[0].numpy()
            all_indices[q_start : q_start + query_block_size] = current[1].numpy()
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
            "query_id": pa.array(np.repeat(np.asarray(query_ids, dtype=object), depth), pa.string()),
            "rank": pa.array(np.tile(np.arange(1, depth + 1, dtype=np.int32), n_queries)),
            "doc_id": doc_array.take(pa.array(indices.reshape(-1))),
            "score": pa.array(scores.reshape(-1), pa.float32()),
        },
        schema=RUN_SCHEMA,
    )
