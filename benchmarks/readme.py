"""Write ``benchmarks/README.md``: one row per benchmark script — what it measures (the first
paragraph of its docstring), its targets (worded here, their numbers read from the script's own
constants), and its latest figure with the machine and the date, read from the last line of
``benchmarks/results/<script>.jsonl`` (each script appends one when it ends, see ``results.py``).

    python benchmarks/readme.py            # writes benchmarks/README.md
    python benchmarks/readme.py --check    # exits 1, saying so, when the file is not what it would write
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results"
NOT_BENCHMARKS = {"results.py", "readme.py"}
CARRIED_OVER = "README before the docs site"


@dataclass(frozen=True)
class Figure:
    """One figure of a results line: ``label`` with ``{}`` where the value goes, and where the value
    is (``path``: keys and list indices, dotted; ``-1`` is the last item, ``*`` every value, shown
    joined by " / "). A figure the line does not hold is left out."""

    label: str
    path: str
    percent: bool = False


@dataclass(frozen=True)
class Benchmark:
    """A script of ``benchmarks/``, its targets (``str.format`` fields name the script's module
    constants, e.g. ``{COLD_TARGET}``) and the figures its row shows."""

    script: str
    targets: str
    figures: tuple[Figure, ...]


BENCHMARKS = (
    Benchmark("bench_pipeline.py",
              "cold ≤ 1.15× the bare core; warm rerun ≤ 5 % of cold; one encode pass per text; warm `run` and "
              "`status` ≤ {WARM_TARGET_CPU_S:g} CPU-s each",
              (Figure("cold {}× the bare core", "figures.cold_over_bare_core"),
               Figure("warm rerun {}× cold", "figures.warm_over_cold"),
               Figure("{} passes per text", "figures.passes_per_text"),
               Figure("warm `run` {} CPU-s", "figures.cli_warm_run_cpu_s"),
               Figure("warm `status` {} CPU-s", "figures.cli_warm_status_cpu_s"),
               Figure("warm `run` {} CPU-s", "figures.run_cpu_s"),
               Figure("warm `status` {} CPU-s", "figures.status_cpu_s"))),
    Benchmark("bench_peers.py",
              "CPU ≤ {TARGETS[pipeline_cpu_over_bare_max]}× the bare job and ≤ "
              "{TARGETS[pipeline_cpu_over_mteb_max]}× mteb; encode step ≥ "
              "{TARGETS[encode_speed_over_bare_min]}× `model.encode`'s speed",
              (Figure("documents {}", "sizes.*.documents"),
               Figure("pipeline CPU {}× bare", "sizes.*.pipeline_cpu_over_bare"),
               Figure("{}× mteb", "sizes.*.pipeline_cpu_over_mteb"),
               Figure("encode {}× `model.encode`", "sizes.*.encode_speed_over_bare"),
               Figure("rounds {}", "sizes.*.rounds"))),
    Benchmark("bench_partition.py",
              "overhead beyond the encode ≤ {TARGET_OVERHEAD_CPU_S:g} CPU-s",
              (Figure("overhead {} CPU-s", "figures.overhead_cpu_s"),
               Figure("encode {} CPU-s", "figures.encode_cpu_s"),
               Figure("whole `run_pipeline` {} CPU-s", "figures.run_pipeline_cpu_s"))),
    Benchmark("bench_resume.py",
              "bit-identical tables; the rerun encodes only the texts left, in ≤ (share left + {SLACK:g})× the "
              "reference; interrupted + rerun ≤ (1 + {SLACK:g})× the reference",
              (Figure("rerun {}× the reference", "figures.resumed_over_reference"),
               Figure("for {} of the texts left", "figures.fraction_left"),
               Figure("interrupted + rerun {}×", "figures.interrupted_plus_resumed_over_reference"),
               Figure("bit-identical: {}", "figures.bit_identical"))),
    Benchmark("bench_tables.py",
              "the project's layout no larger, and written and read in no more CPU, than pyarrow's default "
              "(ratios ≤ {RATIO_TARGET:g})",
              (Figure("smallest table: size {}×", "rows.0.size_ratio"),
               Figure("write {}×", "rows.0.write_cpu_ratio"), Figure("read {}×", "rows.0.read_cpu_ratio"),
               Figure("largest table: size {}×", "rows.-1.size_ratio"),
               Figure("write {}×", "rows.-1.write_cpu_ratio"), Figure("read {}×", "rows.-1.read_cpu_ratio"))),
    Benchmark("bench_memory.py",
              "each streamed step's peak RSS increase ≤ {RATIO_TARGET:g}× the in-memory reference, at 1,000,000 texts",
              (Figure("{} texts", "figures.texts"),
               Figure("encode {}×", "figures.encode_over_in_memory"),
               Figure("search {}×", "figures.search_over_in_memory"))),
    Benchmark("bench_scale.py",
              "every level's CPU grows at most linearly in documents (exponent ≤ {GROWTH_TARGET:g}; HNSW and IVF "
              "builds their stated complexity); peak RSS ≤ {RSS_TARGET:g}× one card's document vectors; no level near a "
              "queries × documents matrix; resumes after `kill -9` at every level; outputs equal FAISS's and "
              "pytrec_eval's — at 1,000,000 documents",
              (Figure("{} documents", "figures.sizes.-1.documents"),
               Figure("run {} s", "figures.sizes.-1.seconds"),
               Figure("{} CPU-s", "figures.sizes.-1.cpu_seconds"),
               Figure("largest growth exponent: {}", "figures.largest_growth"),
               Figure("peak RSS {}× the document vectors", "figures.peak_rss_over_document_vectors"),
               Figure("{}× above the floor", "figures.peak_rss_above_floor_over_document_vectors"))),
    Benchmark("bench_gpu.py",
              "the pipeline's encode on a GPU ≥ {ENCODE_TARGET:g}× `model.encode`'s speed; exact top-k on the GPU "
              "gives FAISS's (CPU) ids",
              (Figure("{}", "figures.device"),
               Figure("encode {}× `model.encode`", "figures.encode.speed_over_bare"),
               Figure("exact top-k: the same ids on {} queries", "figures.search.same_ids"),
               Figure("GPU {} s", "figures.search.gpu_seconds"),
               Figure("FAISS CPU {} s", "figures.search.faiss_cpu_seconds"))),
    Benchmark("bench_results_db.py",
              "the update reads 2 files at every N; update ≤ {UPDATE_RATIO_TARGET:g}× scratch at the largest N",
              (Figure("{} partitions", "rows.-1.partitions"),
               Figure("update {}× scratch", "update_ratio_at_largest"),
               Figure("{} files read", "rows.-1.update_files_read"))),
    Benchmark("bench_summary.py",
              "after a new card only its dataset's comparisons need work; at {TARGET_PARTITIONS:,} partitions a quiet "
              "tick ≤ {TICK_TARGET_S:g} s, the tick after a new card ≤ {TICK_AFTER_TARGET_S:g} s, the summary after it "
              "≤ {SUMMARY_TARGET_S:g} s; the quiet tick's growth exponent ≤ {TICK_GROWTH_TARGET:g}",
              (Figure("{} partitions", "rows.-1.partitions"),
               Figure("tick {} s", "rows.-1.tick_steady_seconds"),
               Figure("after a new card {} s", "rows.-1.tick_after_seconds"),
               Figure("summary {} s", "rows.-1.summary_seconds"),
               Figure("quiet tick growth exponent {}", "growth_exponents.tick_steady_seconds"),
               Figure("on the {} storage", "storage"))),
    Benchmark("bench_api.py",
              "cold ≤ {COLD_TARGET:g}× the bare client; the cached rerun ≤ {WARM_TARGET:g}× cold, with no request",
              (Figure("{} ms per request", "figures.latency_ms"),
               Figure("cold {}× bare", "figures.cold_over_bare"),
               Figure("cached rerun {}× cold", "figures.warm_over_cold"),
               Figure("{} requests", "figures.warm_requests"))),
    Benchmark("bench_bootstrap.py",
              "< {SECONDS_TARGET:g} s; ≥ {SPEEDUP_TARGET:g}× the numpy anchor's speed",
              (Figure("{} s", "vectorized_seconds"),
               Figure("{}× the numpy anchor", "speedup_vs_numpy_anchor"))),
    Benchmark("interval_coverage.py",
              "the default interval covers ≥ {FLOOR:g} at every n ≥ 20 and ≥ {FLOOR_SMALL:g} at n = {SMALLEST_N} on "
              "the three IR-shaped populations, with the narrowest mean width",
              (Figure("chosen: {}", "chosen"),
               Figure("meets the criterion: {}", "chosen_passes"),
               Figure("{} samples", "samples"), Figure("{} resamples", "resamples"))),
    Benchmark("l6_level.py",
              "the verdict's tests reject a true null at a rate in [{LEVEL_BAND[0]:g}, {LEVEL_BAND[1]:g}] (α = {ALPHA:g}) in "
              "every scenario",
              (Figure("{} queries", "queries"),
               Figure("Wald (the verdict) {}", "rates.*.wald"),
               Figure("pairwise {}", "rates.*.pairwise (Holm, any pair)"),
               Figure("likelihood ratio {}", "rates.*.likelihood ratio"))),
    Benchmark("bench_transfer.py",
              "≥ {SPEEDUP_TARGET:g}× the per-resample loop; < {SECONDS_TARGET:g} s; the same τ_b",
              (Figure("{} s", "seconds"), Figure("{}× the loop", "speedup"))),
    Benchmark("bench_task_statistics.py",
              "each family's 10,000-resample comparison < 10 s",
              (Figure("STS {} s", "figures.sts.seconds_10000"),
               Figure("pair classification {} s", "figures.pair_classification.seconds_10000"),
               Figure("clustering {} s", "figures.clustering.seconds_10000"))),
    Benchmark("bench_ann.py",
              "the pipeline adds ≤ {OVERHEAD_TARGET:.0%} to FAISS's search time (summed and at the median point); "
              "exact top-k ≥ {EXACT_RATIO_TARGET:g}× `IndexFlatIP`; ≤ {SECONDS_TARGET:g} s",
              (Figure("overhead {}", "pipeline_overhead", percent=True),
               Figure("median point {}", "pipeline_overhead_median_point", percent=True),
               Figure("exact top-k {}× `IndexFlatIP`", "exact_topk_vs_faiss_flat_ip"),
               Figure("{} s", "seconds"))),
    Benchmark("bench_search.py",
              "exact top-k ≥ {SEARCH_TARGET:g}× FAISS's speed; the metrics ≥ {METRICS_TARGET:g}× pytrec_eval's "
              "(CPU seconds; equal outputs first)",
              (Figure("threads {}", "search.*.threads"),
               Figure("exact top-k {}× FAISS", "search.*.speed_vs_faiss"),
               Figure("metrics {}× pytrec_eval (`trec_eval` ties)", "metrics.speed_vs_pytrec_eval_trec_eval"),
               Figure("{}× (`expected`)", "metrics.speed_vs_pytrec_eval_expected"))),
    Benchmark("bench_systems.py",
              "the BM25 wrapper adds ≤ {WRAPPER_OVERHEAD_TARGET:.0%} to bm25s (index, retrieve); RRF end to end "
              "< {FUSION_SECONDS_TARGET:g} s",
              (Figure("BM25 index {}", "bm25.index_overhead", percent=True),
               Figure("retrieve {}", "bm25.retrieve_overhead", percent=True),
               Figure("RRF end to end {} s", "fusion.rrf_end_to_end_s"))),
)


def scripts() -> list[str]:
    """Every benchmark script of ``benchmarks/``."""
    return sorted(path.name for path in HERE.glob("*.py") if path.name not in NOT_BENCHMARKS)


def constants(script: str) -> dict[str, Any]:
    """The script's module-level constants (upper-case names bound to literals)."""
    tree = ast.parse((HERE / script).read_text(encoding="utf-8"))
    found: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        pairs = (zip(target.elts, value.elts, strict=False) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                 else [(target, value)])
        for name, expression in pairs:
            if isinstance(name, ast.Name) and name.id.isupper():
                with contextlib.suppress(ValueError):  # a computed constant is not a target's number
                    found[name.id] = ast.literal_eval(expression)
    return found


