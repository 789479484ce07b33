"""The documentation stays true — the README and every page under docs/: every repository path it
names exists in a clone, every card key it shows is the default config's, every ``embedpyramid``
command and flag it shows is the CLI's, every benchmark it shows exists with the flags it gives,
its list of ``status`` levels is the graph's, every key of every config file is documented, and the
site builds with ``mkdocs build --strict``. The commands themselves are run elsewhere: the install
and test commands by CI (tests/test_readme.py), ``embedpyramid run`` and the ``query`` examples by
the default-graph test (tests/graph/test_pipeline.py), ``dagster dev`` by the UI test
(tests/graph/test_ui.py), which read them from here; the benchmarks, minutes each, are not run."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from readme import (
    DOCS,
    README,
    REPO,
    documents,
    fenced_blocks,
    inline_code,
    layout_paths,
    shell_commands,
    text_of,
)

from embedpyramid.config import load_config

# What a path-like code span names when it is not a repository path: the run tags the CLI sets.
RUN_TAGS = {"embedpyramid/cli", "embedpyramid/command", "embedpyramid/configs"}
SUFFIXES = (".py", ".yaml", ".yml", ".md", ".toml", ".json", ".jsonl", ".txt", ".cfg", ".html", ".j2")


def tracked() -> set[str]:
    """Every file a clone has, and every folder above one."""
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: what a clone holds is unknown")
    paths = set()
    for name in files.splitlines():
        parts = name.split("/")
        paths |= {"/".join(parts[:i]) + "/" for i in range(1, len(parts))} | {name}
    return paths


def named_paths(path: Path, top: set[str]) -> list[str]:
    """The repository paths a document names: code spans (and, in the README, link targets) that
    end in ``/`` or a file suffix and start at a top-level entry of the repository (artefacts under
    the data folder, placeholders and URLs are not repository paths), plus its layout tree."""
    candidates = inline_code(path)
    if path == README:
        candidates += re.findall(r"\]\(([^)#\s]+)\)", text_of(path))
    found = [c for c in candidates
             if c.split("/")[0] in top and "<" not in c and " " not in c
             and (c.endswith("/") or c.endswith(SUFFIXES)) and c not in RUN_TAGS]
    return found + layout_paths(path)


def in_clone(path: str, have: set[str]) -> bool:
    return path in have or path.rstrip("/") + "/" in have


def test_every_path_the_documents_name_is_in_a_clone():
    have = tracked()
    top = {path.split("/")[0] for path in have}
    named = {document.relative_to(REPO).as_posix(): named_paths(document, top) for document in documents()}
    assert len(named["README.md"]) > 15 and len(named["docs/architecture.md"]) > 30, named  # the parser finds them
    assert sum(map(len, named.values())) > 150
    missing = sorted({f"{document}: {path}" for document, paths in named.items() for path in paths
                      if not in_clone(path, have)})
    assert missing == [], f"the documents name paths a clone does not have: {missing}"


def test_the_card_keys_shown_are_the_default_configs():
    keys = {model.name: model.key for model in load_config(REPO / "configs").models.values()}
    shown = {document.name: re.findall(r"\b([a-z0-9][a-z0-9-]*)@([0-9a-f]{7})\b", text_of(document))
             for document in documents()}
    wrong = sorted({f"{document}: {name}@{digest}" for document, found in shown.items() for name, digest in found
                    if name in keys and f"{name}@{digest}" != keys[name]})
    assert any(shown.values()) and wrong == [], f"card keys that are not the default's: {wrong} (now {keys})"


def cli_help(*args: str) -> str:
    """``embedpyramid [args] --help``, as the CLI prints it."""
    from embedpyramid.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit):
        main([*args, "--help"])
    return printed.getvalue()


def cli_commands() -> dict[str, set[str]]:
    """Every subcommand of ``embedpyramid`` with its flags, from the CLI's own help."""
    listed = re.search(r"\{([a-z,-]+)\}", cli_help()).group(1).split(",")
    return {command: set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cli_help(command))) - {"--help"}
            for command in listed}


def shown_cli_commands() -> list[tuple[str, list[str]]]:
    """``(document, words after the program)`` of every ``embedpyramid`` command the documents show:
    in their shell commands, the lines of their other fenced blocks that start with the program (a
    synopsis), and their inline code that does."""
    found = []
    for document in documents():
        lines = shell_commands([document])
        lines += [line for info, body in fenced_blocks(document) if info.split(" ")[0] != "bash"
                  for line in body.splitlines() if re.match(r"(\S*/)?embedpyramid ", line)]
        lines += [span for span in inline_code(document) if re.match(r"(\S*/)?embedpyramid [a-z]", span)]
        for line in lines:
            for part in line.split(" && "):
                words = part.split()
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words = words[1:]
                if words and Path(words[0]).name == "embedpyramid":
                    found.append((document.name, words[1:]))
    return found


