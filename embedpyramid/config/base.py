"""What every config file shares: strict pydantic models, YAML reading, and errors that name the
file, the key and what is allowed.

Two mistakes that YAML and pydantic let through quietly are refused here for every config file:
a key written twice in one mapping (YAML keeps the last one, so two cards named ``toy-a`` would
silently become one) and an unknown key (reported with the keys allowed at that place and the
closest of them, so ``normalise`` suggests ``normalize``).

A file may start from another one: ``extends: ../protocol.yaml`` (relative to the file) reads
that file first and lays this one over it — mappings merge key by key, any other value (a list,
a number) replaces the extended one. ``configs/full`` holds the full evaluation settings this way,
one folder beside the quick default. Relative paths inside an extended file are read relative to
the folder being loaded, as if the file were copied there.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SAFE_NAME_HELP = "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"

_UNKNOWN_KEYS = "unknown_keys"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ConfigError(ValueError):
    """A configuration file is missing or invalid; the message names the file and the key."""


_PROBLEM = re.compile(r"^(?P<indent> *)(?:(?P<path>\S+?\.ya?ml): )?(?P<key>[A-Za-z_][\w-]*(?:\[\d+\]|\.[\w-]+)*)(?P<rest>: .*)$")


def located(error: ConfigError) -> ConfigError:
    """``error`` with the line of each key it names in its file: ``models.yaml:12: models.m.pooling:
    ...`` (a message naming no key of a YAML file, or a key the file does not hold, is left as it is)."""
    lines = str(error).split("\n")
    head = _PROBLEM.match(lines[0])
    path = Path(head["path"]) if head and head["path"] else None
    if path is None:
        file_only = re.match(r"^(\S+?\.ya?ml): ", lines[0])
        path = Path(file_only[1]) if file_only else None
    if path is None or not path.is_file():
        return error
    index = _key_lines(path)

    def with_line(line: str, *, first: bool) -> str:
        problem = _PROBLEM.match(line)
        if problem is None or (first and problem["path"] is None) or (not first and problem["path"] is not None):
            return line
        number = _line_of(index, problem["key"])
        if number is None:
            return line
        return f"{problem['indent']}{path}:{number}: {problem['key']}{problem['rest']}"

    located_lines = [with_line(lines[0], first=True), *(with_line(line, first=False) for line in lines[1:])]
    return error if located_lines == lines else ConfigError("\n".join(located_lines))


def _key_lines(path: Path) -> dict[tuple[str, ...], int]:
    """Each key path of a YAML file (``("models", "m", "pooling")``, a list item by its index) and
    the line it starts on; empty when the file does not parse."""
    try:
        root = yaml.compose(decode_utf8(path.read_bytes(), path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, ConfigError, OSError):
        return {}
    index: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, at: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = (*at, str(key_node.value))
                index.setdefault(key, key_node.start_mark.line + 1)
                walk(value_node, key)
        elif isinstance(node, yaml.SequenceNode):
            for position, item in enumerate(node.value):
                key = (*at, str(position))
                index.setdefault(key, item.start_mark.line + 1)
                walk(item, key)

    if root is not None:
        walk(root, ())
    return index


def _line_of(index: dict[tuple[str, ...], int], key: str) -> int | None:
    """The line of the longest prefix of the dotted ``key`` (``a.b[0].c``) the file holds."""
    parts = tuple(part for part in re.split(r"\.|\[(\d+)\]", key) if part)
    for end in range(len(parts), 0, -1):
        if parts[:end] in index:
            return index[parts[:end]]
    return None


class Strict(BaseModel):
    """A frozen config model that refuses unknown keys, naming the keys allowed in their place."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = [field.alias or name for name, field in cls.model_fields.items()]
            unknown = [str(key) for key in data if key not in allowed]
            if unknown:
                raise PydanticCustomError(
                    _UNKNOWN_KEYS, "unknown keys {keys}; allowed here: {allowed}",
                    {"keys": unknown, "allowed": allowed},
                )
        return data


def _closest_key(key: str, allowed: list[str]) -> str | None:
    """The allowed key a misspelt ``key`` most likely meant (case-insensitive), if any is close."""
    by_lower = {name.lower(): name for name in allowed}
    match = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[match[0]] if match else None


def resolve_path(base: Path, path: str) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, refusing a key that appears twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # '<<: *anchor' merges are meant to be overridden by the keys beside them
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                earlier = first_line.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if earlier is not None:
                lines = f"twice on line {line}" if earlier == line else f"on lines {earlier} and {line}"
                raise _DuplicateKey(
                    problem=f"duplicate key {key!r} {lines}; "
                    "a key may appear once in a mapping: rename or remove one of them",
                    problem_mark=key_node.start_mark,
                )
            first_line[key] = line
        return super().construct_mapping(node, deep)