def what_it_measures(script: str) -> str:
    """The first paragraph of the script's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse((HERE / script).read_text(encoding="utf-8"))) or ""
    return " ".join(docstring.split("\n\n")[0].split()).replace("``", "`")


def latest(script: str, results: Path = RESULTS) -> dict[str, Any] | None:
    """The last line of the script's results file, or None when it has none."""
    path = results / f"{Path(script).stem}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return json.loads(lines[-1]) if lines else None


def lookup(line: Any, path: str) -> Any:
    """The value at ``path`` in a results line; None when it is not there."""
    values = [line]
    for part in path.split("."):
        step = []
        for value in values:
            if part == "*" and isinstance(value, dict | list):
                step += list(value.values()) if isinstance(value, dict) else value
            elif isinstance(value, dict) and part in value:
                step.append(value[part])
            elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
                step.append(value[int(part)])
        values = step
    if not values:
        return None
    return values if "*" in path.split(".") else values[0]


def number(value: Any, percent: bool = False) -> str:
    if isinstance(value, list):
        return " / ".join(number(item, percent) for item in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if percent:
            return f"{100 * value:+.1f} %"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:,.0f}"
        return f"{value:.1f}" if magnitude >= 10 else f"{value:.2f}" if magnitude >= 1 else f"{value:.3g}"
    return str(value)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def row(benchmark: Benchmark, line: dict[str, Any] | None) -> tuple[list[str], str | None]:
    """The table row of one benchmark and its note (for a figure carried over, or a line's note)."""
    measures, targets = what_it_measures(benchmark.script), benchmark.targets.format(**constants(benchmark.script))
    if line is None:
        return [f"`{benchmark.script}`", measures, targets, "not yet recorded", "", "", ""], None
    shown = [figure.label.format(number(value, figure.percent)) for figure in benchmark.figures
             if (value := lookup(line, figure.path)) is not None]
    met = line.get("met")
    if isinstance(met, dict):
        missed = [name for name, passed in met.items() if not passed]
        verdict = f"not met: {', '.join(missed)}" if missed else "met" if len(met) == 1 else f"all {len(met)} met"
    else:
        verdict = "—"
    machine = line.get("machine") or {}
    where = machine.get("cpu") or "unknown"
    if machine.get("cpus"):
        where += f", {machine['cpus']} CPUs"
    carried = line.get("source") == CARRIED_OVER
    date = str(line.get("date", ""))[:10] + (" †" if carried else "")
    notes = [text for text in (line.get("note"),) if text]
    if line.get("argv"):
        notes.insert(0, f"run as `{benchmark.script} {' '.join(line['argv'])}`")
    return [f"`{benchmark.script}`", measures, targets, "; ".join(shown), verdict, where, date], "; ".join(notes) or None


