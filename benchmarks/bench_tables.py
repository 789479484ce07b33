"""The embedding tables' Parquet layout against pyarrow's default, outputs first.

Workload (defaults): unit vectors shaped like sentence embeddings
(:func:`bench_ann.synthetic_corpus`, 384-d) at 1,000 rows (a shard of a small dataset) and
100,000 rows, with their ids and token counts, as the pipeline stores them
(:func:`embedpyramid.encode.vectors_to_table`), one row group per shard of the default card
(4,096 rows, as the pipeline writes them). Two layouts, each written through
:func:`embedpyramid.store.write_parquet` and read back through
:func:`embedpyramid.encode.read_embeddings`:

- ``default``: zstd with pyarrow's other defaults (a dictionary for every column), what the
  tables were written with before;
- ``project``: :data:`embedpyramid.encode.tables.VECTOR_PARQUET` (each float's bytes in four
  streams, BYTE_STREAM_SPLIT, zstd, no dictionary).

Check before anything is timed: both files read back the same ids and bit-identical vectors.
Each side is written and read ``--repeats`` times, the sides alternating; each side's fastest
pass counts, in CPU seconds (the process's, every thread: pyarrow decodes on a pool; wall
beside it). Targets, at every size: the project's file is no larger, and written and read in
no more CPU, than the default's (ratios <= 1.0).

Prints the figures with PASS/FAIL per target, then ONE JSON line.

    python benchmarks/bench_tables.py [--rows 1000,100000] [--dim 384] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_ann import synthetic_corpus  # noqa: E402
from results import record_result  # noqa: E402

from embedpyramid.config.models import RunSettings  # noqa: E402
from embedpyramid.encode import read_embeddings, vectors_to_table  # noqa: E402
from embedpyramid.encode.tables import VECTOR_PARQUET  # noqa: E402
from embedpyramid.store import write_parquet  # noqa: E402

SHARD_ROWS = RunSettings.model_fields["shard_size"].default
LAYOUTS = {layout: {**options, "row_group_size": SHARD_ROWS}
           for layout, options in {"default": {"compression": "zstd"}, "project": VECTOR_PARQUET}.items()}
RATIO_TARGET = 1.0


def timed(work) -> tuple[float, float]:
    """(CPU, wall) seconds of ``work()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(rows: int, dim: int, repeats: int, scratch: Path) -> dict:
    """Write and read both layouts of ``rows`` vectors; the fastest pass of each, and the file sizes."""
    vectors, _ = synthetic_corpus(rows, 1, dim, seed=rows)
    ids = [f"doc-{index:07d}" for index in range(rows)]
    table = vectors_to_table(ids, vectors, {"card": "bench"}, np.full(rows, 128, np.int64))
    paths = {layout: scratch / f"{layout}-{rows}.parquet" for layout in LAYOUTS}
    for layout, options in LAYOUTS.items():
        write_parquet(table, paths[layout], **options)
        read_ids, read_vectors = read_embeddings(paths[layout])
        if read_ids != ids or not np.array_equal(read_vectors, vectors):
            raise SystemExit(f"FAIL: the {layout} layout at {rows} rows does not read back what was written")
    best: dict[str, dict[str, list[float]]] = {layout: {"write": [], "read": []} for layout in LAYOUTS}
    for repeat in range(repeats):
        for layout in LAYOUTS if repeat % 2 == 0 else list(LAYOUTS)[::-1]:
            best[layout]["write"].append(timed(lambda layout=layout: write_parquet(table, paths[layout], **LAYOUTS[layout])))
            best[layout]["read"].append(timed(lambda layout=layout: read_embeddings(paths[layout])))
    row: dict = {"rows": rows, "dim": dim, "raw_bytes": vectors.nbytes}
    for layout in LAYOUTS:
        row[f"{layout}_bytes"] = paths[layout].stat().st_size
        for step in ("write", "read"):
            cpu, wall = min(best[layout][step])
            row[f"{layout}_{step}_cpu_s"], row[f"{layout}_{step}_wall_s"] = round(cpu, 5), round(wall, 5)
    row["size_ratio"] = row["project_bytes"] / row["default_bytes"]
    for step in ("write", "read"):
        row[f"{step}_cpu_ratio"] = row[f"project_{step}_cpu_s"] / row[f"default_{step}_cpu_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,100000", help="comma-separated table sizes")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"embedding tables: {args.dim}-d unit vectors, default (zstd, dictionaries) vs project "
          f"(zstd, BYTE_STREAM_SPLIT, no dictionary); fastest of {args.repeats}, CPU seconds")
    rows, met = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-tables-") as scratch:
        for size in (int(n) for n in args.rows.split(",")):
            row = measure(size, args.dim, args.repeats, Path(scratch))
            rows.append(row)
            print(f"  {size:>7,} rows ({row['raw_bytes'] / 2**20:.1f} MiB of floats), both read back bit-identical:")
            print(f"    size  {row['default_bytes'] / 2**20:7.2f} -> {row['project_bytes'] / 2**20:7.2f} MiB  "
                  f"{row['size_ratio']:.2f}x")
            for step in ("write", "read"):
                print(f"    {step:<5} {row[f'default_{step}_cpu_s'] * 1000:7.1f} -> {row[f'project_{step}_cpu_s'] * 1000:7.1f} "
                      f"ms CPU  {row[f'{step}_cpu_ratio']:.2f}x  (wall {row[f'default_{step}_wall_s'] * 1000:.1f} -> "
                      f"{row[f'project_{step}_wall_s'] * 1000:.1f} ms)")
            for figure in ("size_ratio", "write_cpu_ratio", "read_cpu_ratio"):
                met[f"{figure}@{size}"] = row[figure] <= RATIO_TARGET
    for name, passed in met.items():
        figure, size = name.split("@")
        print(f"  {figure.replace('_', ' ')} at {int(size):,} rows <= {RATIO_TARGET}: {'PASS' if passed else 'FAIL'}")
    print(json.dumps(record_result("bench_tables", {"benchmark": "tables", "rows": rows, "targets": {"ratio_max": RATIO_TARGET},
                                                    "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
