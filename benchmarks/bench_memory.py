"""Bounded memory at scale: encode 1,000,000 texts into a sharded table, then search it block by block.

Workload: ``--texts`` (default 1,000,000) synthetic texts encoded by :class:`SyntheticEncoder`
(a real entry-point encoder, deterministic and fast, so the benchmark measures the pipeline's
encoding and search machinery, not a model) into ``--dim``-d float32 vectors with the
pipeline's single pass (shards of ``--shard-size``), then ``--queries`` queries searched
exactly over the stored table, streamed ``doc_block_size`` rows at a time.

Measured in the same run, as the peak RSS increase over the RSS before each step:

- the sharded encode, against the reference of loading the finished card table into memory
  (``read_embeddings``: what an in-memory encode or search must hold at least);
- the streamed exact search, against the same search over the table loaded into memory.

Target: each streamed step holds at most 25% of the in-memory reference. The bounds it checks
(also in docs/encoding.md): encoding holds the table's ids and texts plus one shard of vectors,
``shard_size × native_dim × 4`` bytes a few times over (model output, card vectors, Parquet
buffers); search holds the query vectors, their running top-k (``queries × k × 12`` bytes),
one block of documents (``doc_block_size × dim × 4`` bytes, a few copies) and one block of
scores (``query_block_size × doc_block_size × 4`` bytes), plus the document ids (Python
strings, O(N) but no vectors). Ends with one JSON line.

    python benchmarks/bench_memory.py [--texts 1000000] [--dim 128] [--queries 1000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from results import record_result  # noqa: E402

from embedpyramid.config import SearchSettings, load_config  # noqa: E402
from embedpyramid.data import EncodingInputs  # noqa: E402
from embedpyramid.encode import embed_table, embedding_rows, load_encoder, read_embeddings  # noqa: E402
from embedpyramid.retrieval.level import search_embeddings  # noqa: E402
from embedpyramid.retrieval.search import exact_topk  # noqa: E402
from embedpyramid.store import ArtifactStore  # noqa: E402
from embedpyramid.usage import PeakRss  # noqa: E402

RATIO_TARGET = 0.25


class SyntheticEncoder:
    """Pseudo-embeddings: each text picks one of 65,536 random rows by its crc32 and scales it by
    the crc's high bits, so equal texts get equal vectors and the corpus is not one vector."""

    def __init__(self, dim: int = 128):
        self.rows = np.random.default_rng(0).standard_normal((65536, dim), dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        crcs = np.fromiter((zlib.crc32(text.encode()) for text in texts), dtype=np.uint32, count=len(texts))
        scale = 0.5 + (crcs >> 16).astype(np.float32) / 65536.0
        return self.rows[crcs & 0xFFFF] * scale[:, None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--shard-size", type=int, default=4096)
    parser.add_argument("--doc-block-size", type=int, default=16384)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the entry point below: bench_memory:SyntheticEncoder
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        configs = root / "configs"
        configs.mkdir()
        card = {"backend": "entry-point", "entry_point": "bench_memory:SyntheticEncoder", "options": {"dim": args.dim},
                "run": {"batch_size": 256, "shard_size": args.shard_size}}
        (configs / "models.yaml").write_text(yaml.safe_dump({"models": {"synthetic": card}}))
        (configs / "datasets.yaml").write_text(yaml.safe_dump({"datasets": {"none": {"loader": "chatterbot"}}}))
        (configs / "protocol.yaml").write_text("{}\n")
        model = load_config(configs).models["synthetic"]
        encoder = load_encoder(model)
        store = ArtifactStore(root / "data")
        documents = EncodingInputs([f"d{i:07d}" for i in range(args.texts)],
                                   [f"synthetic text {i} " + "w" * (i % 17) for i in range(args.texts)], "d" * 64)
        queries = EncodingInputs([f"q{i:05d}" for i in range(args.queries)],
                                 [f"synthetic text {i * 997}" for i in range(args.queries)], "q" * 64)

        # Warm-up on a small table: imports (torch for the search), allocator pools, the encoder.
        warm = EncodingInputs(documents.ids[:5000], documents.texts[:5000], "w" * 64)
        warm_table = embed_table(store, model, "document", warm, lambda: encoder)
        search_embeddings(embed_table(store, model, "query", queries, lambda: encoder).path, warm_table.path, 10,
                          SearchSettings(doc_block_size=args.doc_block_size))
        gc.collect()
        with PeakRss() as encode_rss:
            start = time.perf_counter()
            table = embed_table(store, model, "document", documents, lambda: encoder)
            encode_seconds = time.perf_counter() - start
        query_table = embed_table(store, model, "query", queries, lambda: encoder)
        matrix_bytes = embedding_rows(table.path) * args.dim * 4
        print(f"encoded {args.texts:,} texts in {encode_seconds:.1f} s ({args.texts / encode_seconds:,.0f}/s), "
              f"{table.metadata['shards']['count']} shards; table {table.path.stat().st_size / 2**20:.0f} MiB "
              f"on disk, vectors {matrix_bytes / 2**20:.0f} MiB in memory")

        settings = SearchSettings(doc_block_size=args.doc_block_size, query_block_size=1024)
        gc.collect()
        with PeakRss() as search_rss:
            streamed = search_embeddings(query_table.path, table.path, 10, settings)
        gc.collect()
        with PeakRss() as load_rss:
            ids, vectors = read_embeddings(table.path)
            _, query_vectors = read_embeddings(query_table.path)
            start = time.perf_counter()
            in_memory = exact_topk(query_vectors, vectors, 10, doc_block_size=args.doc_block_size)
            in_memory_seconds = time.perf_counter() - start
        same = streamed.run.column("doc_id").to_pylist() == [ids[i] for i in in_memory[1].reshape(-1)]
        del ids, vectors, query_vectors

    reference = load_rss.increase_bytes
    encode_ratio, search_ratio = encode_rss.increase_bytes / reference, search_rss.increase_bytes / reference
    mib = 2**20
    print(f"peak RSS increase: sharded encode {encode_rss.increase_bytes / mib:.0f} MiB, streamed search "
          f"{search_rss.increase_bytes / mib:.0f} MiB, table loaded + searched in memory {reference / mib:.0f} MiB "
          f"(reference) -> encode {encode_ratio:.3f}x, search {search_ratio:.3f}x (target <= {RATIO_TARGET}x each)")
    print(f"streamed search {streamed.seconds:.1f} s ({streamed.queries_per_second:.0f} QPS) vs in memory "
          f"{in_memory_seconds:.1f} s: {streamed.seconds / in_memory_seconds:.2f}x; same run: {same}")
    figures = {
        "benchmark": "bounded_memory", "texts": args.texts, "dim": args.dim, "queries": args.queries,
        "shard_size": args.shard_size, "doc_block_size": args.doc_block_size, "cpus": os.cpu_count(),
        "encode_seconds": round(encode_seconds, 2), "matrix_mib": round(matrix_bytes / mib, 1),
        "encode_rss_increase_mib": round(encode_rss.increase_bytes / mib, 1),
        "search_rss_increase_mib": round(search_rss.increase_bytes / mib, 1),
        "in_memory_rss_increase_mib": round(reference / mib, 1),
        "encode_over_in_memory": round(encode_ratio, 4), "search_over_in_memory": round(search_ratio, 4),
        "streamed_search_seconds": round(streamed.seconds, 2), "in_memory_search_seconds": round(in_memory_seconds, 2),
        "same_run": same, "seconds": round(time.perf_counter() - started, 1),
    }
    targets = {"encode_over_in_memory": RATIO_TARGET, "search_over_in_memory": RATIO_TARGET, "texts_min": 1_000_000}
    met = {"encode_over_in_memory": encode_ratio <= RATIO_TARGET, "search_over_in_memory": search_ratio <= RATIO_TARGET,
           "texts": args.texts >= 1_000_000, "same_run": same}
    for name, passed in met.items():
        print(f"  {name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_memory", {"benchmark": "bounded_memory", "figures": figures, "targets": targets,
                                                    "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
