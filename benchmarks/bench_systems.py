"""Benchmark the L5 systems core against references measured in the same run.

1. BM25 (``embedpyramid.systems.bm25``) against bm25s's own calls on the same synthetic corpus
   and queries, with the same settings (Lucene BM25, English stopwords and stemmer, numpy
   backend): indexing (bm25s's ``Tokenizer.tokenize`` + ``BM25.index`` vs
   :func:`build_bm25_index`) and retrieval of the top ``--depth`` (``Tokenizer.tokenize`` of all
   queries + ``BM25.retrieve`` vs :func:`bm25_search` — which tokenizes, scores and selects one
   query per call, timing each, and breaks ties by doc_id — plus writing the run table). The two
   alternate for ``--rounds`` rounds (retrieval chunk by chunk, ``--chunk`` queries) and the
   minima are compared. Both sides are single-threaded, so they are compared by the process's
   CPU time, which another user's load on a shared machine barely moves (wall-clock seconds
   swing by +-30 % there); wall clock is printed beside it. Target: the wrapper adds <= 5 % to
   each. Before anything is timed both sides index once and retrieve every query, and the
   runs must agree: the positive scores bit for bit, and the ranked doc ids once ties are put in
   doc_id order (bm25s keeps an arbitrary subset of the documents tied at a full cut, so ids are
   compared above that score); otherwise the script stops.
2. Fusion of ``--fusion-queries`` queries x 2 runs x depth 100 (synthetic runs over a 100,000
   document corpus, half of each query's candidates shared): reciprocal rank fusion and
   weighted (min-max, z-score) fusion on integer-coded runs, and the whole path an asset takes
   (string run tables -> coded runs -> RRF -> run table). Reference in the same run: the
   textbook dict-based RRF in Python, one query at a time; before the fusions are timed, every
   query's fused ranking must equal it (doc ids, and float32 scores exactly); it follows the
   project's definition (ties kept at each cut, tied inputs at their mean rank). Target: < 2 s
   (end to end).

The corpus is synthetic: Zipf-distributed draws (exponent 1.1) from 50,000 pseudo-words, 20-80
words per document; queries are 2-8 words drawn from one document each. Prints a summary, then
ONE JSON line with the figures, the targets and whether each was met.

    python benchmarks/bench_systems.py [--documents N] [--queries Q] [--fusion-queries F]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict

import bm25s
import numpy as np
import polars as pl
import Stemmer
from bm25s.tokenization import Tokenizer
from results import record_result

from embedpyramid.config.system_kinds import Bm25System
from embedpyramid.systems import (
    CodedRun,
    bm25_search,
    build_bm25_index,
    encode_run,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)

WRAPPER_OVERHEAD_TARGET = 0.05
FUSION_SECONDS_TARGET = 2.0


def pseudo_words(n_words: int, rng: np.random.Generator) -> np.ndarray:
    syllables = np.array([c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"])
    endings = np.array(["", "", "", "s", "ing", "ed", "er"])
    parts = syllables[rng.integers(0, syllables.size, size=(n_words, 3))]
    words = np.char.add(np.char.add(parts[:, 0], parts[:, 1]), parts[:, 2])
    return np.char.add(words, endings[rng.integers(0, endings.size, n_words)])


def synthetic_corpus(n_documents: int, n_queries: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    vocabulary = pseudo_words(50_000, rng)
    lengths = rng.integers(20, 81, n_documents)
    draws = np.minimum(rng.zipf(1.1, lengths.sum()) - 1, vocabulary.size - 1)
    words = vocabulary[draws]
    bounds = np.r_[0, np.cumsum(lengths)]
    documents = [" ".join(words[bounds[i]:bounds[i + 1]]) for i in range(n_documents)]
    sources = rng.integers(0, n_documents, n_queries)
    queries = []
    for source in sources:
        tokens = documents[source].split()
        queries.append(" ".join(rng.choice(tokens, size=min(len(tokens), int(rng.integers(2, 9))), replace=False)))
    return documents, queries


def bm25s_index(spec: Bm25System, documents: list[str]) -> tuple[bm25s.BM25, Tokenizer]:
    tokenizer = Tokenizer(stopwords="en", stemmer=Stemmer.Stemmer("english"))
    tokens = tokenizer.tokenize(documents, return_as="tuple", show_progress=False, allow_empty=False)
    retriever = bm25s.BM25(k1=spec.k1, b=spec.b, method=spec.method, backend="numpy")
    retriever.index(tokens, show_progress=False)
    return retriever, tokenizer


def bm25s_retrieve(retriever: bm25s.BM25, tokenizer: Tokenizer, queries: list[str], depth: int):
    tokens = tokenizer.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
    return retriever.retrieve(tokens, k=depth, show_progress=False, n_threads=0, backend_selection="numpy")


def timed(function, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def cpu_timed(function, *args, **kwargs) -> tuple[float, float, object]:
    """(CPU seconds of this process, wall seconds, result)."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = function(*args, **kwargs)
    return time.process_time() - cpu, time.perf_counter() - wall, result


