"""Exact top-k with torch on a device (a GPU: ``cuda``, ``cuda:1``; or ``cpu``, which tests use):
the contract of :func:`embedpyramid.retrieval.search.exact_topk`, the tie rule included.

The documents come block by block, as on the CPU, and each block's scores are computed on the
device. The selection keeps the tie rule without sorting: in each row, the k-th largest score
``t`` (``torch.topk``, whose choice among equal scores is unspecified, only gives ``t``) splits
the row into the ``m`` scores above ``t``, all kept, and the scores equal to ``t``, of which the
``k - m`` with the smallest document index are kept (``ties_at_cut="first"``; the largest with
``"last"``), counted by a running sum along the row. A row's kept documents stay in index order,
so the running top-k of the blocks seen so far, followed by the next block's kept documents, is
again in index order and is selected the same way. Every document enters by the same rule as in
:func:`~embedpyramid.retrieval.search.exact_topk`, so where the scores are equal the ids are
equal; the scores themselves come from the device's matrix product, which may round a product
differently from the CPU's BLAS (``benchmarks/bench_gpu.py`` compares the two on a GPU).

Memory on the device: the prepared queries, one block of documents, one query block × document
block of scores with its masks and running sums (int32), and the running top-k.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from embedpyramid.retrieval.search import Metric, TiesAtCut, order_rows, prepared_block, prepared_queries


def _keep_best(values, indices, k: int, last: bool):
    """Each row's best ``k`` columns by (score descending, then index ascending, or descending
    when ``last``), in column order; the columns must be in index order. Returns (values, indices)
    of width min(k, width)."""
    import torch

    width = values.shape[1]
    if width <= k:
        return values, indices
    kth = torch.topk(values, k, dim=1, largest=True, sorted=False).values.min(dim=1, keepdim=True).values
    above = values > kth
    tied = values == kth
    wanted = k - above.sum(dim=1, keepdim=True, dtype=torch.int32)
    order = torch.cumsum(tied.flip(1) if last else tied, dim=1, dtype=torch.int32)
    if last:
        order = order.flip(1)
    keep = above | (tied & (order <= wanted))
    rows = values.shape[0]
    return values[keep].reshape(rows, k), indices[keep].reshape(rows, k)


def exact_topk_torch(
    queries: np.ndarray,
    documents: np.ndarray | Iterable[np.ndarray],
    k: int,
    *,
    device: str,
    metric: Metric = "inner_product",
    doc_block_size: int = 16384,
    query_block_size: int = 1024,
    n_documents: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    ties_at_cut: TiesAtCut = "first",
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~embedpyramid.retrieval.search.exact_topk` computed with torch on ``device`` (see the
    module docstring); the same arguments, the same (scores, indices), ordered the same way."""
    import torch

    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if queries.ndim != 2:
        raise ValueError(f"query vectors must be a matrix, got shape {queries.shape}")
    last = ties_at_cut == "last"
    if isinstance(documents, np.ndarray):
        if documents.ndim != 2:
            raise ValueError(f"document vectors must be a matrix, got shape {documents.shape}")
        matrix, n_documents = documents, len(documents)
        documents = (matrix[s : s + doc_block_size] for s in range(0, len(matrix), doc_block_size))
    prepared = prepared_queries(queries, metric)
    if not np.isfinite(prepared).all():
        bad = np.flatnonzero(~np.isfinite(prepared).all(axis=1))
        raise ValueError(f"{bad.size} query vectors hold NaN or inf (first at row {bad[0]}); fix or drop them before searching")
    on_device = torch.from_numpy(prepared).to(device)
    starts = range(0, len(prepared), query_block_size)
    running: list[tuple[torch.Tensor, torch.Tensor] | None] = [None for _ in starts]
    seen = 0
    with torch.inference_mode():
        for raw_block in documents:
            if raw_block.ndim != 2 or raw_block.shape[1] != queries.shape[1]:
                raise ValueError(f"query vectors {queries.shape} and document vectors {raw_block.shape} must share a dimension")
            if not len(raw_block):
                continue
            block = torch.from_numpy(prepared_block(raw_block, metric)).to(device)
            columns = torch.arange(seen, seen + len(block), device=device, dtype=torch.int64)
            for position, start in enumerate(starts):
                scores = on_device[start : start + query_block_size] @ block.T
                if start == 0 and torch.isnan(scores[0]).any():
                    bad = torch.nonzero(torch.isnan(scores[0])).flatten().cpu().numpy()
                    raise ValueError(f"{bad.size} document vectors in rows {seen}..{seen + len(block) - 1} score NaN, "
                                     f"a NaN or inf component (first at row {seen + bad[0]}); fix or drop them before searching")
                indices = columns.expand(scores.shape[0], -1)
                if running[position] is not None:
                    kept_values, kept_indices = running[position]
                    scores = torch.cat([kept_values, scores], dim=1)
                    indices = torch.cat([kept_indices, indices], dim=1)
                running[position] = _keep_best(scores, indices, k, last)
            seen += len(block)
            if progress is not None:
                progress(seen, n_documents or 0)
    depth = min(k, seen)
    all_scores = np.empty((len(prepared), depth), np.float32)
    all_indices = np.empty((len(prepared), depth), np.int64)
    for start, kept in zip(starts, running, strict=True) if depth else ():
        values, indices = (part.cpu().numpy() for part in kept)
        all_scores[start : start + query_block_size], all_indices[start : start + query_block_size] = order_rows(
            values, indices, last)
    if metric == "l2":
        query_norms = np.einsum("nd,nd->n", queries, queries, dtype=np.float32)[:, None]
        return order_rows(2 * all_scores - query_norms, all_indices, last)
    return all_scores, all_indices
