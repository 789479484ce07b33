"""Where the benchmarks' figures live: each script appends the JSON line it ends with to
``benchmarks/results/<script>.jsonl``, with when, where and from which commit it ran, and
``benchmarks/readme.py`` writes ``benchmarks/README.md`` (the latest figure of each) from those
files. A figure is never copied into prose by hand, so it cannot outlive the code it measured.

``EMBEDPYRAMID_BENCHMARK_RESULTS`` names another folder for the results (the tests set it, so a
test that runs a benchmark in its smallest mode records nothing here).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RESULTS_ENV = "EMBEDPYRAMID_BENCHMARK_RESULTS"
RUN_KEYS = ("date", "machine", "python", "git", "git_dirty", "argv")


def results_folder() -> Path:
    """``$EMBEDPYRAMID_BENCHMARK_RESULTS`` when set, else ``benchmarks/results/``."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)


def cpu_model() -> str:
    """The CPU's model name as ``/proc/cpuinfo`` gives it (the platform's name for it elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state() -> tuple[str | None, bool | None]:
    """The checkout's commit and whether tracked files differ from it; (None, None) outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()

    try:
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, None


def record_result(benchmark: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Append ``payload`` — a benchmark's final JSON line — to ``<results>/<benchmark>.jsonl`` with
    the UTC date, the machine (CPU model, logical CPUs), the Python version, the git commit (and
    whether the checkout had uncommitted changes) and the script's arguments. Returns ``payload``
    unchanged, so the script prints what it recorded."""
    clash = sorted(set(RUN_KEYS) & payload.keys())
    if clash:
        raise ValueError(f"{benchmark}: the payload uses {clash}, which record_result() adds itself; rename them")
    commit, dirty = git_state()
    line = {**payload,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpu": cpu_model(), "cpus": os.cpu_count()},
            "python": platform.python_version(),
            "git": commit, "git_dirty": dirty,
            "argv": sys.argv[1:]}
    folder = results_folder()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{benchmark}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return payload
