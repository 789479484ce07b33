"""Pipeline overhead: the Dagster graph vs a bare encode + exact search of the same texts.

In one process: every model is loaded once to warm imports and file caches; then, for a few
rounds, the bare path (load each model, encode the frozen queries and documents in the same
batches, one exact top-k) and the pipeline cold (empty data folder and instance) are timed
alternately, and the minimum of each is compared; then the pipeline warm (the last folder
again). Prints the figures and ends with one JSON line:
targets pipeline cold <= 1.15 x bare, warm <= 5% of cold.

    python benchmarks/bench_pipeline.py [--configs configs] [--rounds 3]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402

from embedpyramid.config import load_config  # noqa: E402
from embedpyramid.data import encoding_inputs, freeze_dataset, load_configured_dataset  # noqa: E402
from embedpyramid.encode import encode_texts, load_encoder  # noqa: E402
from embedpyramid.search import exact_topk  # noqa: E402
from pipelines.runner import run_pipeline  # noqa: E402


def bare_seconds(config, frozen_by_dataset) -> float:
    """Load each model, encode the texts in the same length-sorted batches, search; no Dagster,
    no cache, no Parquet."""
    start = time.perf_counter()
    for model in config.models.values():
        encoder = load_encoder(model)
        for frozen in frozen_by_dataset.values():
            queries, documents = (encode_texts(encoder, model, encoding_inputs(frozen, kind).texts, kind)[0]
                                  for kind in ("query", "document"))
            exact_topk(queries, documents, config.protocol.depth)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=str(Path(__file__).resolve().parent.parent / "configs"))
    parser.add_argument("--rounds", type=int, default=3, help="bare/cold pairs; the minimum of each is compared")
    args = parser.parse_args()
    config = load_config(args.configs)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        frozen = {name: freeze_dataset(name, load_configured_dataset(config, name), root / "frozen" / name)
                  for name in config.datasets}
        for model in config.models.values():  # warm-up: imports, weights in the page cache
            load_encoder(model).encode(["warm up"], "query")
        bare_samples, cold_samples = [], []
        for round_index in range(args.rounds):  # alternate, so drift on a shared machine hits both
            bare_samples.append(bare_seconds(config, frozen))
            instance, data = dg.DagsterInstance.ephemeral(), root / f"data-{round_index}"
            start = time.perf_counter()
            cold_report = run_pipeline(config.directory, data, instance=instance, log=lambda _: None)
            cold_samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        warm_report = run_pipeline(config.directory, data, instance=instance, log=lambda _: None)
        warm = time.perf_counter() - start
    bare, cold = min(bare_samples), min(cold_samples)
    if cold_report.failures or warm_report.failures:
        raise SystemExit(f"pipeline failed: {cold_report.failures + warm_report.failures}")
    texts = sum(f.manifest["counts"]["queries"] + f.manifest["counts"]["documents"] for f in frozen.values())
    figures = {
        "models": len(config.models), "datasets": len(config.datasets), "texts_per_model": texts,
        "rounds": args.rounds, "bare_samples_s": [round(x, 3) for x in bare_samples],
        "cold_samples_s": [round(x, 3) for x in cold_samples],
        "bare_encode_search_s": round(bare, 3), "pipeline_cold_s": round(cold, 3), "pipeline_warm_s": round(warm, 3),
        "cold_over_bare": round(cold / bare, 3), "warm_over_cold": round(warm / cold, 4),
        "encoded_tables_cold": len(cold_report.encoded), "encoded_tables_warm": len(warm_report.encoded),
    }
    targets = {"cold_over_bare": 1.15, "warm_over_cold": 0.05}
    met = {name: figures[name] <= limit for name, limit in targets.items()}
    print(f"bare encode + search: {bare:.2f} s   pipeline cold: {cold:.2f} s ({cold / bare:.2f}x, target <= 1.15x)   "
          f"warm rerun: {warm:.2f} s ({100 * warm / cold:.1f}% of cold, target <= 5%)")
    print(json.dumps({"benchmark": "pipeline_overhead", "figures": figures, "targets": targets, "met": met}))


if __name__ == "__main__":
    main()
