"""Repositories on the Hugging Face hub, named by id and pinned to a commit.

A model card or a dataset may name a hub repository (``org/name``) at a revision: a branch, a
tag or a commit (no revision: ``main``). :func:`resolve_commit` turns the revision into the commit
it points at now, and the commit is what a card's key and a frozen dataset's manifest record, so
a branch that moves is a new card (or a new dataset version), never the same one with other
files. :func:`download` fetches that commit's files into the standard Hugging Face cache
(``HF_HOME``, ``HF_HUB_CACHE``) from ``HF_ENDPOINT`` and returns the snapshot folder.

Offline (``HF_HUB_OFFLINE=1``) nothing is asked of the hub: a branch or tag is read from the
cache's ``refs/`` (what the last online resolution wrote there), and the files from its
snapshot. What the cache lacks is a :class:`HubError` naming the repository, the revision and
what to do. Each (repository, revision) is resolved once per process, so every step of a run sees
the same commit even if the branch moves meanwhile.

huggingface_hub is imported by the first call, not by this module: loading a config that names
no hub repository does not pay for it.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Literal

RepoType = Literal["model", "dataset"]
DEFAULT_REVISION = "main"
COMMIT = re.compile(r"[0-9a-f]{40}")
"""A full git commit id, which needs no resolution."""


class HubError(ValueError):
    """A hub repository or revision that cannot be resolved or fetched; the message names it,
    who asked (``where``) and what to do."""


def resolve_commit(repo_id: str, revision: str | None = None, *, repo_type: RepoType = "model", where: str) -> str:
    """The commit ``revision`` (default ``main``) of hub repository ``repo_id`` points at: asked of
    the hub online, read from the cache's refs offline; a commit id is returned as it is."""
    revision = revision or DEFAULT_REVISION
    if COMMIT.fullmatch(revision):
        return revision
    from huggingface_hub import constants

    try:
        return _resolved(constants.ENDPOINT, constants.HF_HUB_CACHE, constants.is_offline_mode(), repo_id, revision,
                         repo_type)
    except HubError as error:
        raise HubError(f"{where}: {error}") from None


@cache
def _resolved(endpoint: str, cache_dir: str, offline: bool, repo_id: str, revision: str, repo_type: RepoType) -> str:
    what = f"{repo_type} {repo_id} @ {revision}"
    if offline:
        ref = _storage_folder(cache_dir, repo_id, repo_type) / "refs" / revision
        if not ref.is_file():
            raise HubError(f"{what} is not in the Hugging Face cache ({cache_dir}) and HF_HUB_OFFLINE=1: run once "
                           "online to download it, or pin revision: to a commit already in the cache")
        return ref.read_text().strip()
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi(endpoint=endpoint).repo_info(repo_id, revision=revision, repo_type=repo_type)
    except RevisionNotFoundError:
        raise HubError(f"{repo_type} {repo_id} has no revision {revision!r} on {endpoint}; name a branch, a tag or "
                       "a commit of the repository") from None
    except RepositoryNotFoundError:
        raise HubError(f"no {repo_type} {repo_id!r} on {endpoint} (or it is private or gated: log in with "
                       "`hf auth login`); check the id") from None
    except Exception as error:  # noqa: BLE001 - the network's errors (httpx's, the OS's) are one line here
        raise HubError(f"cannot resolve {what} on {endpoint}: {_one_line(error)}; check the network, or set "
                       "HF_HUB_OFFLINE=1 to use the Hugging Face cache") from None
    if not info.sha or not COMMIT.fullmatch(info.sha):
        raise HubError(f"{endpoint} answered no commit for {what}")
    _remember_ref(_storage_folder(cache_dir, repo_id, repo_type) / "refs" / revision, info.sha)
    return info.sha


def _remember_ref(ref: Path, commit: str) -> None:
    """Write ``refs/<revision>`` in the cache, as huggingface_hub does, so that an offline run finds
    what the last online resolution found (a cache it cannot write is left as it is)."""
    try:
        ref.parent.mkdir(parents=True, exist_ok=True)
        temporary = ref.with_name(f".{ref.name}.{os.getpid()}")
        temporary.write_text(commit)
        temporary.replace(ref)
    except OSError:
        pass


def download(repo_id: str, commit: str, *, repo_type: RepoType = "model", where: str) -> Path:
    """The cache's snapshot folder of ``repo_id`` at ``commit``, downloaded first when online and
    not complete in the cache."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=commit, repo_type=repo_type))
    except LocalEntryNotFoundError:
        if constants.is_offline_mode():
            raise HubError(f"{where}: {repo_type} {repo_id} @ {commit[:12]} is not complete in the Hugging Face cache "
                           f"({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE=1: run once online to download it") from None
        raise HubError(f"{where}: cannot download {repo_type} {repo_id} @ {commit[:12]} from {constants.ENDPOINT}; "
                       "check the network, or set HF_HUB_OFFLINE=1 to use the Hugging Face cache") from None
    except Exception as error:  # noqa: BLE001 - the network's errors (httpx's, the OS's) are one line here
        raise HubError(f"{where}: cannot download {repo_type} {repo_id} @ {commit[:12]} from {constants.ENDPOINT}: "
                       f"{_one_line(error)}") from None


def _storage_folder(cache_dir: str, repo_id: str, repo_type: RepoType) -> Path:
    """The cache's folder of a repository: ``models--org--name``, ``datasets--org--name``."""
    return Path(cache_dir) / f"{repo_type}s--{repo_id.replace('/', '--')}"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]
