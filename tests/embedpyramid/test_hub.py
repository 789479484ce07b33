"""Hub repositories resolved and downloaded through a real endpoint on 127.0.0.1 (tests/fixtures/hub_server.py)."""

import pytest
from hub_server import LocalHub, point_at

from embedpyramid.hub import HubError, download, resolve_commit

FILES = {"config.json": b'{"a": 1}', "sub/weights.bin": bytes(range(256)) * 40}


@pytest.fixture
def hub():
    with LocalHub() as served:
        yield served


def test_a_branch_or_tag_resolves_to_its_commit_and_a_commit_needs_no_request(hub, tmp_path, monkeypatch):
    point_at(monkeypatch, hub, tmp_path / "cache")
    first = hub.push("org/model", FILES, tags=("v1",))
    assert resolve_commit("org/model", "main", where="card m") == first
    assert resolve_commit("org/model", None, where="card m") == first  # no revision: main
    assert resolve_commit("org/model", "v1", where="card m") == first
    asked = len(hub.requests)
    assert resolve_commit("org/model", first, where="card m") == first
    assert len(hub.requests) == asked
    second = hub.push("org/model", {**FILES, "config.json": b'{"a": 2}'})
    assert second != first and resolve_commit("org/model", second, where="card m") == second
    assert resolve_commit("org/model", "v1", where="card m") == first


def test_a_download_fills_the_cache_and_offline_reads_it_asking_nothing(hub, tmp_path, monkeypatch):
    point_at(monkeypatch, hub, tmp_path / "cache")
    commit = hub.push("org/model", FILES)
    folder = download("org/model", resolve_commit("org/model", "main", where="card m"), where="card m")
    assert folder.name == commit and (folder / "sub" / "weights.bin").read_bytes() == FILES["sub/weights.bin"]
    point_at(monkeypatch, hub, tmp_path / "cache", offline=True)
    asked = len(hub.requests)
    assert resolve_commit("org/model", "main", where="card m") == commit
    assert download("org/model", commit, where="card m") == folder
    assert len(hub.requests) == asked


def test_an_unknown_revision_or_repository_is_one_line_naming_it(hub, tmp_path, monkeypatch):
    point_at(monkeypatch, hub, tmp_path / "cache")
    hub.push("org/model", FILES)
    with pytest.raises(HubError, match=r"^models.yaml: models.m.source: model org/model has no revision 'nope' on http"):
        resolve_commit("org/model", "nope", where="models.yaml: models.m.source")
    with pytest.raises(HubError, match=r"^card m: no model 'org/missing' on http.*check the id$"):
        resolve_commit("org/missing", "main", where="card m")
    with pytest.raises(HubError, match=r"^card m: no dataset 'org/model'"):
        resolve_commit("org/model", "main", repo_type="dataset", where="card m")


def test_offline_without_the_cache_says_to_run_once_online(hub, tmp_path, monkeypatch):
    point_at(monkeypatch, hub, tmp_path / "cache", offline=True)
    commit = hub.push("org/model", FILES)
    with pytest.raises(HubError, match=r"^card m: model org/model @ main is not in the Hugging Face cache .* "
                                       r"HF_HUB_OFFLINE=1: run once online"):
        resolve_commit("org/model", "main", where="card m")
    with pytest.raises(HubError, match=r"^card m: model org/model @ [0-9a-f]{12} is not complete in the Hugging Face "
                                       r"cache .*HF_HUB_OFFLINE=1: run once online"):
        download("org/model", commit, where="card m")
    assert hub.requests == []


def test_an_unreachable_hub_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    with LocalHub() as hub:
        pass  # stopped: nothing listens on its port any more
    point_at(monkeypatch, hub, tmp_path / "cache")
    with pytest.raises(HubError, match=r"^card m: cannot resolve model org/model @ main on http://127\.0\.0\.1:\d+: "
                                       r".*set HF_HUB_OFFLINE=1 to use the Hugging Face cache$"):
        resolve_commit("org/model", "main", where="card m")
