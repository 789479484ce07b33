"""Remote embedding API throughput: the http backend against a local OpenAI-compatible stub.

Workload: ``--texts`` (default 4,000) texts encoded at batch ``--batch-size`` through the
``http`` backend (:class:`embedpyramid.encode.http_api.HttpEncoder`, via the pipeline's sharded
single pass: answer checks, the on-disk response cache, Parquet tables) against
``tests/fixtures/stub_server.py`` serving ``--dim``-d vectors on 127.0.0.1, with a simulated
API latency of ``--latency-ms`` per request. Measured in the same run:

- the reference: the same batches POSTed by the bare shared client
  (:class:`embedpyramid.http.JsonClient`), decoding the JSON and nothing else;
- the pipeline, cold (every text requested) and warm (the tables deleted, every answer from
  the response cache: no request at all).

The pipeline's raw vectors, cold and cached, must equal the bare client's decoded vectors bit
for bit, or the script stops without reporting the timings.

Targets: cold pipeline ≤ 1.5 × the bare client (the cost of checking and caching every
answer), and the cached rerun makes zero requests and takes ≤ 0.5 × the cold run.
Ends with one JSON line.

    python benchmarks/bench_api.py [--texts 4000] [--batch-size 64] [--dim 256] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from results import record_result  # noqa: E402
from stub_server import Reply, StubServer  # noqa: E402

from embedpyramid.config import load_config  # noqa: E402
from embedpyramid.data import EncodingInputs  # noqa: E402
from embedpyramid.encode import embed_table, load_encoder, read_embeddings, table_path  # noqa: E402
from embedpyramid.http import JsonClient  # noqa: E402
from embedpyramid.store import ArtifactStore  # noqa: E402

COLD_TARGET = 1.5
WARM_TARGET = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=4_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    rows = np.random.default_rng(0).standard_normal((1024, args.dim)).round(6).tolist()

    def handler(request):
        texts = request.json["input"]
        data = [{"index": i, "embedding": rows[hash(text) % len(rows)]} for i, text in enumerate(texts)]
        tokens = sum(len(text.split()) for text in texts)
        return Reply(json={"data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}},
                     delay=args.latency_ms / 1000)

    texts = [f"benchmark text {i} about {'embeddings ' * (i % 9)}" for i in range(args.texts)]
    inputs = EncodingInputs([f"t{i:06d}" for i in range(args.texts)], texts, "a" * 64)
    os.environ["BENCH_API_KEY"] = "sk-bench"
    with tempfile.TemporaryDirectory() as scratch, StubServer(handler) as server:
        root = Path(scratch)
        (root / "configs").mkdir()
        card = {"backend": "http", "source": {"url": server.url + "/v1/embeddings", "model": "stub"},
                "api": {"key_env": "BENCH_API_KEY", "price_per_million_tokens": 0.02},
                "run": {"batch_size": args.batch_size}}
        (root / "configs" / "models.yaml").write_text(yaml.safe_dump({"models": {"api": card}}))
        (root / "configs" / "datasets.yaml").write_text(yaml.safe_dump({"datasets": {"none": {"loader": "chatterbot"}}}))
        (root / "configs" / "protocol.yaml").write_text("{}\n")
        model = load_config(root / "configs").models["api"]

        client = JsonClient(card["source"]["url"], headers={"Authorization": "Bearer sk-bench"})
        start = time.perf_counter()
        answers = [client.post({"model": "stub", "input": texts[offset : offset + args.batch_size]}, context="bare")
                   for offset in range(0, len(texts), args.batch_size)]
        bare_vectors = np.asarray([item["embedding"] for answer in answers
                                   for item in sorted(answer["data"], key=lambda item: item["index"])], np.float32)
        bare = time.perf_counter() - start

        store = ArtifactStore(root / "data")
        requests_before = len(server.requests)
        start = time.perf_counter()
        embed_table(store, model, "document", inputs, lambda: load_encoder(model))
        cold = time.perf_counter() - start
        cold_requests = len(server.requests) - requests_before
        cold_vectors = read_embeddings(table_path(store, model, "document", inputs.table_sha, raw=True))[1]
        for raw in (False, True):
            table_path(store, model, "document", inputs.table_sha, raw=raw).unlink()
        requests_before = len(server.requests)
        start = time.perf_counter()
        warm_table = embed_table(store, model, "document", inputs, lambda: load_encoder(model))
        warm = time.perf_counter() - start
        warm_requests = len(server.requests) - requests_before
        warm_vectors = read_embeddings(table_path(store, model, "document", inputs.table_sha, raw=True))[1]
    same = np.array_equal(cold_vectors, bare_vectors) and np.array_equal(warm_vectors, bare_vectors)
    print(f"pipeline vectors (cold and cached) equal to the bare client's: {'PASS' if same else 'FAIL'}")
    if not same:
        raise SystemExit("the pipeline's vectors differ from the bare client's: the timings would compare different work")

    cold_ratio, warm_ratio = cold / bare, warm / cold
    print(f"{args.texts} texts at batch {args.batch_size}, {args.dim}-d, {args.latency_ms:.0f} ms per request: bare "
          f"client {bare:.2f} s ({args.texts / bare:,.0f} texts/s, reference), pipeline cold {cold:.2f} s "
          f"({args.texts / cold:,.0f} texts/s, {cold_requests} requests) = {cold_ratio:.2f}x (target <= {COLD_TARGET}x); "
          f"cached rerun {warm:.2f} s, {warm_requests} requests = {warm_ratio:.2f}x cold (target <= {WARM_TARGET}x)")
    figures = {"texts": args.texts, "batch_size": args.batch_size, "dim": args.dim, "latency_ms": args.latency_ms,
               "bare_s": round(bare, 3), "cold_s": round(cold, 3), "warm_s": round(warm, 3),
               "cold_texts_per_second": round(args.texts / cold, 1), "bare_texts_per_second": round(args.texts / bare, 1),
               "cold_requests": cold_requests, "warm_requests": warm_requests,
               "cold_over_bare": round(cold_ratio, 3), "warm_over_cold": round(warm_ratio, 3),
               "texts_from_cache_warm": warm_table.metadata["api_usage"]["texts_cached"]}
    targets = {"cold_over_bare": COLD_TARGET, "warm_over_cold": WARM_TARGET, "warm_requests": 0}
    met = {"same_vectors": same, "cold_over_bare": cold_ratio <= COLD_TARGET, "warm_over_cold": warm_ratio <= WARM_TARGET,
           "warm_requests": warm_requests == 0}
    for name, passed in met.items():
        print(f"  {name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_api", {"benchmark": "api_throughput", "figures": figures, "targets": targets,
                                                 "met": met})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
