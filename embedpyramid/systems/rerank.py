"""Second-stage rerank of the top N candidates of any first stage (pyramid L5).

The first stage is any ranked run — a model's exact run, an L4 index's run, BM25, a fusion —
and its top ``top_n`` documents per query (project order: score descending, then doc_id), with
every document tied in score with the ``top_n``-th (so the pool never depends on document ids,
:func:`~embedpyramid.systems.fusion.candidates`), are rescored; the output is exactly those candidates in the new order (score descending, ties to
the smaller doc_id), so a metric cut deeper than ``top_n`` sees only the reranked candidates.
A query without candidates stays without documents.

- :func:`cross_encoder_rerank`: a sentence-transformers ``CrossEncoder`` scores each
  (query text, document text) pair, one query's candidates per call. Scores are the raw logits
  (no activation): the usual sigmoid is monotone, so the order is the same, but it saturates to
  tied 1.0s in float32 for confident pairs.
- :func:`bi_encoder_rerank`: the inner product of another card's query and document vectors
  (the cosine for a card that normalizes), the score that card's exact search uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from typing import Any

import numpy as np

from embedpyramid.config.systems import ModelLocation
from embedpyramid.hub import download
from embedpyramid.systems.fusion import candidates
from embedpyramid.systems.latency import StageLatency, latency_sample, time_per_query
from embedpyramid.systems.runs import CodedRun, group_starts, ranked


@dataclass(frozen=True, eq=False)
class KeyedVectors:
    """Vectors keyed by id: row i of ``vectors`` belongs to ``ids[i]``."""

    ids: Sequence[str]
    vectors: np.ndarray = field(repr=False)

    def aligned(self, ids: Sequence[str], what: str) -> np.ndarray:
        """The rows for ``ids`` in that order (float32); a missing id is an error naming ``what``."""
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.ids):
            raise ValueError(f"{what}: {len(self.ids)} ids for vectors of shape {self.vectors.shape}")
        if list(self.ids) == list(ids):
            return np.ascontiguousarray(self.vectors, dtype=np.float32)
        position = {identifier: row for row, identifier in enumerate(self.ids)}
        missing = [identifier for identifier in ids if identifier not in position]
        if missing:
            raise ValueError(
                f"{what}: no vector for {len(missing)} ids, e.g. {missing[:3]}; re-encode them on the current "
                "frozen dataset"
            )
        return np.ascontiguousarray(self.vectors[[position[i] for i in ids]], dtype=np.float32)


@dataclass(frozen=True, eq=False)
class RerankRun:
    """The reranked run and the latency the rerank stage adds per query."""

    run: CodedRun
    candidates_per_query: float
    latency: StageLatency


class CrossEncoderScorer:
    """A sentence-transformers CrossEncoder loaded from a directory, or from the Hugging Face cache's
    snapshot of a hub repository at its commit (downloaded first when online and missing)."""

    def __init__(self, location: ModelLocation, *, max_length: int | None = None, batch_size: int = 32,
                 device: str = "cpu"):
        from sentence_transformers import CrossEncoder

        folder, named = location.location, repr(location.location)
        if location.commit is not None:
            named = f"{location.location} @ {location.commit[:12]}"
            folder = str(download(location.location, location.commit, where=f"cross-encoder {named}"))
        try:
            self.model = CrossEncoder(folder, max_length=max_length, device=device, local_files_only=True)
        except Exception as error:
            raise RuntimeError(f"cannot load a CrossEncoder from {named}: {error}") from error
        if self.model.num_labels != 1:
            raise ValueError(
                f"the CrossEncoder at {location.location!r} has {self.model.num_labels} labels; reranking needs one "
                "relevance score per pair (num_labels = 1)"
            )
        self.location, self.batch_size, self.max_length = location, batch_size, max_length

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        import torch

        scores = self.model.predict([(query, document) for document in documents], batch_size=self.batch_size,
                                    activation_fn=torch.nn.Identity(), show_progress_bar=False,
                                    convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float32).reshape(-1)

    def describe(self) -> dict[str, Any]:
        return {
            "location": self.location.location, "commit": self.location.commit, "max_length": self.max_length,
            "batch_size": self.batch_size, "activation": "none (raw logits)",
            "sentence-transformers": importlib_metadata.version("sentence-transformers"),
        }


def cross_encoder_rerank(
    first_stage: CodedRun, top_n: int, query_texts: Sequence[str], doc_texts: Sequence[str],
    scorer: Callable[[str, Sequence[str]], np.ndarray],
) -> RerankRun:
    """Rescore each query's top ``top_n`` with ``scorer(query text, document texts)``, one query
    per call; every call is timed (the latency of every query with candidates)."""
    pool = candidates(first_stage, top_n)
    starts = group_starts(pool.query)
    ends = np.append(starts[1:], len(pool))
    scores = np.empty(len(pool), dtype=np.float32)
    seconds = np.empty(starts.size)
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        began = time.perf_counter()
        texts = [doc_texts[d] for d in pool.doc[start:end]]
        scores[start:end] = scorer(query_texts[int(pool.query[start])], texts)
        seconds[index] = time.perf_counter() - began
    return RerankRun(
        ranked(pool.query, pool.doc, scores),
        len(pool) / len(query_texts) if len(query_texts) else 0.0,
        StageLatency.from_seconds(seconds, scope="every query"),
    )


def bi_encoder_rerank(
    first_stage: CodedRun, top_n: int, query_vectors: np.ndarray, doc_vectors: np.ndarray, *,
    latency_queries: int, seed: int, query_texts: Sequence[str] | None = None,
    encode_query: Callable[[str], np.ndarray] | None = None,
) -> RerankRun:
    """Rescore each query's top ``top_n`` by ``query_vectors[q] · doc_vectors[d]`` (rows aligned
    with the query and document positions of the run).

    The run is computed for all queries at once; the latency is measured on a seeded sample of
    ``latency_queries`` queries, one at a time. With ``encode_query`` (and ``query_texts``) each
    timed query is first encoded by the reranking model — what the stage costs when serving —
    otherwise the stored query vector is used and the latency covers scoring and ordering only.
    """
    if query_vectors.shape[1] != doc_vectors.shape[1]:
        raise ValueError(f"query vectors {query_vectors.shape} and document vectors {doc_vectors.shape} differ in dimension")
    if encode_query is not None and query_texts is None:
        raise ValueError("encode_query needs query_texts")
    pool = candidates(first_stage, top_n)
    scores = np.einsum("ij,ij->i", query_vectors[pool.query], doc_vectors[pool.doc])
    run = ranked(pool.query, pool.doc, scores)

    def one_query(query: int) -> CodedRun:
        vector = query_vectors[query] if encode_query is None else encode_query(query_texts[query]).reshape(-1)
        mine = pool.query_slice(query)
        return ranked(mine.query, mine.doc, doc_vectors[mine.doc] @ vector)

    present = np.unique(pool.query)
    sample = present[latency_sample(present.size, latency_queries, seed)]
    latency = time_per_query(one_query, sample, seed=seed)
    if encode_query is not None:
        latency = StageLatency(latency.p50_ms, latency.p95_ms, latency.n_queries,
                               latency.scope + ", query encoding included")
    n_queries = query_vectors.shape[0]
    return RerankRun(run, len(pool) / n_queries if n_queries else 0.0, latency)
