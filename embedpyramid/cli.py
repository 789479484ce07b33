"""``embedpyramid`` command line: run the evaluation graph, show its state, print the leaderboard.

``run``, ``backfill`` and ``status`` work on the Dagster graph in-process (the same assets, runs
and stale status the UI shows) through :mod:`pipelines.runner` and :mod:`pipelines.status`,
installed with this package and imported only by these commands: the rest of the core never
imports Dagster, and ``leaderboard`` runs without it. The runner reports what goes wrong as the core's exception types
(:class:`~embedpyramid.store.DataFolderBusy`, :class:`~embedpyramid.store.RunHistoryError`). Errors in the data, the config or
the environment print one line naming the file and what to do (``--verbose`` adds tracebacks).
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from embedpyramid.config import ConfigError
from embedpyramid.data import DataError
from embedpyramid.encode import EncodeError
from embedpyramid.progress import ProgressDisplay, showing
from embedpyramid.store import ArtifactStore, CorruptFileError, DataFolderBusy, RunHistoryError
from embedpyramid.summary.results import (
    QueryError,
    ResultsBusyError,
    format_leaderboard,
    format_rows,
    query_results,
    read_leaderboard,
)

EXIT_FAILURES, EXIT_ERROR, EXIT_INTERRUPTED = 1, 2, 130


def project_root() -> Path:
    """The checkout holding ``workspace.yaml`` and ``pipelines/``: the current folder or a parent,
    else the folder above this package (an editable install)."""
    here = Path.cwd()
    for base in (here, *here.parents, Path(__file__).resolve().parent.parent):
        if (base / "workspace.yaml").is_file() and (base / "pipelines" / "runner.py").is_file():
            return base
    raise SystemExit(
        "embedpyramid needs the project checkout (workspace.yaml, pipelines/, assets/, resources/): "
        "run it from the repository root"
    )


def _csv(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedpyramid", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def folders(command: argparse.ArgumentParser) -> None:
        command.add_argument("--configs", help="config folder (default: $EMBEDPYRAMID_CONFIGS or <repo>/configs)")
        command.add_argument("--data", help="data folder or URL (s3://, gs://, file://) for every artefact "
                                            "(default: $EMBEDPYRAMID_DATA or <repo>/data)")
        command.add_argument("--verbose", action="store_true", help="Dagster's event log and full tracebacks")

    run = commands.add_parser("run", help="materialize what is missing or stale and print the leaderboard")
    folders(run)
    run.add_argument("--models", help="comma-separated card names or keys (default: all in models.yaml)")
    run.add_argument("--datasets", help="comma-separated dataset names (default: all in datasets.yaml)")
    run.add_argument("--no-wait", action="store_true", help="exit instead of waiting when another run holds the data folder")
    backfill = commands.add_parser("backfill", help="evaluate one card on every dataset, then rebuild the summaries")
    folders(backfill)
    backfill.add_argument("--model", required=True, help="the card's name or key (name@hash7)")
    backfill.add_argument("--no-wait", action="store_true", help="exit instead of waiting for another run")
    status = commands.add_parser("status", help="per dataset × model × level: fresh, stale and why, missing, failed")
    folders(status)
    status.add_argument("--models", help="comma-separated card names or keys (default: all)")
    status.add_argument("--datasets", help="comma-separated dataset names (default: all)")
    status.add_argument("--format", choices=["table", "json"], default="table")
    board = commands.add_parser("leaderboard", help="print the leaderboard from <data>/results.duckdb: the headline "
                                                    "metrics and each dataset's verdict (--all: every metric)")
    board.add_argument("--data", help="data folder or URL (default: $EMBEDPYRAMID_DATA or <repo>/data, as for run)")
    board.add_argument("--all", action="store_true", help="every metric of every system, as a table per dataset")
    board.add_argument("--format", choices=["table", "json", "csv"], default="table",
                       help="json and csv: every row of the leaderboard view (long format)")
    query = commands.add_parser("query", help="run one read-only SQL query on <data>/results.duckdb")
    query.add_argument("sql", help="e.g. \"SELECT model, mean FROM leaderboard WHERE metric = 'nDCG@10'\"")
    query.add_argument("--data", help="data folder or URL (default: $EMBEDPYRAMID_DATA or <repo>/data, as for run)")
    query.add_argument("--format", choices=["table", "json", "csv"], default="table")
    return parser


def _folders(args: argparse.Namespace, root: Path) -> tuple[Path, str]:
    """The config and data folders of every command: the flags, else the environment, else the
    checkout's ``configs`` and ``data`` (never the current folder)."""
    configs = Path(getattr(args, "configs", None) or os.environ.get("EMBEDPYRAMID_CONFIGS") or root / "configs")
    data = args.data or os.environ.get("EMBEDPYRAMID_DATA") or str(root / "data")
    return configs, data


class InstallError(RuntimeError):
    """The environment lacks a package of the project; the message says how to install it."""