def tie_grouped(docs: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ordered by score descending, then document index ascending."""
    order = np.lexsort((docs, -scores))
    return docs[order], scores[order]


def bm25_differences(searched, bm25s_docs: np.ndarray, bm25s_scores: np.ndarray, depth: int) -> dict[str, int]:
    """Per query, the wrapper's run against bm25s's ``retrieve`` output: the positive scores must be
    equal bit for bit, and the ranked documents identical once ties are put in doc_id order — except
    among the documents tied at the cut when the cut is full (bm25s keeps an arbitrary subset of
    them). Counts the queries that differ in each way and those with a tie at a full cut."""
    counts = {"scores_differ": 0, "ids_differ": 0, "ties_at_cut": 0}
    for position in range(bm25s_docs.shape[0]):
        mine = searched.run.query_slice(position)
        keep = bm25s_scores[position] > 0
        docs, scores = tie_grouped(bm25s_docs[position][keep].astype(np.int64), bm25s_scores[position][keep])
        if not np.array_equal(mine.score, scores.astype(np.float32)):
            counts["scores_differ"] += 1
            continue
        if scores.size == 0:
            continue
        settled = scores > scores[-1] if scores.size == depth else np.ones(scores.size, dtype=bool)
        counts["ties_at_cut"] += int(not settled.all())
        counts["ids_differ"] += int(not np.array_equal(mine.doc[settled], docs[settled]))
    return counts


def bench_bm25(args: argparse.Namespace) -> dict[str, float]:
    documents, queries = synthetic_corpus(args.documents, args.queries, args.seed)
    spec = Bm25System.model_validate({"kind": "bm25"})
    doc_ids = [f"d{i:07d}" for i in range(len(documents))]
    query_ids = [f"q{i:06d}" for i in range(len(queries))]
    # Equal outputs first: both sides index once, untimed, and every query's run is compared.
    retriever, tokenizer = bm25s_index(spec, documents)
    index = build_bm25_index(spec, documents)
    bm25s_docs, bm25s_scores = bm25s_retrieve(retriever, tokenizer, queries, args.depth)
    differences = bm25_differences(bm25_search(index, queries, args.depth), bm25s_docs, bm25s_scores, args.depth)
    same = differences["scores_differ"] == 0 and differences["ids_differ"] == 0
    print(f"  same results as bm25s on all {len(queries)} queries: {'PASS' if same else 'FAIL'} "
          f"({differences['scores_differ']} differ in scores, {differences['ids_differ']} in ranked ids; "
          f"{differences['ties_at_cut']} with a tie at the full cut, compared above it)")
    if not same:
        raise SystemExit("the wrapper and bm25s return different results: timing them would compare different work")
    index_times: dict[str, list[float]] = {"bm25s": [], "wrapper": []}
    for round_ in range(args.rounds):
        walls = {}
        for side in (("bm25s", "wrapper") if round_ % 2 == 0 else ("wrapper", "bm25s")):
            if side == "bm25s":
                seconds, walls[side], (retriever, tokenizer) = cpu_timed(bm25s_index, spec, documents)
            else:
                seconds, walls[side], index = cpu_timed(build_bm25_index, spec, documents)
            index_times[side].append(seconds)
        print(f"  index round {round_ + 1}: CPU bm25s {index_times['bm25s'][-1]:.2f} s, wrapper "
              f"{index_times['wrapper'][-1]:.2f} s (wall {walls['bm25s']:.2f} s, {walls['wrapper']:.2f} s)")
    # Retrieval alternates chunk by chunk, so a load spike on a shared machine hits both sides
    # alike; each chunk's best time over the rounds counts.
    chunk = args.chunk
    starts = range(0, len(queries), chunk)
    best = {"bm25s": np.full(len(starts), np.inf), "wrapper": np.full(len(starts), np.inf)}
    best_wall = {"bm25s": np.full(len(starts), np.inf), "wrapper": np.full(len(starts), np.inf)}
    latencies = []
    for round_ in range(args.rounds):
        for position, start in enumerate(starts):
            texts, ids = queries[start:start + chunk], query_ids[start:start + chunk]
            for side in (("bm25s", "wrapper") if (round_ + position) % 2 == 0 else ("wrapper", "bm25s")):
                began, began_cpu = time.perf_counter(), time.process_time()
                if side == "bm25s":
                    bm25s_retrieve(retriever, tokenizer, texts, args.depth)
                else:
                    searched = bm25_search(index, texts, args.depth)
                    searched.run.table(ids, doc_ids)
                    if round_ == 0:
                        latencies.append(searched.latency)
                best[side][position] = min(best[side][position], time.process_time() - began_cpu)
                best_wall[side][position] = min(best_wall[side][position], time.perf_counter() - began)
    retrieve = {side: float(times.sum()) for side, times in best.items()}
    print(f"  retrieve, best of {args.rounds} per chunk of {chunk}: CPU bm25s {retrieve['bm25s']:.2f} s, "
          f"wrapper {retrieve['wrapper']:.2f} s (wall {best_wall['bm25s'].sum():.2f} s, "
          f"{best_wall['wrapper'].sum():.2f} s)")
    figures = {f"index_{side}_s": min(times) for side, times in index_times.items()}
    figures.update({f"retrieve_{side}_s": seconds for side, seconds in retrieve.items()})
    return {
        **figures,
        "queries_compared_with_bm25s": len(queries), "queries_tied_at_cut": differences["ties_at_cut"],
        "index_overhead": figures["index_wrapper_s"] / figures["index_bm25s_s"] - 1.0,
        "retrieve_overhead": figures["retrieve_wrapper_s"] / figures["retrieve_bm25s_s"] - 1.0,
        "documents_per_s": args.documents / figures["index_wrapper_s"],
        "queries_per_s": args.queries / figures["retrieve_wrapper_s"],
        "p50_ms_first_round_median_of_chunks": float(np.median([lat.p50_ms for lat in latencies])),
        "p95_ms_first_round_median_of_chunks": float(np.median([lat.p95_ms for lat in latencies])),
    }


def synthetic_runs(n_queries: int, depth: int, n_documents: int, seed: int) -> tuple[CodedRun, CodedRun]:
    """Two runs; each query's candidates share half their documents."""
    rng = np.random.default_rng(seed)
    shared = rng.integers(0, n_documents, size=(n_queries, depth // 2))
    own_a = rng.integers(0, n_documents, size=(n_queries, depth - depth // 2))
    own_b = rng.integers(0, n_documents, size=(n_queries, depth - depth // 2))
    query = np.repeat(np.arange(n_queries), depth)

    def run(own: np.ndarray) -> CodedRun:
        docs = np.concatenate([shared, own], axis=1)
        # Drop repeated draws within a query: a run holds each document once.
        keys = np.unique(query * n_documents + docs.reshape(-1))
        q, d = keys // n_documents, keys % n_documents
        return CodedRun(q, d, rng.random(q.size).astype(np.float32))

    return run(own_a), run(own_b)


def tie_cut(ranked_pairs: list[tuple[int, float]], depth: int) -> list[tuple[int, float]]:
    """The first ``depth`` (doc, score) pairs and every later one tied in score with the last kept."""
    if len(ranked_pairs) <= depth:
        return ranked_pairs
    last = ranked_pairs[depth - 1][1]
    return ranked_pairs[:depth] + [pair for pair in ranked_pairs[depth:] if pair[1] == last]


def textbook_rrf(runs: list[dict[int, list[tuple[int, float]]]], k: float, depth: int) -> dict[int, list[tuple[int, float]]]:
    """RRF one query at a time with dicts, under the project's definition: each input cut to
    ``depth`` keeping ties with the last, tied scores sharing their mean rank, the fused scores
    ordered as float32 then by doc id and cut the same way."""
    fused = {}
    for query in runs[0].keys() | runs[1].keys():
        scores: dict[int, float] = defaultdict(float)
        for run in runs:
            kept = tie_cut(run.get(query, []), depth)
            position = 0
            while position < len(kept):
                end = position
                while end < len(kept) and kept[end][1] == kept[position][1]:
                    end += 1
                mid_rank = (position + 1 + end) / 2.0
                for doc, _ in kept[position:end]:
                    scores[doc] += 1.0 / (k + mid_rank)
                position = end
        rounded = sorted(((doc, float(np.float32(score))) for doc, score in scores.items()),
                         key=lambda item: (-item[1], item[0]))
        fused[query] = tie_cut(rounded, depth)
    return fused


def by_query(run: CodedRun) -> dict[int, list[tuple[int, float]]]:
    """Each query's (doc, score) pairs in the project's order: score descending, then doc."""
    order = np.lexsort((run.doc, -run.score, run.query))
    grouped: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for query, doc, score in zip(run.query[order].tolist(), run.doc[order].tolist(), run.score[order].tolist(),
                                 strict=True):
        grouped[query].append((doc, score))
    return grouped


def bench_fusion(args: argparse.Namespace) -> dict[str, float]:
    n_documents, depth = 100_000, 100
    run_a, run_b = synthetic_runs(args.fusion_queries, depth, n_documents, args.seed)
    query_ids = [f"q{i:06d}" for i in range(args.fusion_queries)]
    doc_ids = [f"d{i:07d}" for i in range(n_documents)]
    tables = [pl.from_arrow(run.table(query_ids, doc_ids)) for run in (run_a, run_b)]
    figures: dict[str, float] = {"rows_in": float(len(run_a) + len(run_b))}
    coded = [encode_run(t, query_ids, doc_ids, name="input") for t in tables]
    # Equal outputs first: every query's fused ranking and scores against the textbook RRF's.
    figures["textbook_rrf_s"], reference = timed(textbook_rrf, [by_query(run) for run in coded], 60.0, depth)
    fused = reciprocal_rank_fusion(coded, k=60, depth=depth, output_depth=depth)
    differing = 0
    for query in range(args.fusion_queries):
        mine = fused.query_slice(query)
        docs, scores = zip(*reference[query], strict=True) if reference.get(query) else ((), ())
        differing += int(mine.doc.tolist() != list(docs) or mine.score.tolist() != list(scores))
    print(f"  same fused rankings as the textbook RRF on all {args.fusion_queries} queries: "
          f"{'PASS' if differing == 0 else 'FAIL'} ({differing} differ)")
    if differing:
        raise SystemExit("RRF and the textbook RRF differ: timing them would compare different work")
    figures["rrf_s"] = min(timed(reciprocal_rank_fusion, coded, k=60, depth=depth, output_depth=depth)[0]
                           for _ in range(args.rounds))
    for normalization in ("minmax", "zscore"):
        figures[f"weighted_{normalization}_s"] = min(
            timed(weighted_score_fusion, coded, (0.5, 0.5), normalization=normalization, depth=depth,
                  output_depth=depth)[0] for _ in range(args.rounds))

    def end_to_end():
        inputs = [encode_run(t, query_ids, doc_ids, name="input") for t in tables]
        return reciprocal_rank_fusion(inputs, k=60, depth=depth, output_depth=depth).table(query_ids, doc_ids)

    runs = [cpu_timed(end_to_end) for _ in range(args.rounds)]
    figures["rrf_end_to_end_s"] = min(wall for _, wall, _ in runs)
    figures["rrf_end_to_end_cpu_s"] = min(cpu for cpu, _, _ in runs)
    figures["speedup_vs_textbook"] = figures["textbook_rrf_s"] / figures["rrf_s"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--fusion-queries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=100, help="queries per alternating retrieval chunk")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    os.environ.setdefault("DISABLE_TQDM", "1")
    print(f"BM25: {args.documents} documents, {args.queries} queries, top {args.depth}, {os.cpu_count()} CPUs")
    bm25 = bench_bm25(args)
    print(f"  index (CPU): bm25s {bm25['index_bm25s_s']:.2f} s, wrapper {bm25['index_wrapper_s']:.2f} s "
          f"({bm25['index_overhead']:+.1%}); {bm25['documents_per_s']:.0f} documents/s")
    print(f"  retrieve (CPU): bm25s {bm25['retrieve_bm25s_s']:.2f} s, wrapper {bm25['retrieve_wrapper_s']:.2f} s "
          f"({bm25['retrieve_overhead']:+.1%}); {bm25['queries_per_s']:.0f} queries/s, per-query p50 "
          f"{bm25['p50_ms_first_round_median_of_chunks']:.2f} ms, p95 {bm25['p95_ms_first_round_median_of_chunks']:.2f} ms")
    print(f"fusion: {args.fusion_queries} queries x 2 runs x depth {args.depth}")
    fusion = bench_fusion(args)
    print(f"  RRF {fusion['rrf_s']:.3f} s ({fusion['speedup_vs_textbook']:.1f}x the textbook dict RRF, "
          f"{fusion['textbook_rrf_s']:.2f} s); weighted min-max {fusion['weighted_minmax_s']:.3f} s, "
          f"z-score {fusion['weighted_zscore_s']:.3f} s; RRF end to end (string tables in and out) "
          f"{fusion['rrf_end_to_end_s']:.3f} s (CPU {fusion['rrf_end_to_end_cpu_s']:.3f} s)")
    targets = {
        "bm25_index_overhead_max": WRAPPER_OVERHEAD_TARGET, "bm25_retrieve_overhead_max": WRAPPER_OVERHEAD_TARGET,
        "fusion_end_to_end_seconds_max": FUSION_SECONDS_TARGET,
    }
    met = {
        "bm25_index_overhead": bm25["index_overhead"] <= WRAPPER_OVERHEAD_TARGET,
        "bm25_retrieve_overhead": bm25["retrieve_overhead"] <= WRAPPER_OVERHEAD_TARGET,
        "fusion_seconds": fusion["rrf_end_to_end_s"] < FUSION_SECONDS_TARGET,
    }
    for name, passed in met.items():
        print(f"  {name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_systems", {"benchmark": "systems", "bm25": bm25, "fusion": fusion, "targets": targets,
                                                     "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
