"""The summaries and the automation tick at 10, 100 and 1,000 partitions: what one new model on one dataset costs.

Workload (defaults): N (card, dataset) partitions, ``--cards`` (10) toy cards on each of N / 10
datasets (N / ``--cards``), so a dataset's ``comparisons`` always compare 10 models and only the number of
datasets grows with N (what grows is what the summaries over every dataset, results.duckdb and
the report, and the automation tick read). Every dataset is the 12-document BEIR folder of the
graph tests; the cards are ``toy_encoders:CharacterNgrams`` (tests/fixtures is put on
``sys.path``, as the graph tests do) of distinct dimensions; the protocol is the tests' quick one
(200 resamples).

Setup, real Dagster throughout (the graph of :func:`pipelines.graph.build_definitions`, the data
folder's SQLite instance, partitions registered and config facets observed as ``embedpyramid``
does): ``embedpyramid run``'s :func:`~pipelines.runner.run_pipeline` evaluates the cards on one
seed dataset, summaries included (once per invocation, copied for each N). The other datasets
are clones of the seed: its per-dataset artefact folders copied with the dataset's name
rewritten (JSON text, Parquet string columns and schema metadata), and the latest
materialization of each of the seed dataset's partitions (frozen data, per-card assets, its
``comparisons`` partition) reported again for each dataset, the seed's own included, asset by
asset upstream first: the seed's tags (data, code and input data versions), the current data
version of each unpartitioned input (a config facet), input event pointers at the latest
record then: the provenance Dagster writes
when no input has moved since (a summary partition's digest of its inputs: the clone's). The summaries over every dataset are then built by the real
``summary`` job. Checked before anything is timed: :class:`graphbase.freshness.Freshness` finds
every (asset, partition) of the selection and every summary fresh, and a tick requests nothing.

Then one new card (in models.yaml, registered, observed) is evaluated for real on the seed
dataset (the ``evaluate`` job). Its partitions on the other datasets are missing, as after
``embedpyramid run --models new --datasets ds0000``. Checked: a tick requests no partition of the
existing cards and no other dataset's ``comparisons``; it requests the new card's missing
partitions on the other datasets (their first assets) and the seed's ``comparisons``, or holds
those while any partition upstream is requested (``UpstreamBusy``), which the output says.

Timed (wall and CPU seconds of this process, the fewest of ``--repeats``):

- ``tick``: ``dg.evaluate_automation_conditions`` over the whole graph (the automation sensor's
  evaluation, every asset's condition), in steady state and after the new card;
- ``summary``: the run ``embedpyramid run`` makes for the summaries when one dataset's
  comparisons need work (:func:`pipelines.runner._summarize`): the ``summary`` job in-process for
  the seed dataset's ``comparisons`` partition plus the summaries over every dataset that need
  work (the task comparisons, the L3 transfer, results.duckdb, the report), in one run.
  results.duckdb is put back as it was before each repeat, so each repeat adds the new
  partition's files (the instance keeps the earlier repeats' materializations). Checked after
  the first: the seed's comparisons hold the new card, and no other dataset's comparison files or
  ``comparisons`` partitions were written.

Storage (``--storage``), where the instance's records live:

- ``cli``: the data folder's SQLite files as ``embedpyramid`` opens them (Dagster's SQLite
  storage with an event log that keeps its database engines, :mod:`graphbase.instance`);
- ``sqlite``: the same files as ``dagster-daemon`` and ``dagster dev`` open them (Dagster's own
  SQLite storage, from the data folder's ``dagster.yaml``);
- ``postgres``: a PostgreSQL database, the deployment's storage (docs/instance/single-host.yaml),
  on a server started as tests/deploy starts it (the Debian package's binaries, on 127.0.0.1);
  each N gets a copy of the seed's database (``createdb --template``).

Targets (issue #51's, for 10,000 partitions; judged at the largest N measured, which the output
says): after the new card, only the seed dataset's ``comparisons`` partition needs work (what
partitioning the comparisons by dataset is for; the output names what else makes the others
stale); quiet tick <= 2 s; tick after the new card <= 5 s; summary after the new card <= 15 s;
the quiet tick's growth exponent log(t2/t1) / log(n2/n1) between the two largest N <= 0.2. Each
figure is also extrapolated to 10,000 partitions from the two largest N, linearly.

Prints the figures with PASS/FAIL per target, then ONE JSON line (naming the storage).

    python benchmarks/bench_summary.py [--partitions 10,100,1000] [--cards 10] [--repeats 3] [--storage cli]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import dagster as dg  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402
from graph_helpers import beir_folder, quick_protocol, requested_by_automation, toy  # noqa: E402
from results import record_result  # noqa: E402

from embedpyramid.config.selection import select_datasets, select_models  # noqa: E402
from embedpyramid.current_inputs import INPUTS_DIGEST  # noqa: E402
from embedpyramid.store import read_frame  # noqa: E402
from graphbase.config_observation import observe_config  # noqa: E402
from graphbase.dagster_internals import DATA_VERSION_TAG  # noqa: E402
from graphbase.freshness import Freshness  # noqa: E402
from graphbase.home import instance_home  # noqa: E402
from graphbase.instance import open_instance, run_tags  # noqa: E402
from graphbase.partitions import model_dataset_key  # noqa: E402
from pipelines.automation import evaluation_job, summary_job  # noqa: E402
from pipelines.runner import run_pipeline  # noqa: E402
from pipelines.session import Session, open_session, partition_assets, selection_states, summary_targets  # noqa: E402

SEED = "ds0000"
NEW_CARD = "new"
TARGET_PARTITIONS = 10_000
TICK_TARGET_S, TICK_AFTER_TARGET_S, SUMMARY_TARGET_S = 2.0, 5.0, 15.0
TICK_GROWTH_TARGET = 0.2
STORAGES = ("cli", "sqlite", "postgres")
INPUT_VERSION, INPUT_POINTER = "dagster/input_data_version/", "dagster/input_event_pointer/"
# The per-dataset artefact folders of the data folder (<kind>/<dataset>/...), cloned for each dataset.
DATASET_FOLDERS = ["datasets", "metrics", "runs", "efficiency", "geometry", "comparisons/datasets"]


def dataset_names(count: int) -> list[str]:
    return [f"ds{index:04d}" for index in range(count)]


class Storage:
    """Opens the instance of a data folder on one storage (the module docstring's ``--storage``)."""

    def __init__(self, kind: str, postgres=None):
        self.kind, self.postgres = kind, postgres

    def open(self, name: str, data: Path) -> dg.DagsterInstance:
        """The instance of ``data`` (``name``: its Postgres database, created unless it exists)."""
        if self.kind == "cli":
            return open_instance(data)
        if self.kind == "sqlite":
            open_instance(data).dispose()  # writes the data folder's dagster.yaml, as the CLI does first
            return dg.DagsterInstance.from_config(str(instance_home(data)))
        home = data.parent / f"pg-home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text(yaml.safe_dump({"storage": {"postgres": {"postgres_db": {
            "hostname": self.postgres.host, "port": self.postgres.port, "username": self.postgres.user,
            "password": "", "db_name": name, "scheme": "postgresql+psycopg2"}}}, "telemetry": {"enabled": False}}))
        return dg.DagsterInstance.from_config(str(home))

    def copy(self, source: str, name: str) -> None:
        """A Postgres database ``name`` holding ``source``'s records (the SQLite files are copied with the folder)."""
        if self.kind == "postgres":
            subprocess.run([str(self.postgres.bin / "createdb"), "-h", self.postgres.host, "-p", str(self.postgres.port),
                            "-U", self.postgres.user, "--template", source, name], check=True, capture_output=True)


