"""benchmarks/README.md is what benchmarks/readme.py writes from the results files, so it cannot go
stale; every benchmark script records the JSON line it ends with (benchmarks/results.py), under its
own name; every results line says when and where it was measured."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"


def load(name: str):
    """A module of benchmarks/ by file, under a name of its own (``readme`` is also the tests'
    fixture module)."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_what_the_generator_writes():
    generator = load("readme")
    assert (BENCHMARKS / "README.md").read_text(encoding="utf-8") == generator.render(), (
        "benchmarks/README.md is stale: run `python benchmarks/readme.py`")


def test_every_benchmark_has_a_row_and_every_row_a_script():
    generator = load("readme")
    rows = [benchmark.script for benchmark in generator.BENCHMARKS]
    assert sorted(rows) == generator.scripts() and len(rows) == len(set(rows))


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name]


@pytest.mark.parametrize("script", sorted(path.name for path in BENCHMARKS.glob("*.py")
                                          if path.name not in {"results.py", "readme.py"}))
def test_every_script_records_the_json_line_it_ends_with(script):
    tree = ast.parse((BENCHMARKS / script).read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "results"]
    assert any(alias.name == "record_result" for node in imports for alias in node.names), script
    recorded = calls(tree, "record_result")
    assert recorded and {call.args[0].value for call in recorded} == {Path(script).stem}, (
        f"{script} records under another name than its own")
    # The last JSON line the script prints is the one it records.
    printed = [call for call in calls(tree, "print")
               if call.args and isinstance(call.args[0], ast.Call) and getattr(call.args[0].func, "attr", None) == "dumps"]
    last = max(printed, key=lambda call: call.lineno)
    assert calls(last, "record_result"), f"{script}: its final JSON line (line {last.lineno}) is not recorded"


def test_record_appends_the_payload_with_where_and_when(tmp_path, monkeypatch):
    results = load("results")
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    payload = {"benchmark": "demo", "figures": {"seconds": 1.5}, "met": {"seconds": True}}
    assert results.record_result("bench_demo", payload) is payload
    results.record_result("bench_demo", {**payload, "figures": {"seconds": 1.25}})
    lines = [json.loads(line) for line in (tmp_path / "bench_demo.jsonl").read_text().splitlines()]
    assert [line["figures"]["seconds"] for line in lines] == [1.5, 1.25]
    assert set(lines[0]) == {*payload, *results.RUN_KEYS}
    assert lines[0]["machine"]["cpus"] >= 1 and lines[0]["machine"]["cpu"]
    assert lines[0]["date"].endswith("+00:00") and lines[0]["python"].count(".") == 2
    with pytest.raises(ValueError, match="date"):
        results.record_result("bench_demo", {"date": "today"})


def test_every_results_line_says_when_and_where():
    for path in sorted((BENCHMARKS / "results").glob("*.jsonl")):
        assert (BENCHMARKS / f"{path.stem}.py").is_file(), f"{path.name} belongs to no script"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            row = json.loads(line)
            assert row["date"][:4].isdigit() and row["machine"]["cpu"], f"{path.name}:{number}"


def test_the_table_shows_the_latest_line(tmp_path):
    generator = load("readme")
    line = {"benchmark": "resume", "figures": {"resumed_over_reference": 0.5, "fraction_left": 0.49,
                                               "interrupted_plus_resumed_over_reference": 1.01, "bit_identical": True},
            "met": {"resumed_over_reference": True, "bit_identical": False},
            "date": "2030-01-02T03:04:05+00:00", "machine": {"cpu": "Test CPU", "cpus": 4}, "argv": ["--rounds", "2"]}
    (tmp_path / "bench_resume.jsonl").write_text(json.dumps({**line, "date": "2029-01-01T00:00:00+00:00"}) + "\n"
                                                 + json.dumps(line) + "\n")
    text = generator.render(tmp_path)
    row = next(row for row in text.splitlines() if row.startswith("| `bench_resume.py`"))
    assert "rerun 0.5× the reference" in row and "bit-identical: yes" in row
    assert "not met: bit_identical" in row and "Test CPU, 4 CPUs" in row and "2030-01-02 |" in row
    assert "run as `bench_resume.py --rounds 2`" in text
    assert "| `bench_ann.py` |" in text and "not yet recorded" in text
