"""Imports point one way. Above the core, the Dagster layers: core ``embedpyramid`` ← ``graphbase``
← ``resources`` ← ``assets`` ← ``pipelines``. Inside the core, three layers: the shared floors
(config, data, encode, stats, rendering and the small modules beside them), the pyramid's levels
beside one another, and above them what reads every level (the cross-level summary and the CLI).
A level imports the floors and the levels below it, and retrieval — L2's exact search and
metrics, with which every level that ranks documents scores its runs.

Every import statement (lazy ones inside functions included; those under ``if TYPE_CHECKING:``
too) is read with :mod:`ast`; the nodes are the top-level packages and, inside the core, its
subpackages and top-level modules. There is no allowlist: a failure names the arrow that breaks
the rule, with the file and line of the import that makes it."""

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORE = "embedpyramid"
LAYERS = ("graphbase", "resources", "assets", "pipelines")
PACKAGES = (CORE, *LAYERS)
CLI_ENTRIES = frozenset({("embedpyramid.cli", "pipelines"), ("embedpyramid.cli", "graphbase")})
"""The only imports of a layer by the core: the CLI's ``run``, ``backfill`` and ``status`` import
the runner, and before it the warm start (``graphbase.warm``); nothing imports the CLI, so they
close no cycle."""
FLOORS = frozenset({"config", "data", "encode", "stats", "rendering", "store", "hashing", "hub", "progress", "usage",
                    "vectors", "http", "code_version", "current_inputs"})
LEVELS = {"geometry": 1, "retrieval": 2, "tasks": 2, "transfer": 3, "serving": 4, "systems": 5, "downstream": 6,
          "efficiency": 7}
"""Each level's rank; efficiency (what a model costs to run, beside every level) ranks last."""
SHARED_LEVEL = "retrieval"
TOP = frozenset({"summary", "starter", "cli"})


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> Iterator[tuple[str, int]]:
    """(absolute module name, line) of every import statement in a file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base, node.lineno


def node(module: str) -> str:
    """A top-level package, or for the core its subpackage or top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == CORE and len(parts) > 1 else parts[0]


@cache
def import_graph() -> dict[str, dict[str, str]]:
    """node → {imported node: where (file:line) one such import is}."""
    graph: dict[str, dict[str, str]] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            source = node(module_name(path))
            for module, line in imported_modules(path):
                target = node(module)
                if target.split(".")[0] in (*PACKAGES, "dagster") and target != source:
                    graph.setdefault(source, {}).setdefault(target, f"{path.relative_to(REPO)}:{line}")
    return graph


def strongly_connected(graph: dict[str, dict[str, str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one node: each holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(at: str) -> None:
        index[at] = low[at] = len(index)
        stack.append(at)
        for target in graph.get(at, {}):
            if target not in index:
                visit(target)
                low[at] = min(low[at], low[target])
            elif target in stack:
                low[at] = min(low[at], index[target])
        if low[at] == index[at]:
            component = {stack.pop()}
            while at not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for start in sorted(graph):
        if start not in index:
            visit(start)
    return components


def cycle_through(graph: dict[str, dict[str, str]], component: set[str], edge: tuple[str, str]) -> list[str]:
    """One cycle of ``component`` through ``edge``, each step with the import that makes it."""
    source, target = edge
    paths, seen = [[target]], {target}
    while paths:
        path = paths.pop(0)
        if path[-1] == source:
            steps = [source, *path]
            return [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(steps, steps[1:], strict=False)]
        for step in sorted(graph.get(path[-1], {})):
            if step in component and step not in seen:
                seen.add(step)
                paths.append([*path, step])
    raise AssertionError(f"{edge} is not on a cycle")


def test_the_core_imports_no_dagster_and_no_layer_but_the_cli_the_runner_and_the_warm_start():
    graph = import_graph()
    wrong = {f"{source} -> {target} ({where})" for source, targets in graph.items() if source.startswith(CORE)
             for target, where in targets.items()
             if target.split(".")[0] in (*LAYERS, "dagster") and (source, target) not in CLI_ENTRIES}
    assert not wrong, "the core imports Dagster or a layer above it: " + "; ".join(sorted(wrong))


def core_part(node: str) -> str | None:
    """``config`` for ``embedpyramid.config``; None outside the core."""
    return node.removeprefix(f"{CORE}.") if node.startswith(f"{CORE}.") else None


def test_every_core_package_has_a_layer():
    parts = {core_part(node) for node in import_graph()} - {None}
    unplaced = sorted(parts - FLOORS - set(LEVELS) - TOP)
    assert not unplaced, f"core packages without a layer (add each to FLOORS, LEVELS or TOP): {unplaced}"


def layer_problem(source: str, target: str) -> str | None:
    """Why the import ``source -> target`` (core parts) climbs a layer, or None."""
    if source in FLOORS and target not in FLOORS:
        return "a floor imports a level or what sits above the levels"
    if source in LEVELS and target in TOP:
        return "a level imports what sits above the levels"
    if source in LEVELS and target in LEVELS and target != SHARED_LEVEL and LEVELS[target] >= LEVELS[source]:
        return f"a level imports one beside or above it (L{LEVELS[source]} -> L{LEVELS[target]})"
    return None


def test_the_core_layers_point_one_way():
    wrong = []
    for source, targets in import_graph().items():
        for target, where in targets.items():
            parts = core_part(source), core_part(target)
            if None not in parts and (problem := layer_problem(*parts)):
                wrong.append(f"{source} -> {target} ({where}): {problem}")
    assert not wrong, "imports that climb the core's layers:\n  " + "\n  ".join(sorted(wrong))


def test_layer_rule_names_each_kind_of_wrong_arrow():
    assert layer_problem("config", "retrieval") == "a floor imports a level or what sits above the levels"
    assert layer_problem("tasks", "summary") == "a level imports what sits above the levels"
    assert layer_problem("serving", "systems") == "a level imports one beside or above it (L4 -> L5)"
    assert layer_problem("retrieval", "tasks") == "a level imports one beside or above it (L2 -> L2)"
    assert layer_problem("geometry", "retrieval") is None
    assert layer_problem("systems", "serving") is None
    assert layer_problem("summary", "tasks") is None


def test_no_import_cycle():
    graph = import_graph()
    cycles = ["\n  ".join(cycle_through(graph, component, (source, target)))
              for component in strongly_connected(graph)
              for source in sorted(component)
              for target in sorted(set(graph.get(source, {})) & component)]
    assert not cycles, "import cycles (each listed through one of its arrows):\n  " + "\n\n  ".join(cycles)


def test_a_cycle_is_reported_with_the_arrow_that_closes_it():
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3"}, "d": {"a": "d.py:4"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert cycle_through(graph, {"a", "b", "c"}, ("c", "a")) == [
        "c -> a (c.py:3)", "a -> b (a.py:1)", "b -> c (b.py:2)"]