@contextlib.contextmanager
def storage_of(kind: str) -> Iterator[Storage]:
    """The storage ``kind``; for ``postgres``, a server of its own for the benchmark's length."""
    if kind != "postgres":
        yield Storage(kind)
        return
    from local_servers import postgres_server
    with postgres_server() as server:
        server.create_database("seed")
        yield Storage(kind, server)


def write_configs(folder: Path, beir: Path, datasets: list[str], cards: int, *, new_card: bool = False) -> Path:
    """models.yaml (``cards`` toy cards c0.., plus ``new`` if asked), datasets.yaml (every
    dataset reads the same BEIR folder) and the quick protocol."""
    folder.mkdir(parents=True, exist_ok=True)
    models = {f"c{index}": toy(16 + 4 * index) for index in range(cards)}
    if new_card:
        models[NEW_CARD] = toy(15)
    (folder / "models.yaml").write_text(yaml.safe_dump({"models": models}))
    (folder / "datasets.yaml").write_text(yaml.safe_dump(
        {"datasets": {name: {"loader": "beir", "path": str(beir)} for name in datasets}}))
    (folder / "protocol.yaml").write_text(yaml.safe_dump(quick_protocol()))
    return folder


def seed_folder(scratch: Path, cards: int, storage: Storage) -> Path:
    """``embedpyramid run`` of every card on the seed dataset: real artefacts, real materializations."""
    beir = beir_folder(scratch / "beir")
    write_configs(scratch / "configs", beir, [SEED], cards)
    instance = storage.open("seed", scratch / "data")
    report = run_pipeline(scratch / "configs", scratch / "data", instance=instance, log=lambda _line: None)
    instance.dispose()  # a Postgres database is copied from the seed's: no connection may be left to it
    if report.failures or not report.summary_built:
        raise SystemExit(f"the seed run failed: {report.failures or report.summary_skipped}")
    return scratch


