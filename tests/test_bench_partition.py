"""benchmarks/bench_partition.py in one round: a cold run_pipeline over bench_peers' data cut to
30 documents, each Dagster run and the encode timed. Its figures are not judged here, only that
it ran on the real runner and graph and that the pipeline's nDCG@10 equals the bare job's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.heavy
def test_bench_partition_one_round_times_every_run_of_an_equal_result():
    done = subprocess.run([sys.executable, "-W", "ignore", str(REPO / "benchmarks" / "bench_partition.py"), "--rounds", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ndcg_max_abs_difference"] <= 1e-5
    figures = result["figures"]
    assert 0 < figures["encode_cpu_s"] < figures["partition_run_cpu_s"] < figures["run_pipeline_cpu_s"]
    assert figures["freeze_cpu_s"] > 0 and figures["summary_cpu_s"] > 0
    assert len(result["rounds"]) == 1 and set(result["met"]) == {"overhead_cpu_s"}