@contextmanager
def _installed() -> Iterator[None]:
    """An orchestration layer's import, with one line saying how to install it if it is missing."""
    try:
        yield
    except ModuleNotFoundError as error:
        package = (error.name or "").split(".")[0]
        if package not in ("pipelines", "graphbase", "assets", "resources"):
            raise
        raise InstallError(f"the package {package!r} is not installed in {sys.prefix} (an install from before "
                           "the orchestration layer was packaged?): run `pip install -e .` in the checkout") from None


def _runner() -> ModuleType:
    """The orchestration layer's runner, imported when a command needs it (the core never imports Dagster)."""
    with _installed():
        import pipelines.runner
    return pipelines.runner


def _status_command() -> ModuleType:
    """The orchestration layer's ``status``, imported when the command needs it."""
    with _installed():
        import pipelines.status
    return pipelines.status


def _warm() -> ModuleType:
    """The warm start (:mod:`graphbase.warm`), which answers without Dagster when nothing changed."""
    with _installed():
        import graphbase.warm
    return graphbase.warm


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    root = project_root()
    configs, data = _folders(args, root)
    models = [args.model] if args.command == "backfill" else _csv(args.models)
    datasets = None if args.command == "backfill" else _csv(args.datasets)
    display = ProgressDisplay(sys.stderr)
    failures: list[str] = []
    warm = _warm()
    if warm.warm_status(configs, data, models, datasets, lock=True) is not None:
        display.line(warm.UP_TO_DATE_LINE)
    else:
        run_pipeline = _runner().run_pipeline
        with showing(display):
            failures = run_pipeline(configs, data, models=models, datasets=datasets, log=display.line,
                                    wait=not args.no_wait, verbose=args.verbose, command=argv).failures
    _print_answer(ArtifactStore.at(data))
    for failure in failures:
        _stderr(f"FAILED {failure}")
    return EXIT_FAILURES if failures else 0


def _status(args: argparse.Namespace) -> int:
    root = project_root()
    configs, data = _folders(args, root)
    models, datasets = _csv(args.models), _csv(args.datasets)
    rows = _warm().warm_status(configs, data, models, datasets, lock=False)
    if rows is None:
        rows = _status_command().project_status(configs, data, models=models, datasets=datasets)
    if args.format == "json":
        print(json.dumps([row.__dict__ for row in rows], indent=2))
        return 0
    table = [["dataset", "model", "level", "state", "why"]] + [
        [row.dataset or "-", row.model or "-", row.level, row.state, row.why if args.verbose else row.brief]
        for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line[:4], widths, strict=True)) + "  " + line[4])
    return 0


def _environment_error(error: OSError) -> str | None:
    """A one-line message for a disk or permission problem, or None for other errors."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return (f"{error.filename or 'a file'}: {error.strerror}; free space on that disk (or pass --data "
                "elsewhere) and rerun: finished artefacts are kept, nothing was half-written")
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"cannot write {error.filename or 'the data folder'}: {error.strerror}; make the data folder "
                "writable or pass --data to one that is")
    return None


def _print_answer(store: ArtifactStore) -> None:
    """The headline leaderboard and one verdict line per dataset, then where the report and the
    database are: the last thing ``run`` prints."""
    from embedpyramid.summary.answer import terminal_answer

    db = store.results_db
    if db.is_file():
        print(terminal_answer(db, store.report_dir))
    report = store.report_dir / "report.html"
    print()
    if report.is_file():
        print(f"report: {report}")
    if db.is_file():
        print(f"results: {db} (every metric: embedpyramid leaderboard --all)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        return _command(args, argv)
    finally:
        # What the command built (Dagster's and torch's object graphs) would otherwise be
        # garbage-collected object by object as the interpreter exits: seconds after a run,
        # more after Ctrl-C. Frozen objects are left to the process's exit.
        gc.freeze()


def _command(args: argparse.Namespace, argv: list[str]) -> int:
    try:
        if args.command in ("run", "backfill"):
            return _run(args, argv)
        if args.command == "status":
            return _status(args)
        store = ArtifactStore.at(_folders(args, project_root())[1])
        db = store.results_db
        if args.command == "query":
            print(format_rows(query_results(db, args.sql), args.format))
        elif args.all or args.format != "table":
            print(format_leaderboard(read_leaderboard(db), args.format))
        else:
            from embedpyramid.summary.answer import terminal_answer

            print(terminal_answer(db, store.report_dir))
        return 0
    except (ConfigError, DataError, EncodeError, FileNotFoundError, ResultsBusyError, CorruptFileError,
            QueryError, DataFolderBusy, RunHistoryError, InstallError) as error:
        _report(error, str(error), args)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _stderr("\ninterrupted: the run in progress is marked canceled; everything finished (and every finished "
                "shard of an encode) is kept, nothing is half-written; rerun the command to resume")
        return EXIT_INTERRUPTED
    except OSError as error:
        message = _environment_error(error)
        if message is None:
            raise
        _report(error, message, args)
        return EXIT_ERROR


def _report(error: BaseException, message: str, args: argparse.Namespace) -> None:
    if getattr(args, "verbose", False):
        traceback.print_exception(error)
    _stderr(f"error: {message}")


if __name__ == "__main__":
    sys.exit(main())