def render(results: Path = RESULTS) -> str:
    """The whole ``benchmarks/README.md``."""
    known = {benchmark.script for benchmark in BENCHMARKS}
    unknown = sorted(set(scripts()) - known)
    if unknown:
        raise SystemExit(f"benchmarks/readme.py: no row for {unknown}: add each to BENCHMARKS")
    rows, notes = [], []
    for benchmark in BENCHMARKS:
        cells, note = row(benchmark, latest(benchmark.script, results))
        rows.append("| " + " | ".join(cell(text) for text in cells) + " |")
        if note:
            notes.append(f"- `{benchmark.script}`: {note}")
    return "\n".join([
        "# Benchmarks",
        "",
        "Written by `python benchmarks/readme.py` from `benchmarks/results/*.jsonl`: edit neither by hand. Each",
        "script appends its final JSON line to its results file when it ends (`benchmarks/results.py`), with",
        "the date, the machine, the Python version and the git commit; this table shows each script's latest",
        "line. What each benchmark compares, and how to run it: [docs/benchmarks.md](../docs/benchmarks.md).",
        "",
        "<!-- --8<-- [start:table] -->",
        "| script | measures | target | latest figure | met | machine | date |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "† A figure carried over from the README before the documentation site: measured then, on the machine",
        "the README named, and recorded here with the date it gave (or, where it gave none, the date of the",
        "commit that added the figure).",
        "<!-- --8<-- [end:table] -->",
        "",
        "## Notes on the latest figures",
        "",
        *notes,
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that README.md is what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not README.is_file() or README.read_text(encoding="utf-8") != text:
            print("benchmarks/README.md is not what benchmarks/readme.py writes: run `python benchmarks/readme.py`")
            return 1
        return 0
    README.write_text(text, encoding="utf-8")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