def clone_files(data: Path, dataset: str) -> None:
    """The seed dataset's artefact folders as ``dataset``'s, its name rewritten in every JSON file,
    every Parquet string column and its schema metadata."""
    def rewrite(name: str, destination: str) -> None:
        source, target = Path(name), Path(destination)
        if source.suffix == ".json":
            target.write_text(source.read_text().replace(SEED, dataset))
            return
        if source.suffix == ".parquet":
            table = pq.read_table(source)
            columns = [pc.replace_substring(column, SEED, dataset)
                       if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) else column
                       for column in table.columns]
            metadata = {key: value.replace(SEED.encode(), dataset.encode())
                        for key, value in (table.schema.metadata or {}).items()}
            pq.write_table(pa.Table.from_arrays(columns, schema=table.schema.with_metadata(metadata)), target)
            return
        shutil.copy2(source, target)

    folders = [*DATASET_FOLDERS, *(f"provenance/{asset.name}" for asset in (data / "provenance").iterdir())]
    for folder in folders:
        source = data / folder / SEED
        if source.is_dir():
            shutil.copytree(source, data / folder / dataset, copy_function=rewrite)


def clone_events(instance: dg.DagsterInstance, graph, datasets: list[str]) -> int:
    """Report, for each of ``datasets`` (the seed's own included), every latest materialization of
    the seed dataset's partitions (upstream first, asset by asset), with the seed's data and code
    versions, the current data version of each unpartitioned input (a config facet) and input
    event pointers at the latest record now: the provenance Dagster records when nothing has
    moved since; a summary partition's record of the input partitions it read is that of the
    clone's inputs. Returns how many were reported."""
    reported = 0
    for key in graph.toposorted_asset_keys:
        node = graph.get(key)
        if not node.is_materializable or node.partitions_def is None:
            continue
        records = [record for partition, record in latest_by_partition(instance, key).items()
                   if SEED in partition.split("|")]
        pointer = str(instance.event_log_storage.get_maximum_record_id())
        current = {f"{INPUT_VERSION}{parent.to_user_string()}": latest_version(instance, graph, parent)
                   for parent in node.parent_keys if graph.get(parent).partitions_def is None}
        for dataset in datasets:
            for record in records:
                event, partition = record.asset_materialization, record.partition_key.replace(SEED, dataset)
                tags = {name: (pointer if name.startswith(INPUT_POINTER) else current.get(name, value.replace(SEED, dataset)))
                        for name, value in (event.tags or {}).items()}
                metadata = dict(event.metadata)
                if INPUTS_DIGEST in metadata:  # a summary partition: the digest of the clone's own inputs
                    digest = Freshness(instance, graph).inputs_digest(key, partition)
                    metadata[INPUTS_DIGEST] = dg.MetadataValue.text(digest)
                instance.report_runless_asset_event(dg.AssetMaterialization(
                    key, partition=partition, tags=tags, metadata=metadata))
                reported += 1
    return reported


