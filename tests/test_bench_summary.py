"""benchmarks/bench_summary.py in its smallest mode: one card on each of two datasets (so a clone
of the seed dataset takes part), one size, one repeat: the seed run, the new card's evaluation,
the summary runs and four ticks take a few minutes on a loaded machine. Its figures are not
judged here, only that it ran its checks on a real graph and instance and that they held."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_bench_summary_small_mode_runs_its_checks():
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(REPO / "benchmarks" / "bench_summary.py"),
         "--partitions", "2", "--cards", "1", "--repeats", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"storage", "rows", "growth_exponents", "seconds_at_10000_extrapolated", "targets",
                           "load_average", "met"}
    assert result["storage"] == "cli"
    assert [row["partitions"] for row in result["rows"]] == [2]
    for row in result["rows"]:
        assert row["checks"] and all(row["checks"].values()), row["checks"]
        assert row["tick_steady_seconds"] > 0 and row["summary_seconds"] > 0
    assert result["met"]["checks"]
    assert {"tick_steady_seconds_at_largest", "tick_after_seconds_at_largest", "summary_seconds_at_largest",
            "only_seed_comparisons_need_work"} <= set(result["met"])
