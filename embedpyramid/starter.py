"""``embedpyramid init``: a config folder for one's own data and models, checked as it is written.

From a data path and a list of models, it writes ``models.yaml`` (one eval card per model, the
first the baseline), ``datasets.yaml`` (the data, with the loader its layout calls for) and
``protocol.yaml`` (the default's, commented), and loads the folder as every command will. The
levels that need a file of their own — L4's index specs, L5's systems, L6's judge — are added by
copying ``ann.yaml``, ``systems.yaml`` or ``judge.yaml`` from ``configs/`` beside them: some of the
default index specs need more documents than a small corpus has (IVF-PQ trains 256 centroids). What it is given is checked first, so that a mistake is one line naming it and no
folder is left half-written:

- the data: a BEIR folder (``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``, each
  first record readable), a SQuAD JSON file, or MTEB task data on disk with ``--task``;
- each model: a model folder on disk (sentence-transformers, or model2vec), an OpenAI-compatible
  embeddings endpoint written ``URL#MODEL``, or a hub id ``org/name[@revision]`` (resolved to its
  commit online, found in the Hugging Face cache offline).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from embedpyramid.config import ConfigError, load_config
from embedpyramid.config.base import SAFE_NAME
from embedpyramid.config.models import HUB_ID
from embedpyramid.hub import HubError, resolve_commit

DEFAULTS = Path(__file__).resolve().parent.parent / "configs"
"""The shipped config folder whose protocol file the starter copies."""
TASKS = ("sts", "pair_classification", "classification", "clustering", "bitext")


class StarterError(ValueError):
    """What ``init`` was given cannot make a config; the message names it and what to do."""


@dataclass(frozen=True)
class Starter:
    """The folder written and its cards' names, the baseline first."""

    folder: Path
    cards: tuple[str, ...]
    dataset: str


def write_starter(data_path: str | Path, models: list[str], out: str | Path, *, task: str | None = None,
                  split: str | None = None, force: bool = False) -> Starter:
    """Write and load a starter config folder at ``out`` (see the module docstring)."""
    folder = Path(out).expanduser().resolve()
    if folder.exists() and any(folder.iterdir()) and not force:
        raise StarterError(f"{folder} exists and is not empty; choose another --out, or pass --force to replace its "
                           "config files")
    if not models:
        raise StarterError("name at least one model with --model (a folder, org/name, or URL#MODEL)")
    dataset_name, dataset = data_entry(Path(data_path).expanduser().resolve(), task=task, split=split)
    cards: dict[str, dict[str, Any]] = {}
    for source in models:
        name, card = model_card(source)
        while name in cards:
            name = _next_name(name)
        cards[name] = card
    written = {
        "models.yaml": _yaml({"models": cards}, MODELS_HEADER),
        "datasets.yaml": _yaml({"datasets": {dataset_name: dataset}}, DATASETS_HEADER),
        "protocol.yaml": _with_baseline((DEFAULTS / "protocol.yaml").read_text(encoding="utf-8"), next(iter(cards))),
    }
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / ".init"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name, text in written.items():
        (staging / name).write_text(text, encoding="utf-8")
    try:
        load_config(staging)
    except ConfigError as error:
        shutil.rmtree(staging)
        raise StarterError(f"the written config does not load: {error}") from None
    for name in written:
        (staging / name).replace(folder / name)
    staging.rmdir()
    return Starter(folder, tuple(cards), dataset_name)


def data_entry(path: Path, *, task: str | None = None, split: str | None = None) -> tuple[str, dict[str, Any]]:
    """The dataset entry of the data at ``path`` and its name, after checking its layout."""
    name = _safe_name(path.stem if path.is_file() else path.name) or "my-data"
    if task is not None:
        if task not in TASKS:
            raise StarterError(f"--task {task!r}: not an L2 task family; use one of {', '.join(TASKS)} (none: retrieval)")
        if not path.exists():
            raise StarterError(f"{path}: no such file or folder; point --data-path at MTEB task data on disk")
        return name, {"loader": "mteb", "task": task, "path": str(path)}
    if path.is_dir():
        return name, _beir_entry(path, split)
    if path.is_file() and path.suffix == ".json":
        _check_squad(path)
        return name, {"loader": "squad", "path": str(path)}
    raise StarterError(f"{path}: not a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) nor a SQuAD .json "
                       "file; for MTEB task data on disk add --task (sts, pair_classification, classification, "
                       "clustering, bitext)")