def latest_version(instance: dg.DagsterInstance, graph, key: dg.AssetKey) -> str | None:
    """The data version of the latest materialization or observation of an unpartitioned asset."""
    record = instance.get_latest_data_version_record(key, graph.get(key).is_external, None)
    return record.event_log_entry.tags.get(DATA_VERSION_TAG) if record and record.event_log_entry.tags else None


def latest_by_partition(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, dg.EventLogRecord]:
    """The latest materialization record of each partition of ``key``."""
    ids = instance.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
    records = instance.fetch_materializations(dg.AssetRecordsFilter(key, storage_ids=list(ids.values())),
                                              limit=len(ids)).records
    return {record.partition_key: record for record in records}


def not_fresh(session: Session) -> list[str]:
    """Every (asset, partition) of the whole selection and the summaries that is not fresh."""
    states = selection_states(session, select_models(session.config, None), select_datasets(session.config, None))
    return [f"{state.asset}[{state.partition}]: {state.state}" for state in states if state.needs_work]


def summaries_needing_work(session: Session, partition: str | None) -> list[str]:
    """The summary assets of ``partition`` (None: those over every dataset) that need work now."""
    freshness = session.freshness()
    return [asset for asset, target in summary_targets(session)
            if target == partition and freshness.state(dg.AssetKey(asset), target).needs_work]


