"""Code versions derived from source: a short sha256 of the files a computation runs, found by
reading their import statements. Files are read, never imported, and not parsed into a syntax
tree: the versions are computed whenever the definitions are built, so a scan of the import
lines, a small share of that build, is what they cost (a test checks the scan against Python's
parser on every file of the project).

The version of a set of modules hashes their source bytes and those of every module of the same
package they import, transitively (cycles end): module-level imports and the lazy imports inside
functions alike; ``from x import y`` counts ``x.y`` when that is a submodule (and then not ``x``
for that name); relative imports resolve against the importing module. Imports under ``if
TYPE_CHECKING:`` never run and do not count, nor does a parent package's ``__init__`` unless it
is imported by name. A package's data files (those beside its ``__init__.py`` that are not
Python, e.g. the report's templates) are part of that ``__init__``'s source: a template edit
changes the version of whatever imports the package that renders it. A line of a docstring
that reads like an import counts (a version changes too often, never too rarely). A dispatch by module *name* (``importlib``) is invisible to the
scan: its caller names the modules it reaches (as the L2 task assets name their family's module,
:func:`embedpyramid.config.tasks.task_family_module`).

The version of an asset (:func:`function_version`) hashes the file that defines it and the
package modules its function uses: those it imports in its body, those its file (or an enclosing
function) imports under a name the body reads, and the same for the file's top-level functions
it calls by name. Orchestration code elsewhere (``resources``, ``pipelines``, another asset
module's helpers) does not enter it. Editing ``embedpyramid/tasks/sts.py`` thus changes the
version of exactly the assets whose computation imports it, directly or through other modules.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple

VERSION_LENGTH = 16
"""Hex digits of the sha256 kept in a code version (64 bits: no accidental collision in a graph)."""

_STATEMENT = re.compile(
    r"(?P<indent>[ \t]*)(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n;#]*)"
    r"|import[ \t]+(?P<modules>[^\n;#]*))"
)
_TYPE_CHECKING = re.compile(r"^([ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#[^\n]*)?$", re.M)
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", re.M)
_NAME = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"#[^\n]*")


class SourceError(ValueError):
    """A module or function named for a code version is not where it should be."""


class ImportStatement(NamedTuple):
    """One import statement: where its line starts, its indentation, the number of leading dots
    (``level``) and the ``from`` module after them (None for a plain ``import``), and each name
    with the name it binds."""

    offset: int
    indent: int
    level: int
    base: str | None
    names: tuple[tuple[str, str], ...]


def _block_end(text: str, start: int, indent: int) -> int:
    """Where the block opened on the line before ``start`` ends: at the first line indented no
    deeper than ``indent`` that holds code (a closing bracket of a signature continues it)."""
    found = re.compile(rf"\n(?=[ \t]{{0,{indent}}}[^ \t\n)\]}}])").search(text, start)
    return found.start() + 1 if found else len(text)


def scan_imports(text: str) -> list[ImportStatement]:
    """The import statements of a Python source, except those under ``if TYPE_CHECKING:``."""
    skipped = [(m.end(), _block_end(text, m.end(), len(m.group(1)))) for m in _TYPE_CHECKING.finditer(text)
               ] if "TYPE_CHECKING" in text else []
    statements, starts = [], set()
    at = text.find("import")
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        at = text.find("import", at + len("import"))
        if start in starts:
            continue
        starts.add(start)
        match = _STATEMENT.match(text, start)
        if match is None or (skipped and any(begin <= start < end for begin, end in skipped)):
            continue
        plain = match["base"] is None
        raw = match["modules"] if plain else match["names"]
        if "#" in raw:
            raw = _COMMENT.sub("", raw)
        names = []
        for part in raw.strip(" \t()\n").split(","):
            words = part.split()
            if not words or not all(word.isidentifier() for word in words[0].split(".")):
                continue
            bound = words[2] if len(words) == 3 and words[1] == "as" else (
                words[0].split(".")[0] if plain else words[0])
            names.append((words[0], bound))
        dotted = match["base"] or ""
        base = None if plain else dotted.lstrip(".")
        level = len(dotted) - len(base or "")
        statements.append(ImportStatement(start, len(match["indent"]), level, base, tuple(names)))
    return statements


@dataclass(frozen=True)
class _Source:
    path: Path
    digest: str
    imports: frozenset[str]


class _Def(NamedTuple):
    start: int
    end: int
    indent: int
    name: str


class _File(NamedTuple):
    digest: str
    text: str
    imports: list[ImportStatement]
    defs: list[_Def]


@dataclass
class SourceTree:
    """One package's source files under ``root`` (the folder that holds the package folder, as on
    ``sys.path``), each read once: a snapshot, so a changed file needs a new tree."""

    root: Path
    package: str = "embedpyramid"
    _sources: dict[str, _Source | None] = field(default_factory=dict, repr=False)
    _paths: dict[str, Path] | None = field(default=None, repr=False)
    _files: dict[Path, _File] = field(default_factory=dict, repr=False)
    _versions: dict[tuple[frozenset[str], tuple[Path, ...]], str] = field(default_factory=dict, repr=False)
    _functions: dict[tuple[Path, str], frozenset[str]] = field(default_factory=dict, repr=False)

    def module_path(self, module: str) -> Path | None:
        """The file of a module of the package (``a/b.py`` or ``a/b/__init__.py``), None if absent."""
        if self._paths is None:
            self._paths = {}
            for folder, _, files in os.walk(self.root / self.package):
                parts = Path(folder).relative_to(self.root).parts
                for name in files:
                    if name.endswith(".py"):
                        stem = parts if name == "__init__.py" else (*parts, name[:-3])
                        self._paths[".".join(stem)] = Path(folder, name)
        return self._paths.get(module)

    def resolve(self, statement: ImportStatement, names: Iterable[tuple[str, str]], module: str = "",
                *, is_package: bool = False) -> set[str]:
        """The package's modules that ``names`` of an import statement written in ``module`` load."""
        if statement.base is None:
            return {name for name, _ in names if self.module_path(name)}
        base = statement.base
        if statement.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            base = ".".join([*parts[:len(parts) - statement.level + 1], *([base] if base else [])])
        found = set()
        for name, _ in names:
            if self.module_path(f"{base}.{name}"):
                found.add(f"{base}.{name}")
            elif self.module_path(base):
                found.add(base)
        return found

    def source(self, module: str) -> _Source:
        if module not in self._sources:
            path = self.module_path(module)
            if path is None:
                self._sources[module] = None
            else:
                data = path.read_bytes()
                is_package = path.name == "__init__.py"
                imports = {found for statement in scan_imports(data.decode())
                           for found in self.resolve(statement, statement.names, module, is_package=is_package)}
                digest = hashlib.sha256(data)
                for extra in _package_data(path) if is_package else ():
                    digest.update(f"\0{extra.name}\0".encode() + extra.read_bytes())
                self._sources[module] = _Source(path, digest.hexdigest(), frozenset(imports - {module}))
        found = self._sources[module]
        if found is None:
            raise SourceError(f"module {module!r} not found under {self.root} (no {module.replace('.', '/')}.py "
                              "nor package folder): name a module of the package")
        return found

    def closure(self, *modules: str) -> tuple[str, ...]:
        """The modules and every package module they import, transitively, sorted."""
        seen: set[str] = set()
        stack = list(modules)
        while stack:
            module = stack.pop()
            if module not in seen:
                seen.add(module)
                stack.extend(self.source(module).imports - seen)
        return tuple(sorted(seen))

    def version(self, *modules: str, files: Iterable[Path] = ()) -> str:
        """The short sha256 of the closure's sources (by module name) and of ``files`` (by file name)."""
        key = frozenset(modules), tuple(Path(path) for path in files)
        if key not in self._versions:
            digest = hashlib.sha256()
            for module in self.closure(*key[0]):
                digest.update(f"{module}\0{self.source(module).digest}\n".encode())
            for path in key[1]:
                digest.update(f"{path.name}\0{self._file(path).digest}\n".encode())
            self._versions[key] = digest.hexdigest()[:VERSION_LENGTH]
        return self._versions[key]

    def _file(self, path: Path) -> _File:
        if path not in self._files:
            data = path.read_bytes()
            text = data.decode()
            defs = [_Def(m.start(), _block_end(text, m.end(), len(m.group(1))),
                         len(m.group(1)), m.group(2)) for m in _DEF.finditer(text)]
            self._files[path] = _File(hashlib.sha256(data).hexdigest(), text, scan_imports(text), defs)
        return self._files[path]

    def function_modules(self, path: Path, function: str) -> frozenset[str]:
        """The package modules that ``function`` of a file outside the package uses (see the
        module docstring); the file holds exactly one function of that name."""
        key = Path(path), function
        if key not in self._functions:
            self._functions[key] = self._function_modules(*key)
        return self._functions[key]

    def _function_modules(self, path: Path, function: str) -> frozenset[str]:
        source = self._file(path)
        targets = [d for d in source.defs if d.name == function]
        if len(targets) != 1:
            raise SourceError(f"{path}: {len(targets)} functions named {function!r}, expected one: "
                              "name the function that computes the asset")
        modules: set[str] = set()
        pending, done = [targets[0]], set()
        while pending:
            target = pending.pop()
            done.add(target)
            names = set(_NAME.findall(source.text, target.start, target.end))
            for statement in source.imports:
                if target.start <= statement.offset < target.end:
                    modules |= self.resolve(statement, statement.names)
                    continue
                innermost = max((d for d in source.defs if d.start < statement.offset < d.end), default=None)
                if innermost is None or (innermost.start < target.start and target.end <= innermost.end):
                    modules |= self.resolve(statement, [n for n in statement.names if n[1] in names])
            pending += [d for d in source.defs if d.indent == 0 and d.name in names and d not in done]
        return frozenset(modules)


def _package_data(init: Path) -> list[Path]:
    """The data files beside a package's ``__init__.py`` (templates, style sheets), by name."""
    return sorted(path for path in init.parent.iterdir()
                  if path.is_file() and path.suffix not in (".py", ".pyc") and not path.name.startswith("."))


@cache
def _project_tree() -> SourceTree:
    return SourceTree(Path(__file__).resolve().parent.parent)


def source_version(*modules: str) -> str:
    """The code version of ``embedpyramid`` modules: a short sha256 of their source and of every
    ``embedpyramid`` module they import, transitively (the files as this process first read them)."""
    return _project_tree().version(*modules)


def function_version(path: str | Path, function: str, *modules: str) -> str:
    """The code version of ``function`` in the file ``path`` (an asset's module, outside the
    package): that file's source, the ``embedpyramid`` modules the function uses and ``modules``
    (those it reaches by name), each with its transitive imports."""
    tree = _project_tree()
    return tree.version(*tree.function_modules(Path(path), function), *modules, files=[Path(path)])
