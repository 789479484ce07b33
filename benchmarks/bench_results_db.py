"""The results database at 10, 100 and 1,000 partitions: built from scratch against updated after one new partition.

Workload (defaults): N synthetic (model, dataset) partitions over 10 datasets, each with its
per-query metrics (``--queries`` queries x 6 metrics) and its top-``--depth`` run, written as
Parquet like the pipeline's artefacts; the qrels of each dataset. For each N, in a fresh folder:

- ``scratch``: :func:`embedpyramid.summary.results.build_results_db` with no database there
  (what every summary did before the database was updated file by file);
- ``update``: one more partition is written (a new model on one dataset) and the database is
  built again over the N + 1 partitions, starting from the one just built.

Before anything is compared, the updated database must hold exactly the rows of a database
built from scratch over the same N + 1 partitions (per large view, the row count and the sum of
the rows' hashes, which no row order changes; the small views row by row, their floats to 1e-12
relative: the leaderboard's means come from DuckDB's parallel ``avg``, which sums in no fixed
order, so two builds of the same rows can differ in the last bits) and must have read only the
new partition's two files. Each side runs once per N (seconds of wall clock and of
CPU, this process). Targets: the update reads 2 files at every N; at the largest N it takes at
most 0.25 x the scratch build. Both grow linearly with N (their figures at 5,000 are
extrapolated from the largest two): the scratch build with every file it reads, the update with
the copy of the database file, which is moved into place only once complete.

Prints the figures with PASS/FAIL per target, then ONE JSON line.

    python benchmarks/bench_results_db.py [--partitions 10,100,1000] [--queries 100] [--depth 100]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
from results import record_result

from embedpyramid.current_inputs import EvaluatedPartition
from embedpyramid.summary.results import INCREMENTAL, build_results_db

METRICS = ["nDCG@10", "Recall@10", "MAP@100", "MRR@10", "P@1", "Recall@100"]
DATASETS = 10
UPDATE_RATIO_TARGET = 0.25


def write_partition(root: Path, index: int, queries: int, depth: int) -> EvaluatedPartition:
    """The metrics and run files of synthetic partition ``index`` (model m<index>, dataset d<index % 10>)."""
    rng = np.random.default_rng(index)
    dataset, model = f"d{index % DATASETS}", f"m{index:05d}@{index:07x}"
    folder = root / "runs" / dataset / model
    folder.mkdir(parents=True, exist_ok=True)
    query_ids = [f"q{q:05d}" for q in range(queries)]
    pl.DataFrame({
        "dataset": dataset, "model": model, "system": "exact",
        "query_id": np.repeat(query_ids, len(METRICS)), "metric": METRICS * queries,
        "value": rng.random(queries * len(METRICS)),
    }).write_parquet(folder / "metrics.parquet")
    pl.DataFrame({
        "query_id": np.repeat(query_ids, depth), "rank": np.tile(np.arange(1, depth + 1, dtype=np.int32), queries),
        "doc_id": [f"doc{d:07d}" for d in rng.integers(0, 10**6, queries * depth)],
        "score": np.sort(rng.random(queries * depth))[::-1],
    }).write_parquet(folder / "run.parquet")
    qrels = root / "datasets" / dataset / "qrels.parquet"
    if not qrels.is_file():
        qrels.parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"query_id": query_ids, "doc_id": [f"doc{q:07d}" for q in range(queries)],
                      "relevance": np.ones(queries, dtype=np.int64)}).write_parquet(qrels)
    return EvaluatedPartition(dataset, model, model.split("@")[0], f"{index:064x}", {"backend": "synthetic"},
                              "exact", folder / "metrics.parquet", folder / "run.parquet", qrels, {"gain": "linear"})


def view_contents(db: Path) -> dict[str, object]:
    """Per view: for the large ones, the row count and the sum of the rows' hashes (the same for
    the same rows in any order); for the others, the rows, sorted."""
    with duckdb.connect(str(db), read_only=True) as con:
        views = [name for (name,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]
        return {view: con.execute(f'SELECT count(*), sum(hash(v)::HUGEINT) FROM "{view}" v').fetchone()
                if view in INCREMENTAL else sorted(con.execute(f'SELECT * FROM "{view}"').fetchall(), key=repr)
                for view in views}


def same_contents(mine: dict[str, object], theirs: dict[str, object]) -> bool:
    """Equal views; a float of a small view (the leaderboard's means: DuckDB's parallel ``avg``
    sums in no fixed order) may differ by 1e-12 relative."""
    def close(a, b) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    return mine.keys() == theirs.keys() and all(close(mine[view], theirs[view]) for view in mine)


def timed(build):
    wall, cpu = time.perf_counter(), time.process_time()
    result = build()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(n: int, queries: int, depth: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-results-db-") as scratch:
        root = Path(scratch)
        partitions = [write_partition(root, i, queries, depth) for i in range(n)]
        target = root / "results.duckdb"
        built, scratch_wall, scratch_cpu = timed(lambda: build_results_db(target, partitions))
        partitions.append(write_partition(root, n, queries, depth))
        updated, update_wall, update_cpu = timed(lambda: build_results_db(target, partitions))
        fresh = build_results_db(root / "fresh.duckdb", partitions)
        same = same_contents(view_contents(updated.path), view_contents(fresh.path))
        size = target.stat().st_size
    return {"partitions": n, "run_rows": n * queries * depth, "scratch_seconds": scratch_wall,
            "scratch_cpu_seconds": scratch_cpu, "scratch_files_read": built.sources_read,
            "update_seconds": update_wall, "update_cpu_seconds": update_cpu,
            "update_files_read": updated.sources_read, "update_files_kept": updated.sources_kept,
            "database_bytes": size, "same_rows_as_scratch": same}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10,100,1000", help="comma-separated partition counts")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.partitions.split(",")]
    print(f"results.duckdb: {args.queries} queries x {len(METRICS)} metrics and a top-{args.depth} run per partition")
    rows = []
    for n in sizes:
        row = measure(n, args.queries, args.depth)
        rows.append(row)
        print(f"  {n:>5} partitions ({row['run_rows']:,} run rows, {row['database_bytes'] / 2**20:.0f} MiB): "
              f"scratch {row['scratch_seconds']:.2f} s ({row['scratch_files_read']} files), "
              f"update after one new partition {row['update_seconds']:.2f} s ({row['update_files_read']} files read, "
              f"{row['update_files_kept']} kept); same rows as a scratch build: {row['same_rows_as_scratch']}")
    if not all(row["same_rows_as_scratch"] for row in rows):
        print("FAIL: an updated database differs from one built from scratch")
        print(json.dumps({"rows": rows, "met": False}))
        return 2
    largest = rows[-1]
    ratio = largest["update_seconds"] / largest["scratch_seconds"]
    met = {"update_reads_only_the_new_partition": all(row["update_files_read"] == 2 for row in rows),
           "update_ratio_at_largest": ratio <= UPDATE_RATIO_TARGET}
    extrapolated = {}
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        for side in ("scratch", "update"):
            slope = (b[f"{side}_seconds"] - a[f"{side}_seconds"]) / (b["partitions"] - a["partitions"])
            extrapolated[side] = b[f"{side}_seconds"] + slope * (5000 - b["partitions"])
            print(f"  {side} per partition: {1000 * slope:.2f} ms; extrapolated to 5,000 partitions: "
                  f"{extrapolated[side]:.1f} s")
    print(f"  update reads only the new partition's 2 files at every size: "
          f"{'PASS' if met['update_reads_only_the_new_partition'] else 'FAIL'}")
    print(f"  update / scratch at {largest['partitions']} partitions: {ratio:.3f} (target <= {UPDATE_RATIO_TARGET}): "
          f"{'PASS' if met['update_ratio_at_largest'] else 'FAIL'}")
    print(json.dumps(record_result("bench_results_db", {
        "rows": rows, "update_ratio_at_largest": ratio, "seconds_at_5000_extrapolated": extrapolated,
        "targets": {"update_files_read": 2, "update_ratio_at_largest": UPDATE_RATIO_TARGET}, "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
