"""The fixed cost of one (model, dataset) partition beyond its encode, on a 30-document dataset.

The data and the config are ``bench_peers.py``'s: chatterbot-en cut to ``--documents`` replies (the
questions whose replies fill two thirds of them, every reply given to them included: 20 queries
at 30 documents), all-MiniLM-L6-v2 (batch 64, 2 threads, a 1-query latency probe), the
retrieval-only config (no L4, L5 or L6; 39 resamples). What no config switch turns off — L1
norms, pair sanity and the normalization price, efficiency — runs as a user meets it.

Equal outputs first: every query's nDCG@10 of the pipeline must equal the bare job's
(``bench_peers.py --side bare``: model.encode, one matrix product, pytrec_eval) to 1e-5, or the
script stops before it reports anything.

Then, in this process (imports and the model's files warm: one untimed run first), ``--rounds``
cold runs of ``pipelines.runner.run_pipeline`` on fresh data folders, each with its own SQLite
run history, as ``embedpyramid run`` does them. Measured with ``time.process_time`` (CPU seconds of
every thread of the process): each Dagster run the runner launches (the dataset's freeze, the
partition's ``evaluate`` run, the summary), and inside the partition's run the encode itself —
loading the model, ``encode_batches`` over the shards (the direction check is part of their
forward pass).
The partition's overhead is its run's CPU minus that encode: the Dagster steps and their
bookkeeping, the Parquet tables, L1, the metrics, efficiency's latency probe. The fewest CPU
seconds over the rounds count. Target: overhead <= 5.0 CPU-s. Prints the figures, PASS/FAIL and
ONE JSON line.

    python benchmarks/bench_partition.py [--documents 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_peers  # noqa: E402
from results import record_result  # noqa: E402

import embedpyramid.encode.shards as encode_shards  # noqa: E402
import pipelines.automation as automation  # noqa: E402
import pipelines.runner as runner  # noqa: E402
import pipelines.session as pipeline_session  # noqa: E402
import resources.project as project_resources  # noqa: E402

TARGET_OVERHEAD_CPU_S = 5.0


class CpuLedger:
    """CPU seconds (``time.process_time``) spent inside the pipeline's Dagster runs, per run, and
    inside the encode, while :meth:`watching`."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str, float]] = []
        self.encode = 0.0

    def _counting_encode(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.encode += time.process_time() - start
        return counted

    @contextmanager
    def watching(self) -> Iterator[CpuLedger]:
        originals = (pipeline_session.Session.execute, project_resources.load_encoder, encode_shards.encode_batches)
        execute = pipeline_session.Session.execute
        ledger = self

        def timed_execute(session: pipeline_session.Session, job: str, assets: Any, partition: Any, tags: Any,
                          label: str | None = None) -> Any:
            start = time.process_time()
            try:
                return execute(session, job, assets, partition, tags, label)
            finally:
                ledger.runs.append((job, str(partition or ""), time.process_time() - start))

        pipeline_session.Session.execute = timed_execute  # type: ignore[method-assign]
        project_resources.load_encoder = self._counting_encode(originals[1])
        encode_shards.encode_batches = self._counting_encode(originals[2])
        try:
            yield self
        finally:
            pipeline_session.Session.execute, project_resources.load_encoder, encode_shards.encode_batches = originals


def one_run(configs: Path, data: Path) -> dict[str, float]:
    """A cold ``run_pipeline`` on ``data``: CPU seconds of the whole call, of each Dagster run, of
    the encode inside the partition's run, and the overhead beyond it."""
    ledger = CpuLedger()
    start = time.process_time()
    with ledger.watching():
        report = runner.run_pipeline(configs, data, log=lambda _line: None)
    total = time.process_time() - start
    if report.failures:
        raise SystemExit(f"the pipeline failed: {report.failures}")
    (partition_run,) = [cpu for job, partition, cpu in ledger.runs if job == automation.evaluation_job.name]
    return {
        "run_pipeline_cpu_s": total,
        "freeze_cpu_s": sum(cpu for job, _, cpu in ledger.runs if job == automation.refresh_datasets_job.name),
        "summary_cpu_s": sum(cpu for job, _, cpu in ledger.runs if job == automation.summary_job.name),
        "partition_run_cpu_s": partition_run,
        "encode_cpu_s": ledger.encode,
        "overhead_cpu_s": partition_run - ledger.encode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-partition-") as scratch_name:
        scratch = Path(scratch_name)
        beir = scratch / "beir"
        counts = bench_peers.build_beir_folder(beir, args.documents)
        configs = bench_peers.write_configs(scratch / "configs", beir)

        bare_result = scratch / "bare.json"
        subprocess.run([sys.executable, str(Path(bench_peers.__file__).resolve()), "--side", "bare", "--beir", str(beir),
                        "--result", str(bare_result)], check=True, env={**os.environ, **bench_peers.ENV})
        bare = json.loads(bare_result.read_text())["ndcg_at_10"]

        warm_up = scratch / "data-warm-up"
        one_run(configs, warm_up)
        pipeline, _, _ = bench_peers.pipeline_outputs(warm_up)
        difference, query = bench_peers.largest_difference(pipeline, bare)
        if difference > bench_peers.TOLERANCE:
            print(f"nDCG@10 differs from the bare job's by {difference:.3g} at {query}: nothing timed", file=sys.stderr)
            raise SystemExit(2)

        rounds = [one_run(configs, scratch / f"data-{index}") for index in range(args.rounds)]
    best = {name: round(min(figures[name] for figures in rounds), 3) for name in rounds[0]}
    met = best["overhead_cpu_s"] <= TARGET_OVERHEAD_CPU_S
    print(f"{counts['documents']} documents, {counts['queries']} queries; nDCG@10 equal to the bare job's on every "
          f"query (max |diff| {difference:.1e}); fewest CPU seconds of {args.rounds} cold runs:")
    print(f"  the partition's run {best['partition_run_cpu_s']:.2f} CPU-s = encode {best['encode_cpu_s']:.2f} "
          f"(model load, batches, direction check) + overhead {best['overhead_cpu_s']:.2f}; target overhead <= "
          f"{TARGET_OVERHEAD_CPU_S} CPU-s: {'PASS' if met else 'FAIL'}")
    print(f"  beside it: the dataset's freeze {best['freeze_cpu_s']:.2f}, the summary {best['summary_cpu_s']:.2f}, "
          f"the whole run_pipeline call {best['run_pipeline_cpu_s']:.2f} CPU-s")
    print(json.dumps(record_result("bench_partition", {
        "benchmark": "partition_overhead", "counts": counts, "ndcg_max_abs_difference": difference,
        "figures": best, "rounds": rounds, "targets": {"overhead_cpu_s": TARGET_OVERHEAD_CPU_S},
        "met": {"overhead_cpu_s": met}})))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
