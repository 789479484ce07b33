"""Resumable encoding: an encode interrupted halfway resumes from its shards, bit-identically.

Workload: the documents of the default dataset (chatterbot-en, 870 texts) encoded with the
real all-MiniLM-L6-v2 card in shards of ``--shard-size`` texts. Measured in the same run, with
the model loaded once beforehand:

- the reference: one uninterrupted encode (seconds ``T``);
- an encode interrupted after half of the shards (the model raises there, as a kill would
  stop it), then the rerun that resumes it (seconds ``R``).

The two alternate for ``--rounds`` rounds (a shared machine's drift hits both) and the minima
are compared.

Targets: the resumed tables are bit-identical to the reference (content hash and vector bytes);
the rerun encodes exactly the texts that were left (counted at the model), and ``R / T`` stays
within 0.15 of the fraction left; interrupted + resumed together cost at most 1.15 × ``T``. The
time ratios are wall clock: on a busy machine a 64-text shard takes from 2 to 10 s, so they need
quiet; the text count does not. Ends with one JSON line.

    python benchmarks/bench_resume.py [--configs configs] [--shard-size 64]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from results import record_result

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from embedpyramid.config import load_config  # noqa: E402
from embedpyramid.data import encoding_inputs, freeze_dataset, load_configured_dataset  # noqa: E402
from embedpyramid.encode import embed_table, load_encoder, table_path  # noqa: E402
from embedpyramid.hashing import sha256_table  # noqa: E402
from embedpyramid.store import ArtifactStore, read_table  # noqa: E402

SLACK = 0.15


class Interrupted(Exception):
    """Raised by :class:`StopsAfter` where a kill would have stopped the encode."""


class StopsAfter:
    """The card's real encoder, stopped after ``limit`` texts of the single pass; ``encoded[0]``
    counts the texts it encoded (shared with its stripped form)."""

    def __init__(self, encoder, limit: float, encoded: list[int] | None = None):
        self.encoder, self.limit, self.encoded = encoder, limit, encoded if encoded is not None else [0]
        self.description = encoder.description

    def encode(self, texts, kind):
        if self.encoded[0] >= self.limit:
            raise Interrupted
        self.encoded[0] += len(texts)
        return self.encoder.encode(texts, kind)

    def token_counts(self, texts):
        return self.encoder.token_counts(texts)

    def without_normalize_layer(self):
        stripped = self.encoder.without_normalize_layer()
        return self if stripped is self.encoder else StopsAfter(stripped, self.limit, self.encoded)

    def measure_directions(self):
        return self.encoder.measure_directions()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=str(Path(__file__).resolve().parent.parent / "configs"))
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--shard-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    config = load_config(args.configs)
    base = config.models[args.model]
    # Run settings are not hashed: a different shard size is the same card.
    model = dataclasses.replace(base, card=base.card.model_copy(
        update={"run": base.card.run.model_copy(update={"shard_size": args.shard_size})}))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset = next(iter(config.datasets))
        frozen = freeze_dataset(dataset, load_configured_dataset(config, dataset), root / "frozen")
        inputs = encoding_inputs(frozen, "document")
        encoder = load_encoder(model)
        encoder.encode(["warm up"], "document")
        shards = math.ceil(len(inputs.ids) / args.shard_size)
        done_texts = (shards // 2) * args.shard_size

        samples: dict[str, list[float]] = {"reference": [], "interrupted": [], "resumed": []}
        for round_index in range(args.rounds):
            whole = ArtifactStore(root / f"whole-{round_index}")
            start = time.perf_counter()
            embed_table(whole, model, "document", inputs, lambda: encoder)
            samples["reference"].append(time.perf_counter() - start)

            resumed_store = ArtifactStore(root / f"resumed-{round_index}")
            start = time.perf_counter()
            with contextlib.suppress(Interrupted):
                embed_table(resumed_store, model, "document", inputs, lambda: StopsAfter(encoder, done_texts))
            samples["interrupted"].append(time.perf_counter() - start)
            counted = StopsAfter(encoder, math.inf)
            start = time.perf_counter()
            table = embed_table(resumed_store, model, "document", inputs, lambda counted=counted: counted)
            samples["resumed"].append(time.perf_counter() - start)
            reencoded = counted.encoded[0]
        pairs = [[read_table(table_path(store, model, "document", inputs.table_sha, raw=raw))
                  for store in (resumed_store, whole)] for raw in (False, True)]
        identical = all(sha256_table(mine) == sha256_table(theirs) for mine, theirs in pairs)
        vectors_equal = all(mine.column("vector").combine_chunks().flatten().to_numpy().tobytes()
                            == theirs.column("vector").combine_chunks().flatten().to_numpy().tobytes()
                            for mine, theirs in pairs)
    reference, interrupted, resumed = (min(samples[name]) for name in ("reference", "interrupted", "resumed"))

    left = 1 - done_texts / len(inputs.ids)
    # The rerun encodes the texts left (the direction check is part of their forward pass).
    expected_texts = len(inputs.ids) - done_texts
    ratio, total = resumed / reference, (interrupted + resumed) / reference
    print(f"{args.model}: {len(inputs.ids)} documents in {shards} shards of {args.shard_size}; uninterrupted "
          f"{reference:.2f} s (reference); interrupted after {shards // 2} shards {interrupted:.2f} s, resumed "
          f"{resumed:.2f} s = {ratio:.2f}x the reference for {left:.2f} of the texts left "
          f"({table.metadata['shards']['resumed']} shards reused, {reencoded} texts encoded for the "
          f"{expected_texts} expected); interrupted + resumed {total:.2f}x; "
          f"bit-identical: {identical and vectors_equal}")
    figures = {"model": args.model, "documents": len(inputs.ids), "shards": shards, "shard_size": args.shard_size,
               "rounds": args.rounds, **{f"{name}_samples_s": [round(x, 2) for x in values] for name, values in samples.items()},
               "reference_s": round(reference, 3), "interrupted_s": round(interrupted, 3),
               "resumed_s": round(resumed, 3), "resumed_over_reference": round(ratio, 3),
               "fraction_left": round(left, 3), "interrupted_plus_resumed_over_reference": round(total, 3),
               "shards_reused": table.metadata["shards"]["resumed"], "texts_encoded_by_rerun": reencoded,
               "texts_left": expected_texts, "bit_identical": identical and vectors_equal}
    targets = {"resumed_over_reference_max": round(left + SLACK, 3), "interrupted_plus_resumed_over_reference": 1 + SLACK}
    met = {"resumed_over_reference": ratio <= left + SLACK, "interrupted_plus_resumed": total <= 1 + SLACK,
           "rerun_encodes_only_what_was_left": reencoded == expected_texts,
           "bit_identical": identical and vectors_equal}
    for name, passed in met.items():
        print(f"  {name}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_resume", {"benchmark": "resume", "figures": figures, "targets": targets, "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
