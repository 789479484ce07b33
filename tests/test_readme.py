"""The README stays true: every path it names exists in a clone, every card key it shows is the
default config's, its list of `status` levels is the graph's, and every command it shows is run
by CI — the install and test commands by `.ci/run` itself, `embedpyramid run` and the `query`
examples by the default-graph test (tests/graph/test_pipeline.py), `dagster dev` by the UI test
(tests/graph/test_ui.py), which read them from here; the benchmarks, minutes each, are not run,
but their scripts and every flag the README gives them must exist."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess

import pytest
from readme import REPO, commands_of, inline_code, readme_text, shell_commands

from embedpyramid.config import load_config

# What a path-like code span names when it is not a path: the run tags the CLI sets.
RUN_TAGS = {"embedpyramid/cli", "embedpyramid/command", "embedpyramid/configs"}
SUFFIXES = (".py", ".yaml", ".yml", ".md", ".toml", ".json", ".txt", ".cfg", ".html", ".j2")


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


def named_paths() -> list[str]:
    """The repository paths the README names: code spans and link targets that end in ``/`` or a
    file suffix and start at a top-level entry of the repository (artefacts under the data
    folder, placeholders and URLs are not repository paths), plus the layout block's entries."""
    text = readme_text()
    candidates = [*inline_code(), *re.findall(r"\]\(([^)#\s]+)\)", text)]
    top = {path.split("/")[0] for path in tracked()}
    found = [c for c in candidates
             if c.startswith("../") or (c.split("/")[0] in top and "<" not in c and " " not in c
                                        and (c.endswith("/") or c.endswith(SUFFIXES)) and c not in RUN_TAGS)]
    layout = re.search(r"^## Layout\n\n```\n(.*?)^```", text, flags=re.S | re.M).group(1)
    parent, modules = "", ""
    for line in layout.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            parent = line.split()[0]
            found.append(parent)
        elif indent == 2 and line.split()[0].endswith("/"):
            found.append(parent + line.split()[0])
        elif indent == 2:  # "  efficiency, usage, vectors (…), store, …", over two lines: core modules
            modules += f" {line}"
    found += [f"embedpyramid/{name.strip()}.py" for name in re.sub(r"\([^)]*\)", "", modules).split(",")
              if modules]
    return found


def test_every_path_the_readme_names_is_in_a_clone():
    have = tracked()
    paths = named_paths()
    assert len(paths) > 40, paths  # the parser still finds the layout and the code spans
    missing = sorted({path for path in paths if path not in have and path.rstrip("/") + "/" not in have})
    assert missing == [], f"README names paths a clone does not have: {missing}"


def test_the_card_keys_it_shows_are_the_default_configs():
    keys = {model.name: model.key for model in load_config(REPO / "configs").models.values()}
    shown = re.findall(r"\b([a-z0-9][a-z0-9-]*)@([0-9a-f]{7})\b", readme_text())
    wrong = sorted({f"{name}@{digest}" for name, digest in shown
                    if name in keys and f"{name}@{digest}" != keys[name]})
    assert shown and wrong == [], f"README shows card keys that are not the default's: {wrong} (now {keys})"


def test_the_status_levels_it_lists_are_the_graphs_asset_groups(tmp_path):
    from pipelines.graph import build_definitions

    sentence = re.search(r"\(the asset groups: ([^)]*)\)", readme_text().replace("\n", " ")).group(1)
    listed = set(re.findall(r"`([a-z0-9_]+)`", sentence))
    graph = build_definitions(REPO / "configs", tmp_path).resolve_asset_graph()
    groups = {graph.get(key).group_name for key in graph.materializable_asset_keys}
    assert listed == groups


def test_ci_runs_the_install_and_test_commands_the_readme_shows():
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    ci = [line for line in lines if line and not line.startswith("#") and not line.endswith("\\")]
    quick_start, tests = shell_commands()[:2]
    assert tests in {shlex.join(shlex.split(line)) for line in ci}
    # The install, step by step as CI takes it (`python -m pip … --quiet` for `pip …`).
    ci_steps = [[word for word in shlex.split(line) if word != "--quiet"] for line in ci]
    for step in quick_start.split(" && ")[:3]:
        program, *rest = shlex.split(step)
        as_module = [program.replace("/pip", "/python"), "-m", "pip", *rest] if program.endswith("/pip") else None
        assert [program, *rest] in ci_steps or as_module in ci_steps, f"CI does not run the README's `{step}`"
    assert commands_of("embedpyramid")[0] == ["run"], "the quick start runs the default graph"


def test_every_benchmark_it_shows_exists_with_the_flags_it_gives():
    shown = [command for command in shell_commands() if "benchmarks/" in command]
    assert len(shown) >= 10
    for command in shown:
        script = REPO / re.search(r"benchmarks/\S+\.py", command).group(0)
        assert script.is_file(), command
        tree = ast.parse(script.read_text())
        defined = {arg.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "attr", None) == "add_argument"
                   for arg in node.args if isinstance(arg, ast.Constant)}
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", command))
        assert flags <= defined, f"{script.name} defines no {sorted(flags - defined)}"
