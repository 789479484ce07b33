"""Shared fixtures: offline settings and a factory for self-contained config folders."""

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from graph_helpers import default_cards, default_section

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent

# A few chatterbot-corpus categories: ~190 queries, fast enough to run the graph many times.
SMALL_CATEGORIES = ["ai", "computers", "emotion", "science"]
TWO_REAL_MODELS = ("minilm-l6", "use-m3")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``heavy`` first in both halves of the collection, alternately: xdist's
    worksteal scheduler hands each worker one contiguous half and lets an idle worker steal the
    end of the other's queue, so both start on a heavy test and the run ends on light ones
    instead of one worker waiting minutes for the other's last test."""
    heavy = [item for item in items if item.get_closest_marker("heavy")]
    light = [item for item in items if not item.get_closest_marker("heavy")]
    first, second = heavy[0::2], heavy[1::2]
    cut = max(0, len(items) // 2 - len(first))
    items[:] = [*first, *light[:cut], *second, *light[cut:]]


@pytest.fixture(autouse=True, scope="session")
def _benchmark_results_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A benchmark a test runs records its figures in a scratch folder, never in benchmarks/results/
    (benchmarks/results.py reads the variable; subprocesses inherit it)."""
    previous = os.environ.get("EMBEDPYRAMID_BENCHMARK_RESULTS")
    os.environ["EMBEDPYRAMID_BENCHMARK_RESULTS"] = str(tmp_path_factory.mktemp("benchmark-results"))
    yield
    if previous is None:
        os.environ.pop("EMBEDPYRAMID_BENCHMARK_RESULTS", None)
    else:
        os.environ["EMBEDPYRAMID_BENCHMARK_RESULTS"] = previous


@pytest.fixture
def benchmark_script(monkeypatch) -> Iterator[Callable[[str], ModuleType]]:
    """Import a script of ``benchmarks/`` by name, with ``benchmarks/`` put first on sys.path for the
    test only; the modules imported leave ``sys.modules`` after it."""
    imported: list[str] = []

    def load(name: str) -> ModuleType:
        monkeypatch.setattr(sys, "path", [str(REPO_ROOT / "benchmarks"), *sys.path])
        imported.append(name)
        return importlib.import_module(name)

    yield load
    for name in imported:
        sys.modules.pop(name, None)


ConfigWriter = Callable[..., Path]


@pytest.fixture
def write_configs(tmp_path: Path) -> ConfigWriter:
    """Write a config folder; sections default to the shipped defaults, overrides replace them."""

    def write(folder: str = "configs", *, models: dict | None = None, datasets: dict | None = None,
              protocol: dict | None = None, ann: dict | None = None, systems: dict | None = None) -> Path:
        """``ann`` (the content of ann.yaml) and ``systems`` (systems.yaml) are written only when
        given: without them, no L4 and no L5."""
        target = tmp_path / folder
        target.mkdir(parents=True, exist_ok=True)
        if protocol is None:
            protocol = default_section("protocol")
            if models is not None and protocol["comparison"]["baseline"] not in models:
                # The default baseline names a default card: fall back to the first card.
                protocol["comparison"].pop("baseline")
        sections = {
            "models": {"models": models} if models is not None else default_section("models"),
            "datasets": {"datasets": datasets} if datasets is not None else default_section("datasets"),
            "protocol": protocol,
        }
        if ann is not None:
            sections["ann"] = ann
        if systems is not None:
            sections["systems"] = systems
        for name, content in sections.items():
            (target / f"{name}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
        return target

    return write


@pytest.fixture
def default_models() -> dict[str, Any]:
    return default_cards()


@pytest.fixture
def two_real_models(default_models) -> dict[str, Any]:
    """The two different real models of the defaults (MiniLM and USE), for tests that pair two models."""
    return {name: default_models[name] for name in TWO_REAL_MODELS}


@pytest.fixture
def small_chatterbot() -> dict[str, Any]:
    return {"chatterbot-small": {"loader": "chatterbot", "categories": SMALL_CATEGORIES, "slices": ["category"]}}
