"""What every config file shares: strict pydantic models, YAML reading, and errors that name the
file, the key and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SAFE_NAME_HELP = "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


class ConfigError(ValueError):
    """A configuration file is missing or invalid; the message names the file and the key."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def resolve_path(base: Path, path: str) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def read_yaml(
    path: Path, missing_hint: str = "a config folder needs models.yaml, datasets.yaml and protocol.yaml"
) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping)."""
    if not path.is_file():
        raise ConfigError(f"{path}: file not found; {missing_hint}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def format_validation(path: Path, prefix: str, error: ValidationError) -> ConfigError:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "") or "(top level)"
        lines.append(f"  {location}: {item['msg']}")
    return ConfigError(f"{path}: invalid configuration\n" + "\n".join(lines))


def named_section(path: Path, data: dict[str, Any], key: str) -> dict[str, Any]:
    section = data.get(key)
    if not isinstance(section, dict) or not section:
        raise ConfigError(f"{path}: needs a non-empty mapping under '{key}:'")
    for name in section:
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise ConfigError(f"{path}: {key}.{name}: names must be {SAFE_NAME_HELP}")
    return section
