"""benchmarks/bench_scale.py in its smallest mode: 500 documents and 100 queries through the whole
default pyramid in a child process, its checks against FAISS and pytrec_eval, and the run killed
with SIGKILL at L2 and resumed. Its figures are not judged here (one size has no growth exponent,
and at 500 documents the process's floor is the whole peak RSS), only that the script measured
every level, that its references agreed and that the resume held. The static model is distilled
once per machine (about a minute on 2 cores) into the script's cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.heavy
def test_bench_scale_small_mode_measures_every_level_and_resumes_after_kill(tmp_path):
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(REPO / "benchmarks" / "bench_scale.py"), "--documents", "500",
         "--queries", "100", "--sample-queries", "50", "--resume-levels", "L2", "--scratch", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"benchmark", "figures", "targets", "met"}
    (size,) = result["figures"]["sizes"]
    assert size["documents"] == 500 and size["corpus"]["queries"] == 100
    assert {"data", "encode", "L1", "L2", "L4", "L5", "efficiency", "summary"} <= set(size["levels"])
    assert {"L4:ann_hnsw32", "L1:normalization_price", "L2:exact_topk"} <= set(size["levels"])
    assert all(level["cpu_seconds"] > 0 and level["peak_rss_bytes"] > 0 for name, level in size["levels"].items()
               if name != "orchestration")
    assert result["met"]["equal_outputs"], size["checks"]
    resume = result["figures"]["resume"]
    assert resume["killed_at"] == ["L2"] and resume["killed_by_sigkill"]
    assert resume["steps_started_again"] == [] and resume["final_metrics_equal_uninterrupted"]
    assert result["met"]["resumes"]
