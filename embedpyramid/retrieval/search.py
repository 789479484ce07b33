"""Exact top-k search: a blocked matrix product with a running top-k merge (torch).

Peak memory is bounded by ``query_block_size × doc_block_size`` scores, never by the corpus.
Ties in score are broken by document position, and the corpus is stored sorted by doc_id, so
ties go to the smaller doc_id — the convention every metric in this project assumes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

RUN_SCHEMA = pa.schema([
    ("query_id", pa.string()), ("rank", pa.int32()), ("doc_id", pa.string()), ("score", pa.float32()),
])


def _order_by_score_then_index(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by (score descending, index ascending)."""
    by_index = torch.argsort(indices, dim=1)
    values, indices = values.gather(1, by_index), indices.gather(1, by_index)
    by_score = torch.sort(values, dim=1, descending=True, stable=True).indices
    return values.gather(1, by_score), indices.gather(1, by_score)


def _block_topk(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row with ties at the k-th score resolved to the smallest indices.

    ``torch.topk`` picks arbitrarily among values equal to the k-th. A row is ambiguous only
    when its (k+1)-th largest value equals its k-th, so one extra column finds those rows (far
    cheaper than counting ties over the whole block); they are redone with a stable sort.
    """
    extra = min(k + 1, scores.shape[1])
    values, indices = torch.topk(scores, extra, dim=1, largest=True, sorted=True)
    if extra > k:
        ambiguous = (values[:, k] == values[:, k - 1]).nonzero().flatten()
        values, indices = values[:, :k].clone(), indices[:, :k].clone()
        for row in ambiguous.tolist():
            ordered = torch.sort(scores[row], descending=True, stable=True)
            values[row], indices[row] = ordered.values[:k], ordered.indices[:k]
    return _order_by_score_then_index(values, indices)


def exact_topk(
    queries: np.ndarray,
    documents: np.ndarray,
    k: int,
    *,
    doc_block_size: int = 16384,
    query_block_size: int = 1024,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Inner-product top-k of every query over all documents.

    Returns ``(scores, indices)`` of shape (n_queries, min(k, n_documents)), each row ordered by
    score descending then document index ascending. Scores are float32 dot products; with
    normalized vectors they are cosines.
    """
    if queries.ndim != 2 or documents.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise ValueError(f"query vectors {queries.shape} and document vectors {documents.shape} must share a dimension")
    n_queries, n_documents = queries.shape[0], documents.shape[0]
    depth = min(k, n_documents)
    all_scores = np.empty((n_queries, depth), np.float32)
    all_indices = np.empty((n_queries, depth), np.int64)
    documents = np.ascontiguousarray(documents, np.float32)
    with torch.inference_mode():
        for q_start in range(0, n_queries, query_block_size):
            q_block = np.ascontiguousarray(queries[q_start : q_start + query_block_size], np.float32)
            best_values: torch.Tensor | None = None
            best_indices: torch.Tensor | None = None
            for d_start in range(0, n_documents, doc_block_size):
                d_block = documents[d_start : d_start + doc_block_size]
                # The product goes through numpy's BLAS (OpenBLAS), measured faster than torch's
                # for these shapes on this class of CPU; the selection and merge run in torch.
                scores = torch.from_numpy(q_block @ d_block.T)
                values, indices = _block_topk(scores, min(depth, d_block.shape[0]))
                indices += d_start
                if best_values is None or best_indices is None:
                    best_values, best_indices = values, indices
                    continue
                # Earlier blocks hold smaller indices, so a stable sort of [best, block] keeps
                # the (score desc, index asc) order without re-sorting by index.
                merged_values = torch.cat([best_values, values], dim=1)
                merged_indices = torch.cat([best_indices, indices], dim=1)
                order = torch.sort(merged_values, dim=1, descending=True, stable=True).indices[:, :depth]
                best_values, best_indices = merged_values.gather(1, order), merged_indices.gather(1, order)
            q_end = q_start + q_block.shape[0]
            if best_values is not None and best_indices is not None:
                all_scores[q_start:q_end] = best_values.numpy()
                all_indices[q_start:q_end] = best_indices.numpy()
            if progress is not None:
                progress(q_end, n_queries)
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
