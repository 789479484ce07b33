"""``embedpyramid`` command line: run the evaluation graph, print the leaderboard.

``embedpyramid run`` materializes the Dagster graph in-process (the same assets the UI
shows); it imports the orchestration layer lazily from the project checkout, so the core
package itself never imports Dagster.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from embedpyramid.config import ConfigError
from embedpyramid.data import DataError
from embedpyramid.encode import EncodeError
from embedpyramid.reports.results import format_leaderboard, read_leaderboard
from embedpyramid.reports.summary import verdict_texts
from embedpyramid.store import ArtifactStore


def project_root() -> Path:
    """The checkout holding ``workspace.yaml`` and ``pipelines/``: the current folder or a parent,
    else the folder above this package (an editable install)."""
    here = Path.cwd()
    for base in (here, *here.parents, Path(__file__).resolve().parent.parent):
        if (base / "workspace.yaml").is_file() and (base / "pipelines" / "runner.py").is_file():
            return base
    raise SystemExit(
        "embedpyramid run needs the project checkout (workspace.yaml, pipelines/, assets/, resources/): "
        "run it from the repository root"
    )


def _csv(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedpyramid", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="materialize the evaluation graph and print the leaderboard")
    run.add_argument("--configs", help="config folder (default: $EMBEDPYRAMID_CONFIGS or <repo>/configs)")
    run.add_argument("--data", help="data folder for every artefact (default: $EMBEDPYRAMID_DATA or <repo>/data)")
    run.add_argument("--models", help="comma-separated model card names (default: all in models.yaml)")
    run.add_argument("--datasets", help="comma-separated dataset names (default: all in datasets.yaml)")
    board = commands.add_parser("leaderboard", help="print the leaderboard from <data>/results.duckdb")
    board.add_argument("--data", help="data folder (default: $EMBEDPYRAMID_DATA or ./data)")
    board.add_argument("--format", choices=["table", "json", "csv"], default="table")
    return parser


def _run(args: argparse.Namespace) -> int:
    root = project_root()
    configs = Path(args.configs or os.environ.get("EMBEDPYRAMID_CONFIGS") or root / "configs")
    data = Path(args.data or os.environ.get("EMBEDPYRAMID_DATA") or root / "data")
    sys.path.insert(0, str(root))
    runner = importlib.import_module("pipelines.runner")
    report = runner.run_pipeline(configs, data, models=_csv(args.models), datasets=_csv(args.datasets),
                                 log=lambda line: print(line, file=sys.stderr))
    db = data.expanduser().resolve() / "results.duckdb"
    if db.is_file():
        print(format_leaderboard(read_leaderboard(db)))
        print(f"\nresults: {db}", file=sys.stderr)
    _print_verdict(ArtifactStore(data.expanduser().resolve()))
    for failure in report.failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if report.failures else 0


def _print_verdict(store: ArtifactStore) -> None:
    """The verdict of every dataset, then where the report is: the last thing ``run`` prints."""
    verdicts = verdict_texts(store.comparisons_dir)
    if verdicts:
        print("\nverdict:")
        for text in verdicts:
            print(f"  {text}")
    report = store.report_dir / "report.html"
    if report.is_file():
        print(f"\nreport: {report}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        data = Path(args.data or os.environ.get("EMBEDPYRAMID_DATA") or "data").expanduser().resolve()
        print(format_leaderboard(read_leaderboard(data / "results.duckdb"), args.format))
        return 0
    except (ConfigError, DataError, EncodeError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