def _beir_entry(folder: Path, split: str | None) -> dict[str, Any]:
    for needed in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / needed).is_file():
            raise StarterError(f"{folder}: not a BEIR folder: {needed} is missing (a BEIR folder holds corpus.jsonl, "
                               "queries.jsonl and qrels/<split>.tsv)")
        _check_first_record(folder / needed, ("_id", "text"))
    splits = sorted(path.stem for path in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
    if not splits:
        raise StarterError(f"{folder}: not a BEIR folder: no qrels/<split>.tsv (query-id, corpus-id, score per line)")
    chosen = split or ("test" if "test" in splits or len(splits) != 1 else splits[0])
    if chosen not in splits:
        raise StarterError(f"{folder}: no qrels/{chosen}.tsv; splits found: {', '.join(splits)} — pass --split")
    return {"loader": "beir", "path": str(folder), "split": chosen}


def _check_first_record(path: Path, keys: tuple[str, ...]) -> None:
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise StarterError(f"{path}:{number}: not a JSON line ({error.msg})") from None
                missing = [key for key in keys if not isinstance(record, dict) or key not in record]
                if missing:
                    raise StarterError(f"{path}:{number}: a record needs {', '.join(keys)}; missing {', '.join(missing)}")
                return
    raise StarterError(f"{path}: empty; a BEIR file holds one JSON record per line")


def _check_squad(path: Path) -> None:
    try:
        content = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as error:
        raise StarterError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(content, dict) or not isinstance(content.get("data"), list):
        raise StarterError(f"{path}: not a SQuAD file (a JSON object with a 'data' list of articles)")


def model_card(source: str) -> tuple[str, dict[str, Any]]:
    """A card's name and content for one ``--model``: a folder, ``URL#MODEL`` or ``org/name[@revision]``."""
    local = Path(source).expanduser()
    if local.is_dir():
        return _safe_name(local.resolve().name) or "local-model", _folder_card(local.resolve())
    if re.match(r"https?://", source):
        url, _, model = source.partition("#")
        if not model:
            raise StarterError(f"--model {source}: an embeddings endpoint is written URL#MODEL, e.g. "
                               "https://api.openai.com/v1/embeddings#text-embedding-3-small")
        return _safe_name(model) or "api-model", {"backend": "http", "source": {"url": url, "model": model}}
    repo, _, revision = source.partition("@")
    if HUB_ID.fullmatch(repo) and "/" in repo:
        try:  # the hub (or, offline, the cache) knows it at that revision; the config pins the commit
            resolve_commit(repo, revision or None, where=f"--model {source}")
        except HubError as error:
            raise StarterError(str(error)) from None
        card: dict[str, Any] = {"backend": "sentence-transformers",
                                "source": {"hub": repo, **({"revision": revision} if revision else {})}}
        return _safe_name(repo.split("/")[-1]) or "hub-model", card
    raise StarterError(f"--model {source}: an unknown model source — not a folder on disk, not an embeddings URL "
                       "(URL#MODEL), not a hub id (org/name or org/name@revision)")


def _folder_card(folder: Path) -> dict[str, Any]:
    if (folder / "modules.json").is_file() or (folder / "config_sentence_transformers.json").is_file():
        return {"backend": "sentence-transformers", "source": {"path": str(folder)}}
    config = folder / "config.json"
    described = _json(config)
    if described.get("model_type") == "model2vec" or "StaticModel" in described.get("architectures", []):
        return {"backend": "model2vec", "source": {"path": str(folder)}}
    if config.is_file():
        return {"backend": "sentence-transformers", "source": {"path": str(folder)}, "pooling": "mean"}
    raise StarterError(f"--model {folder}: a folder without a model (no modules.json, no config.json); point it at a "
                       "sentence-transformers or model2vec model folder")


def _json(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError):
        return {}
    return content if isinstance(content, dict) else {}


def _safe_name(text: str) -> str:
    """A card or dataset name from ``text``: lowercase, runs of other characters as one dash."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48]
    return name if SAFE_NAME.match(name) else ""


def _next_name(name: str) -> str:
    match = re.fullmatch(r"(.*?)-(\d+)", name)
    return f"{match[1]}-{int(match[2]) + 1}" if match else f"{name}-2"


def _with_baseline(protocol: str, baseline: str) -> str:
    """The default protocol file with the comparison's baseline set to the first card."""
    return re.sub(r"(?m)^(  baseline: )\S+", rf"\g<1>{baseline}", protocol, count=1)


def _yaml(content: dict[str, Any], header: str) -> str:
    return header + yaml.safe_dump(content, sort_keys=False, allow_unicode=True)


MODELS_HEADER = """\
# One eval card per model, written by `embedpyramid init`; the first is the baseline every other is
# compared with. Every key a card takes: docs/configuration.md (prompts, pooling, normalize,
# dimension, max_tokens, run settings).
"""
DATASETS_HEADER = """\
# The data to evaluate on, written by `embedpyramid init`. Every loader and key:
# docs/configuration.md; published scores to reproduce: docs/levels/l3-transfer.md. L4 index specs,
# L5 systems and the L6 judge: copy ann.yaml, systems.yaml or judge.yaml from configs/ beside this file.
"""
