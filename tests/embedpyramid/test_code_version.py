import ast
import textwrap
from pathlib import Path

import pytest

from embedpyramid.code_version import SourceError, SourceTree, scan_imports, source_version

REPO = Path(__file__).resolve().parents[2]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


PACKAGE = {
    "pkg/__init__.py": "from pkg.api import run\n",
    "pkg/api.py": "from pkg.core import compute\n\n\ndef run():\n    return compute()\n",
    "pkg/core.py": "import numpy as np\n\nfrom . import helpers\nfrom .maths import mean\n",
    "pkg/helpers.py": "VALUE = 1\n",
    "pkg/maths.py": "def mean(values):\n    from pkg.lazy import total\n    return total(values) / len(values)\n",
    "pkg/lazy.py": "def total(values):\n    return sum(values)\n",
    "pkg/other.py": "from pkg.sub import leaf\n",
    "pkg/sub/__init__.py": "from pkg.sub.leaf import heavy\n",
    "pkg/sub/leaf.py": "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
                       "if TYPE_CHECKING:\n    from pkg.api import run\n\n\ndef heavy():\n    pass\n",
    "pkg/cycle_a.py": "import pkg.cycle_b\n",
    "pkg/cycle_b.py": "from pkg import cycle_a\n",
}
ENTRIES = ("pkg.api", "pkg.core", "pkg.maths", "pkg.other", "pkg.helpers", "pkg.cycle_a")


def versions(root: Path) -> dict[str, str]:
    tree = SourceTree(root, "pkg")
    return {module: tree.version(module) for module in ENTRIES}


def test_closure_follows_module_level_lazy_and_relative_imports(tmp_path):
    write(tmp_path, PACKAGE)
    tree = SourceTree(tmp_path, "pkg")
    assert tree.closure("pkg.api") == ("pkg.api", "pkg.core", "pkg.helpers", "pkg.lazy", "pkg.maths")
    # ``from pkg.sub import leaf`` loads the submodule, not the package's __init__; TYPE_CHECKING
    # imports never run.
    assert tree.closure("pkg.other") == ("pkg.other", "pkg.sub.leaf")
    assert tree.closure("pkg.cycle_a") == tree.closure("pkg.cycle_b") == ("pkg.cycle_a", "pkg.cycle_b")
    assert tree.closure("pkg") == ("pkg", "pkg.api", "pkg.core", "pkg.helpers", "pkg.lazy", "pkg.maths")


def test_editing_a_module_changes_exactly_the_versions_of_its_importers(tmp_path):
    write(tmp_path, PACKAGE)
    before = versions(tmp_path)
    assert len(set(before.values())) == len(before)
    with (tmp_path / "pkg/lazy.py").open("a") as file:
        file.write("# a comment is a change of source\n")
    after = versions(tmp_path)
    # pkg.lazy is imported inside a function of pkg.maths: that counts.
    assert {m for m in ENTRIES if after[m] != before[m]} == {"pkg.api", "pkg.core", "pkg.maths"}
    with (tmp_path / "pkg/cycle_b.py").open("a") as file:
        file.write("\n")
    again = versions(tmp_path)
    assert {m for m in ENTRIES if again[m] != after[m]} == {"pkg.cycle_a"}
    assert SourceTree(tmp_path, "pkg").version("pkg.api") == again["pkg.api"], "a version is a function of source"



def test_the_data_files_beside_a_package_init_are_part_of_its_source(tmp_path):
    write(tmp_path, {**PACKAGE, "pkg/sub/page.html.j2": "<p>{{ text }}</p>\n"})
    before = {module: SourceTree(tmp_path, "pkg").version(module) for module in ("pkg.sub", "pkg.other", "pkg.api")}
    (tmp_path / "pkg/sub/page.html.j2").write_text('<p class="note">{{ text }}</p>\n')
    after = {module: SourceTree(tmp_path, "pkg").version(module) for module in before}
    # A template edit reaches the importers of the package that holds it; pkg.other imports
    # only pkg.sub.leaf, not the package.
    assert {module for module in before if after[module] != before[module]} == {"pkg.sub"}

def test_a_moved_tree_keeps_its_versions(tmp_path):
    write(tmp_path / "a", PACKAGE)
    write(tmp_path / "b", PACKAGE)
    assert versions(tmp_path / "a") == versions(tmp_path / "b")


def test_function_version_reads_what_the_function_uses(tmp_path):
    write(tmp_path, PACKAGE)
    write(tmp_path, {"assets.py": """\
        from pkg.helpers import VALUE
        from pkg.other import nothing_used_here


        def factory(family):
            from pkg.maths import mean

            def asset(
                context,
            ) -> int:
                from pkg.api import run

                return run() + VALUE + mean([family]) + _helper()

            return asset


        def _helper():
            from pkg.lazy import total
            return total([1])


        def unrelated():
            import pkg.cycle_a
        """})
    tree = SourceTree(tmp_path, "pkg")
    assert tree.function_modules(tmp_path / "assets.py", "asset") == {"pkg.api", "pkg.helpers", "pkg.maths",
                                                                      "pkg.lazy"}
    assert tree.function_modules(tmp_path / "assets.py", "unrelated") == {"pkg.cycle_a"}
    with pytest.raises(SourceError, match="0 functions named 'missing'"):
        tree.function_modules(tmp_path / "assets.py", "missing")
    with pytest.raises(SourceError, match="module 'pkg.absent' not found"):
        tree.version("pkg.absent")


def _ast_imports(text: str) -> set[tuple]:
    found, stack = set(), list(ast.parse(text).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            stack.extend(node.orelse)
        elif isinstance(node, ast.Import):
            found |= {(None, 0, a.name, a.asname or a.name.split(".")[0]) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {(node.module or "", node.level, a.name, a.asname or a.name) for a in node.names}
        else:
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return found


@pytest.mark.parametrize("folder", ["embedpyramid", "graphbase", "assets", "pipelines", "resources"])
def test_the_import_scan_agrees_with_the_python_parser_on_the_project(folder):
    """The scan reads lines, not a syntax tree (a warm start must stay cheap): on every file of
    the project it finds exactly the import statements Python's own parser finds."""
    for path in sorted((REPO / folder).rglob("*.py")):
        text = path.read_text()
        scanned = {(s.base, s.level, name, bound) for s in scan_imports(text) for name, bound in s.names}
        assert scanned == _ast_imports(text), path


def test_the_project_versions_read_the_installed_package():
    assert source_version("embedpyramid.tasks.sts") == SourceTree(REPO).version("embedpyramid.tasks.sts")
    assert "embedpyramid.tasks.classification" not in SourceTree(REPO).closure("embedpyramid.tasks.sts")