def test_every_embedpyramid_command_and_flag_shown_is_the_clis():
    commands = cli_commands()
    shown = shown_cli_commands()
    assert len(shown) >= 15 and {words[0] for _, words in shown if words} >= set(commands), shown
    wrong = []
    for document, words in shown:
        if not words or words[0] not in commands:
            wrong.append(f"{document}: embedpyramid {' '.join(words)} (commands: {sorted(commands)})")
            continue
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", " ".join(words[1:])))
        wrong += [f"{document}: embedpyramid {words[0]} has no {flag}" for flag in sorted(flags - commands[words[0]])]
    # The CLI page's own flags, named in its prose.
    every_flag = set().union(*commands.values())
    wrong += [f"cli.md: {span} is no flag of any command" for span in inline_code(DOCS / "cli.md")
              if re.fullmatch(r"--[a-z][a-z0-9-]*", span) and span not in every_flag]
    assert wrong == []


def test_every_benchmark_shown_exists_with_the_flags_it_gives():
    shown = [command for command in shell_commands() if "benchmarks/" in command]
    assert len(shown) >= 15
    for command in shown:
        script = REPO / re.search(r"benchmarks/\S+\.py", command).group(0)
        assert script.is_file(), command
        tree = ast.parse(script.read_text())
        defined = {arg.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "attr", None) == "add_argument"
                   for arg in node.args if isinstance(arg, ast.Constant)}
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", command))
        assert flags <= defined, f"{script.name} defines no {sorted(flags - defined)}"
    # Every script of benchmarks/ (but the results' plumbing) is described with its command.
    scripts = {path.name for path in (REPO / "benchmarks").glob("*.py")} - {"results.py", "readme.py"}
    described = {re.search(r"benchmarks/(\S+\.py)", command).group(1) for command in shown}
    assert scripts <= described, f"docs/benchmarks.md does not show {sorted(scripts - described)}"


def test_the_status_levels_listed_are_the_graphs_asset_groups(tmp_path):
    from pipelines.graph import build_definitions

    sentence = re.search(r"\(the asset groups: ([^)]*)\)", text_of(DOCS / "cli.md").replace("\n", " ")).group(1)
    listed = set(re.findall(r"`([a-z0-9_]+)`", sentence))
    graph = build_definitions(REPO / "configs", tmp_path).resolve_asset_graph()
    groups = {graph.get(key).group_name for key in graph.materializable_asset_keys}
    assert listed == groups


def config_models() -> list[type[BaseModel]]:
    """The models a user writes in the config files, as the files nest them: an eval card, every
    loader's dataset entry, the protocol, ann.yaml's settings and index spec, every kind of
    system with the systems' settings, and judge.yaml."""
    from embedpyramid.config.ann import AnnSettings, IndexSpec
    from embedpyramid.config.datasets import LOADERS
    from embedpyramid.config.judge import DownstreamConfig
    from embedpyramid.config.models import ModelCard
    from embedpyramid.config.protocol import Protocol
    from embedpyramid.config.systems import (
        BiEncoderSystem,
        Bm25System,
        CrossEncoderSystem,
        RrfSystem,
        SystemsSettings,
        WeightedSystem,
    )

    return [ModelCard, *LOADERS.values(), Protocol, AnnSettings, IndexSpec, Bm25System, RrfSystem, WeightedSystem,
            CrossEncoderSystem, BiEncoderSystem, SystemsSettings, DownstreamConfig]


def config_keys(model: type[BaseModel], seen: set[type]) -> set[str]:
    """The keys of a config model and of every model nested in its fields (but a sweep's: it is
    written ``{efSearch: [16, 32]}``, its parameter's name as the key)."""
    from embedpyramid.config.ann import Sweep

    if model in seen or model is Sweep:
        return set()
    seen.add(model)
    keys = set()
    for name, field in model.model_fields.items():
        keys.add(field.alias or name)
        pending = [field.annotation]
        while pending:
            annotation = pending.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                keys |= config_keys(annotation, seen)
            pending += [arg for arg in typing.get_args(annotation)
                        if isinstance(arg, type | types.UnionType) or typing.get_origin(arg) is not None]
    return keys


def test_every_key_of_every_config_file_is_documented():
    from embedpyramid.config.ann import IndexSpec

    keys = set().union(*(config_keys(model, set()) for model in config_models()))
    keys -= {"name"} & set(IndexSpec.model_fields)  # an index spec's name is its key under `indexes:`
    documented = {word for span in inline_code(DOCS / "configuration.md")
                  for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}
    assert len(keys) > 120
    assert sorted(keys - documented) == [], "docs/configuration.md does not document these keys"


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install mkdocs mkdocs-material)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install mkdocs-material)")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml",
                            "--site-dir", str(tmp_path / "site")],
                           cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-5000:]
    assert "WARNING" not in built.stderr, built.stderr[-5000:]
    assert (tmp_path / "site" / "benchmarks" / "index.html").read_text().count("<tr>") > 15  # the figures' table


def test_no_document_holds_a_dated_measurement():
    dated = [f"{document.relative_to(REPO)}:{number}: {line.strip()}" for document in documents()
             for number, line in enumerate(text_of(document).splitlines(), start=1)
             if re.search(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", line)]
    assert dated == [], "history is git's, figures are the benchmarks' results files"