def timed(action: Callable[[], object], repeats: int, before: Callable[[], None] = lambda: None) -> tuple[object, float, float]:
    """The result of the last repeat and the fewest wall and CPU seconds of ``repeats``."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        before()
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, min(walls), min(cpus)


def partitioned(requested: set[tuple[str, str | None]]) -> dict[str, list[str]]:
    """The requested partitions, by asset."""
    found: dict[str, list[str]] = {}
    for asset, partition in sorted(requested, key=str):
        found.setdefault(asset, []).append(partition or "")
    return found


def measure(n: int, cards: int, seed: Path, scratch: Path, repeats: int, storage: Storage) -> dict:
    """Set up N partitions from the seed folder, check they are fresh, time the ticks and the summary."""
    folder = scratch / f"n{n}"
    shutil.copytree(seed, folder, symlinks=True)
    datasets = dataset_names(n // cards)
    configs, data = folder / "configs", folder / "data"
    write_configs(configs, seed / "beir", datasets, cards)
    storage.copy("seed", f"n{n}")
    session = open_session(configs, data, storage.open(f"n{n}", data), lambda _line: None, False)
    observe_config(session.instance, session.config)
    graph = session.defs.resolve_asset_graph()
    start = time.perf_counter()
    for dataset in datasets[1:]:
        clone_files(data, dataset)
    phases = {"clone_files": time.perf_counter() - start}
    cloned = clone_events(session.instance, graph, datasets)
    phases["clone_events"] = time.perf_counter() - start - phases["clone_files"]
    tags = run_tags(configs, ["bench_summary"])
    whole = summaries_needing_work(session, None)
    if whole and not session.execute(summary_job.name, whole, None, tags).success:
        raise SystemExit(f"N={n}: the summaries over every dataset failed")
    setup_seconds = time.perf_counter() - start
    phases["summaries"] = setup_seconds - phases["clone_files"] - phases["clone_events"]
    behind = not_fresh(session)
    steady, steady_wall, steady_cpu = timed(lambda: requested_by_automation(session.defs, session.instance)[0], repeats)
    checks = {"setup_all_fresh": not behind, "steady_tick_requests_nothing": not steady}

    write_configs(configs, seed / "beir", datasets, cards, new_card=True)
    session = open_session(configs, data, session.instance, lambda _line: None, False)
    observe_config(session.instance, session.config)
    new_partition = model_dataset_key(NEW_CARD, SEED)
    evaluated = session.execute(evaluation_job.name, partition_assets(session.defs), new_partition, tags).success
    after, after_wall, after_cpu = timed(lambda: requested_by_automation(session.defs, session.instance)[0], repeats)
    by_asset = partitioned(after)
    new_elsewhere = {str(model_dataset_key(NEW_CARD, dataset)) for dataset in datasets[1:]}
    summaries = set(summary_targets(session))
    checks |= {
        "new_card_evaluated": evaluated,
        "tick_requests_only_new_card_or_seed_comparisons": all(
            partition in new_elsewhere or (asset, partition) == ("comparisons", SEED)
            for asset, partition in after if (asset, partition) not in summaries or asset == "comparisons"),
    }

    comparisons_dir = session.store.comparisons_dir / "datasets"
    mtimes = {path: path.stat().st_mtime_ns for path in comparisons_dir.rglob("*") if path.is_file()
              and path.parent.name != SEED}
    comparisons_key = dg.AssetKey("comparisons")
    before_ids = session.instance.get_latest_storage_id_by_partition(comparisons_key,
                                                                     dg.DagsterEventType.ASSET_MATERIALIZATION)
    freshness = session.freshness()
    rebuilt = {dataset: freshness.state(comparisons_key, dataset) for dataset in datasets}
    rebuilt = {dataset: state.causes for dataset, state in rebuilt.items() if state.needs_work_now}
    whole = summaries_needing_work(session, None)
    seed_summaries = summaries_needing_work(session, SEED)
    database, kept = session.store.results_db, folder / "results.duckdb.before"
    shutil.copy2(database, kept)
    result, summary_wall, summary_cpu = timed(
        lambda: session.execute(summary_job.name, [*seed_summaries, *whole], SEED, tags), repeats,
        before=lambda: shutil.copy2(kept, database))
    after_ids = session.instance.get_latest_storage_id_by_partition(comparisons_key,
                                                                    dg.DagsterEventType.ASSET_MATERIALIZATION)
    compared = read_frame(comparisons_dir / SEED / "comparisons.parquet")
    new_key = session.config.models[NEW_CARD].key
    checks |= {
        "summary_run_succeeded": result.success,
        "seed_comparisons_hold_new_card": compared.filter(pl.col("model_b") == new_key).height > 0,
        "other_comparison_files_untouched": all(path.stat().st_mtime_ns == mtime for path, mtime in mtimes.items()),
        "other_comparisons_partitions_not_rematerialized": {
            partition: storage_id for partition, storage_id in after_ids.items() if partition != SEED}
        == {partition: storage_id for partition, storage_id in before_ids.items() if partition != SEED},
    }
    session.instance.dispose()
    return {
        "partitions": n, "datasets": len(datasets), "cloned_materializations": cloned,
        "setup_seconds": setup_seconds, "setup_phase_seconds": phases, "not_fresh_after_setup": behind[:5],
        "tick_steady_seconds": steady_wall, "tick_steady_cpu_seconds": steady_cpu,
        "tick_after_seconds": after_wall, "tick_after_cpu_seconds": after_cpu,
        "tick_after_requested": {asset: len(partitions) for asset, partitions in by_asset.items()},
        "seed_comparisons_requested": ("comparisons", SEED) in after,
        "comparisons_needing_work_after_new_card": len(rebuilt),
        "comparisons_causes_elsewhere": sorted({cause for dataset, causes in rebuilt.items() if dataset != SEED
                                                for cause in causes}),
        "summary_assets": [*seed_summaries, *whole],
        "summary_seconds": summary_wall, "summary_cpu_seconds": summary_cpu, "checks": checks,
    }


FIGURES = ["tick_steady_seconds", "tick_after_seconds", "summary_seconds"]
TARGETS = {"tick_steady_seconds": TICK_TARGET_S, "tick_after_seconds": TICK_AFTER_TARGET_S,
           "summary_seconds": SUMMARY_TARGET_S}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10,100,1000", help="comma-separated partition counts")
    parser.add_argument("--cards", type=int, default=10, help="cards per dataset (N / cards datasets)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage", choices=STORAGES, default="cli",
                        help="where the instance's records live (see the module docstring)")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.partitions.split(",")]
    if any(n % args.cards for n in sizes):
        parser.error(f"every partition count must be a multiple of --cards {args.cards}")
    print(f"summaries and automation tick on the {args.storage} storage: {args.cards} toy cards per dataset, one new "
          f"card on one dataset; load average {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-summary-") as scratch, storage_of(args.storage) as storage:
        seed = seed_folder(Path(scratch) / "seed", args.cards, storage)
        for n in sizes:
            row = measure(n, args.cards, seed, Path(scratch), args.repeats, storage)
            rows.append(row)
            failed = [name for name, passed in row["checks"].items() if not passed]
            phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in row["setup_phase_seconds"].items())
            print(f"  {n:>5} partitions ({row['datasets']} datasets, setup {row['setup_seconds']:.0f} s: {phases}): "
                  f"tick steady {row['tick_steady_seconds']:.2f} s ({row['tick_steady_cpu_seconds']:.2f} CPU-s), "
                  f"after the new card {row['tick_after_seconds']:.2f} s; summary {row['summary_seconds']:.2f} s "
                  f"({row['summary_cpu_seconds']:.2f} CPU-s); per partition: tick "
                  f"{1000 * row['tick_steady_seconds'] / n:.1f} ms, summary {1000 * row['summary_seconds'] / n:.1f} ms")
            print(f"        tick after the new card requests {row['tick_after_requested'] or 'nothing'}; "
                  f"seed comparisons {'requested' if row['seed_comparisons_requested'] else 'held'}; "
                  f"checks: {'PASS' if not failed else 'FAIL ' + ', '.join(failed)}")
    largest = rows[-1]
    checks_passed = all(all(row["checks"].values()) for row in rows)
    met = {"checks": checks_passed}
    scope = (f"at {largest['partitions']:,} partitions" + ("" if largest["partitions"] >= TARGET_PARTITIONS else
             f" (the targets are for {TARGET_PARTITIONS:,}: a PASS here is not a PASS there)"))
    for figure, target in TARGETS.items():
        met[f"{figure}_at_largest"] = largest[figure] <= target
        print(f"  {figure} {largest[figure]:.2f} s {scope} (target <= {target:g} s): "
              f"{'PASS' if met[f'{figure}_at_largest'] else 'FAIL'}")
    extrapolated, growth = {}, {}
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        for figure in FIGURES:
            slope = (b[figure] - a[figure]) / (b["partitions"] - a["partitions"])
            extrapolated[figure] = b[figure] + slope * (TARGET_PARTITIONS - b["partitions"])
            growth[figure] = math.log(b[figure] / a[figure]) / math.log(b["partitions"] / a["partitions"])
            print(f"  {figure}: {1000 * slope:.2f} ms per partition, growth exponent {growth[figure]:.2f}; "
                  f"extrapolated to {TARGET_PARTITIONS:,} partitions: {extrapolated[figure]:.1f} s")
        met["tick_growth_at_most_target"] = growth["tick_steady_seconds"] <= TICK_GROWTH_TARGET
        print(f"  quiet tick growth exponent {growth['tick_steady_seconds']:.2f} from {a['partitions']:,} to "
              f"{b['partitions']:,} partitions (target <= {TICK_GROWTH_TARGET} from 1,000 to 10,000): "
              f"{'PASS' if met['tick_growth_at_most_target'] else 'FAIL'}")
    met["only_seed_comparisons_need_work"] = all(row["comparisons_needing_work_after_new_card"] == 1 for row in rows)
    elsewhere = sorted({cause for row in rows for cause in row["comparisons_causes_elsewhere"]
                        if "is missing" not in cause})
    print(f"  after the new card only the seed dataset's comparisons need work: "
          f"{'PASS' if met['only_seed_comparisons_need_work'] else 'FAIL'}"
          + (f" (the others: {'; '.join(elsewhere)})" if elsewhere else ""))
    print(f"  checks at every size: {'PASS' if checks_passed else 'FAIL'}")
    print(json.dumps(record_result("bench_summary", {
        "storage": args.storage, "rows": rows, "growth_exponents": growth,
        f"seconds_at_{TARGET_PARTITIONS}_extrapolated": extrapolated,
        "targets": {**TARGETS, "tick_growth_exponent": TICK_GROWTH_TARGET, "partitions": TARGET_PARTITIONS},
        "load_average": os.getloadavg()[0], "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
