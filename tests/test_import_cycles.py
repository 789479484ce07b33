"""Imports point one way: core ``embedpyramid`` ← ``graphbase`` ← ``resources`` ← ``assets`` ←
``pipelines``. Every import statement (lazy ones inside functions included; those under ``if
TYPE_CHECKING:`` too) is read with :mod:`ast`; the nodes are the top-level packages and, inside
the core, its subpackages and top-level modules."""

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORE = "embedpyramid"
LAYERS = ("graphbase", "resources", "assets", "pipelines")
PACKAGES = (CORE, *LAYERS)
CLI_ENTRIES = frozenset({("embedpyramid.cli", "pipelines"), ("embedpyramid.cli", "graphbase")})
"""The only imports of a layer by the core: the CLI's ``run``, ``backfill`` and ``status`` import
the runner, and before it the warm start (``graphbase.warm``); nothing imports the CLI, so they
close no cycle."""
KNOWN_CORE_CYCLES = frozenset({
    # Edges between core subpackages that already lie on a cycle (issue 25 breaks the layers'
    # cycles, not these): a new edge on a cycle fails; remove an entry once its edge is gone.
    ("config", "retrieval"), ("config", "serving"), ("data", "config"), ("data", "retrieval"), ("data", "tasks"),
    ("downstream", "config"), ("downstream", "data"), ("downstream", "reports"), ("downstream", "retrieval"),
    ("downstream", "stats"), ("downstream", "systems"), ("efficiency", "config"), ("efficiency", "data"),
    ("efficiency", "encode"), ("efficiency", "reports"), ("encode", "config"), ("encode", "data"),
    ("geometry", "config"), ("geometry", "data"), ("geometry", "encode"), ("geometry", "reports"),
    ("geometry", "retrieval"), ("geometry", "stats"), ("reports", "config"), ("reports", "data"),
    ("reports", "downstream"), ("reports", "efficiency"), ("reports", "encode"), ("reports", "geometry"),
    ("reports", "retrieval"), ("reports", "serving"), ("reports", "stats"), ("reports", "systems"),
    ("reports", "tasks"), ("reports", "transfer"), ("retrieval", "config"), ("retrieval", "data"),
    ("retrieval", "encode"), ("serving", "config"), ("serving", "data"), ("serving", "encode"),
    ("serving", "reports"), ("serving", "retrieval"), ("serving", "stats"), ("stats", "config"),
    ("systems", "config"), ("systems", "data"), ("systems", "encode"), ("systems", "reports"),
    ("systems", "retrieval"), ("systems", "serving"), ("systems", "stats"), ("tasks", "config"), ("tasks", "data"),
    ("tasks", "encode"), ("tasks", "geometry"), ("tasks", "reports"), ("tasks", "stats"), ("transfer", "config"),
    ("transfer", "data"), ("transfer", "reports"), ("transfer", "retrieval"), ("transfer", "stats"),
    ("transfer", "tasks"),
})


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


def test_no_import_cycle():
    graph = import_graph()
    new = []
    for component in strongly_connected(graph):
        for source in sorted(component):
            for target in sorted(set(graph.get(source, {})) & component):
                known = source.startswith(f"{CORE}.") and target.startswith(f"{CORE}.") and (
                    source.removeprefix(f"{CORE}."), target.removeprefix(f"{CORE}.")) in KNOWN_CORE_CYCLES
                if not known:
                    new.append("\n  ".join(cycle_through(graph, component, (source, target))))
    assert not new, "import cycles:\n  " + "\n\n  ".join(new)