def decode_utf8(content: bytes, path: Path, error: type[ValueError] = ConfigError, line: int = 1) -> str:
    """The text of UTF-8 ``content`` read from ``path`` (starting at ``line``), without a leading
    byte-order mark; invalid bytes raise ``error`` naming the file, the line and the byte."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as decode_error:
        where = line + content.count(b"\n", 0, decode_error.start)
        column = decode_error.start - (content.rfind(b"\n", 0, decode_error.start) + 1) + 1
        raise error(
            f"{path}:{where}: not valid UTF-8 (byte {content[decode_error.start]:#04x} at column {column}); "
            "save the file as UTF-8"
        ) from None


def read_yaml(
    path: Path, missing_hint: str = "a config folder needs models.yaml, datasets.yaml and protocol.yaml"
) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping), laid over the
    file it ``extends`` (see the module docstring); duplicate keys and invalid UTF-8 are refused
    naming the file and the line."""
    data: dict[str, Any] = {}
    for _, mapping in reversed(_extends_chain(path, missing_hint)):
        data = _laid_over(data, mapping)
    data.pop(EXTENDS, None)
    return data


EXTENDS = "extends"


def yaml_sources(path: Path) -> list[Path]:
    """``path`` and the files it extends, nearest first (what a change to the config is read from)."""
    return [source for source, _ in _extends_chain(path, "")]


def _extends_chain(path: Path, missing_hint: str) -> list[tuple[Path, dict[str, Any]]]:
    chain = [(path, _read_mapping(path, missing_hint))]
    while (base := chain[-1][1].get(EXTENDS)) is not None:
        current = chain[-1][0]
        if not isinstance(base, str) or not base.strip():
            raise ConfigError(f"{current}: {EXTENDS} must be the path of another YAML file, got {base!r}")
        target = (current.parent / base).resolve()
        if target in [source for source, _ in chain]:
            cycle = " -> ".join(str(source) for source in [*(source for source, _ in chain), target])
            raise ConfigError(f"{current}: {EXTENDS} {base!r} makes a cycle: {cycle}")
        if not target.is_file():
            raise ConfigError(f"{current}: {EXTENDS} {base!r}: no such file ({target})")
        chain.append((target, _read_mapping(target, missing_hint)))
    return chain


def _laid_over(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        merged[key] = _laid_over(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return merged


def _read_mapping(path: Path, missing_hint: str) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: file not found; {missing_hint}")
    try:
        data = yaml.load(decode_utf8(path.read_bytes(), path), Loader=_UniqueKeyLoader)
    except _DuplicateKey as error:
        raise ConfigError(f"{path}: {error.problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def format_validation(path: Path, prefix: str, error: ValidationError) -> ConfigError:
    """One line per problem, each naming the key path and the rule; a single problem stays on one
    line. An unknown key lists the keys allowed at its place and the closest one.

    When a value may take several shapes (``source: {package} | {path} | {hub, revision}``),
    pydantic reports every shape's failure under the shape's class name. Those are folded into
    what the user wrote: a key is unknown only if no shape knows it, and the other problems come
    from the shapes that know every key given.
    """
    shapes = _strict_class_names()
    unknown: dict[tuple[str, ...], dict[str, tuple[list[str], list[str]]]] = {}
    others: list[tuple[tuple[str, ...], str, str]] = []
    for item in error.errors():
        loc = tuple(str(part) for part in (prefix, *item["loc"]) if part != "")
        cut = next((i for i, part in enumerate(loc) if part in shapes), len(loc))
        where, shape = loc[:cut], loc[cut] if cut < len(loc) else ""
        if item["type"] == _UNKNOWN_KEYS:
            unknown.setdefault(where, {})[shape] = (item["ctx"]["keys"], item["ctx"]["allowed"])
        else:
            # "a valid dictionary or instance of PackageSource" names a class the user never wrote
            message = "Input should be a mapping" if item["type"] == "model_type" else item["msg"]
            message = message.removeprefix("Value error, ")
            others.append((where, shape, f"{'.'.join((*where, *loc[cut + 1:])) or '(top level)'}: {message}"))
    lines: list[str] = []
    for where, by_shape in unknown.items():
        shapes_tried = {shape for w, shape, _ in others if w == where} | set(by_shape)
        keys = [key for key in next(iter(by_shape.values()))[0]
                if len(by_shape) == len(shapes_tried) and all(key in ks for ks, _ in by_shape.values())]
        allowed = list(dict.fromkeys(name for _, names in by_shape.values() for name in names))
        if not keys and len(by_shape) == len(shapes_tried):
            forms = " | ".join("{" + ", ".join(names) + "}" for _, names in by_shape.values())
            lines.append(f"{'.'.join(where)}: these keys do not belong together; use one of {forms}")
        for key in keys:
            guess = _closest_key(key, allowed)
            hint = f"did you mean {guess!r}? " if guess else ""
            lines.append(f"{'.'.join((*where, key))}: unknown key; {hint}allowed here: {', '.join(allowed)}")
    lines += list(dict.fromkeys(text for where, shape, text in others if shape not in unknown.get(where, {})))
    if len(lines) == 1:
        return ConfigError(f"{path}: {lines[0]}")
    return ConfigError(f"{path}: {len(lines)} problems\n" + "\n".join(f"  {line}" for line in lines))


def _strict_class_names() -> set[str]:
    """Names of every config model: pydantic puts them in an error's location for union members."""
    names: set[str] = set()
    pending = [Strict]
    while pending:
        for subclass in pending.pop().__subclasses__():
            names.add(subclass.__name__)
            pending.append(subclass)
    return names


def named_section(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    section = data.get(key)
    if not isinstance(section, dict) or not section:
        raise ConfigError(f"{path}: needs a non-empty mapping under '{key}:'")
    for name in section:
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise ConfigError(f"{path}: {key}.{name}: names must be {SAFE_NAME_HELP}")
    return section
