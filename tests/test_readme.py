"""The README is a front door: at most 250 lines, no dated measurement, its two commands — install
and run the main job; install the test extra and run the tests — exactly what CI runs, and a link to
every page of the documentation. What every document shows (paths, card keys, commands and flags)
is kept true by tests/test_docs.py."""

from __future__ import annotations

import re
import shlex

from readme import DOCS, REPO, commands_of, readme_text, shell_commands

MAX_LINES = 250


def ci_steps() -> tuple[list[list[str]], set[str]]:
    """Every command line of ``.ci/run`` as words (``--quiet`` dropped), and as written."""
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    ci = [line for line in lines if line and not line.startswith("#") and not line.endswith("\\")]
    return [[word for word in shlex.split(line) if word != "--quiet"] for line in ci], {
        shlex.join(shlex.split(line)) for line in ci}


def run_by_ci(step: str, steps: list[list[str]]) -> bool:
    """Whether CI runs an install step, as written or as ``python -m pip …``."""
    program, *rest = shlex.split(step)
    as_module = [program.replace("/pip", "/python"), "-m", "pip", *rest] if program.endswith("/pip") else None
    return [program, *rest] in steps or as_module in steps


def test_ci_runs_the_two_commands_the_readme_shows():
    quick_start, tests = shell_commands([REPO / "README.md"])[:2]
    steps, lines = ci_steps()
    *install, run = quick_start.split(" && ")
    *test_install, pytest_line = tests.split(" && ")
    assert shlex.split(run)[-2:] == [".venv/bin/embedpyramid", "run"], "the quick start runs the default graph"
    assert commands_of("embedpyramid")[0] == ["run"]  # what tests/graph/test_pipeline.py runs
    assert pytest_line in lines, "CI does not run the README's test command"
    missing = [step for step in [*install, *test_install] if not run_by_ci(step, steps)]
    assert missing == [], f"CI does not run the README's {missing}"


def test_the_main_install_pulls_no_extra():
    quick_start = shell_commands([REPO / "README.md"])[0]
    installs = [shlex.split(step) for step in quick_start.split(" && ") if "pip" in step and "install" in step]
    assert installs[-1][-2:] == ["-e", "."], "the main job's install is the project alone, no test or cluster extra"


def test_the_readme_is_a_front_door():
    text = readme_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert not re.search(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", text)
    for heading in ("## Quick start", "## Evaluate your own data and models", "## Layout", "## Read next"):
        assert heading in text


def test_the_readme_links_every_documentation_page():
    linked = set(re.findall(r"\]\((docs/[^)#\s]+\.md)", readme_text()))
    pages = {page.relative_to(REPO).as_posix() for page in DOCS.rglob("*.md")} - {"docs/index.md"}
    assert pages <= linked, f"the README's Read next does not link {sorted(pages - linked)}"
