"""MTEB's retrieval layout (corpus, queries, qrels and top_ranked configs) read by ``loader: mteb``
from disk and from a hub dataset served on 127.0.0.1 (tests/fixtures/hub_server.py): the frozen
tables, MTEB's conventions for which queries are kept and how a document's text is made, the
commit in the manifest, the offline run that asks the hub nothing, and errors that name the file
or the dataset id and what to do."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hub_server import LocalHub, folder_files, point_at

from embedpyramid.config import ConfigError, MtebDataset, load_config
from embedpyramid.data import (
    DataError,
    find_layout,
    freeze_dataset,
    freeze_task_dataset,
    load_configured_dataset,
    load_task_dataset,
    mteb_hub_identity,
)
from embedpyramid.data.mteb_retrieval import load_mteb_retrieval

HUB_ID = "mteb/tiny-dup-questions"


def parquet(columns: dict[str, list]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def mteb_layout(prefix: str = "", *, top_ranked: bool = True, query_config: str | None = None) -> dict[str, bytes]:
    """The files of a small MTEB retrieval (or reranking) dataset as the hub keeps it: a parquet
    file per config, listed in README.md (``<prefix>`` names a multilingual subset's configs)."""
    parts = {
        f"{prefix}corpus": ("corpus", {"_id": ["d1", "d2", "d3", "d4"], "title": ["Ubuntu", "", "", "Grub"],
                                       "text": ["install ubuntu", "reset the password", "mount a disk",
                                                "boot menu missing"]}),
        query_config or f"{prefix}queries": ("queries", {"_id": ["q1", "q2", "q3"], "text": [
            "how to install", "forgot my password", "nothing judged"]}),
        (f"{prefix.rstrip('-')}-qrels" if prefix else "default"): ("test", {
            "query-id": ["q1", "q1", "q2"], "corpus-id": ["d1", "d4", "d2"], "score": [1, 0, 2]}),
    }
    if top_ranked:
        parts[f"{prefix}top_ranked"] = ("test", {"query-id": ["q1", "q2", "q3"],
                                                 "corpus-ids": [["d1", "d2", "d3"], ["d2", "d3"], ["d1"]]})
    files = {f"{config}/{split}-00000-of-00001.parquet": parquet(columns) for config, (split, columns) in parts.items()}
    configs = [{"config_name": config, "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"}]}
               for config, (split, _) in parts.items()]
    files["README.md"] = ("---\n" + yaml.safe_dump({"configs": configs}) + "---\n# tiny\n").encode()
    return files


def write_files(folder, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)


def spec(task: str = "retrieval", **options) -> MtebDataset:
    return MtebDataset(loader="mteb", task=task, **{"path": ".", **options})


def test_a_retrieval_task_in_mtebs_layout_freezes_as_mteb_reads_it(tmp_path):
    write_files(tmp_path / "task", mteb_layout(top_ranked=False))
    raw = load_mteb_retrieval(find_layout(tmp_path / "task"), spec(), {})
    assert raw.corpus.to_pydict() == {"doc_id": ["d1", "d2", "d3", "d4"], "title": ["Ubuntu", "", "", "Grub"],
                                      "text": ["install ubuntu", "reset the password", "mount a disk",
                                               "boot menu missing"]}
    # Only the queries with qrels, as MTEB's loader keeps them (q3 has none).
    assert raw.queries.to_pydict() == {"query_id": ["q1", "q2"], "text": ["how to install", "forgot my password"]}
    assert raw.qrels.to_pydict() == {"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d4", "d2"],
                                     "relevance": [1, 0, 2]}
    assert raw.source["configs"] == {"corpus": "corpus[corpus]", "queries": "queries[queries]", "qrels": "default[test]"}
    assert raw.source["queries_without_qrels"] == 1
    frozen = freeze_dataset("tiny", raw, tmp_path / "frozen")
    assert frozen.manifest["counts"]["queries_with_positive"] == 2


def test_a_multilingual_subset_and_a_query_config_are_found_by_mtebs_names(tmp_path):
    write_files(tmp_path / "task", mteb_layout("de-", top_ranked=False))
    raw = load_mteb_retrieval(find_layout(tmp_path / "task"), spec(), {})  # the only subset: de
    assert raw.source["configs"]["qrels"] == "de-qrels[test]" and raw.queries.num_rows == 2
    write_files(tmp_path / "query", mteb_layout(top_ranked=False, query_config="query"))
    raw = load_mteb_retrieval(find_layout(tmp_path / "query"), spec(), {})
    assert raw.source["configs"]["queries"] == "query[queries]"


def test_a_reranking_task_keeps_each_querys_candidates_and_judgements(tmp_path):
    write_files(tmp_path / "task", mteb_layout())
    tables = load_task_dataset_from(tmp_path / "task")
    texts = {row["text_id"]: row for row in tables.texts.to_pylist()}
    assert texts["d:d1"] == {"text_id": "d:d1", "text": "Ubuntu install ubuntu", "role": "document"}
    assert texts["q:q1"]["role"] == "query" and "q:q3" not in texts  # q3 has candidates, no judgements
    pairs = tables.pairs.to_pydict()
    assert list(zip(pairs["text_id_1"], pairs["text_id_2"], pairs["gold"], pairs["candidate"], pairs["judged"],
                    strict=True)) == [
        ("q:q1", "d:d1", 1.0, "yes", "yes"), ("q:q1", "d:d2", 0.0, "yes", "no"), ("q:q1", "d:d3", 0.0, "yes", "no"),
        ("q:q1", "d:d4", 0.0, "no", "yes"),  # judged grade 0 outside the candidates: in the qrels, not the run
        ("q:q2", "d:d2", 2.0, "yes", "yes"), ("q:q2", "d:d3", 0.0, "yes", "no")]
    without = tmp_path / "without"
    write_files(without, mteb_layout(top_ranked=False))
    with pytest.raises(DataError, match=r"without: no top_ranked subset \(configs: corpus, default, queries\): a "
                                        r"reranking task ranks each query's candidates; read a task without them as "
                                        "task: retrieval"):
        load_task_dataset_from(without)


def load_task_dataset_from(folder):
    from embedpyramid.data import load_mteb_task

    return load_mteb_task(folder, spec("reranking", reranking={"protocol": "mteb"}))


def test_bad_layouts_name_the_folder_or_file_and_what_to_set(tmp_path):
    files = mteb_layout()
    write_files(tmp_path / "nocorpus", {k: v for k, v in files.items() if not k.startswith("corpus/")})
    with pytest.raises(DataError, match=r"nocorpus: no corpus \(corpus\) in MTEB's retrieval layout \(configs found, "
                                        r"hub configs: default, queries, top_ranked\)"):
        load_mteb_retrieval(find_layout(tmp_path / "nocorpus"), spec(), {})
    write_files(tmp_path / "two", {**mteb_layout("de-", top_ranked=False), **mteb_layout("fr-", top_ranked=False)})
    readme = {"configs": [c for prefix in ("de-", "fr-") for c in yaml.safe_load(
        mteb_layout(prefix, top_ranked=False)["README.md"].decode().split("---")[1])["configs"]]}
    (tmp_path / "two" / "README.md").write_text("---\n" + yaml.safe_dump(readme) + "---\n")
    with pytest.raises(DataError, match=r"two: 2 subsets \(de, fr\) in MTEB's retrieval layout; set subset:"):
        load_mteb_retrieval(find_layout(tmp_path / "two"), spec(), {})
    bad = dict(files)
    bad["top_ranked/test-00000-of-00001.parquet"] = parquet({"query-id": ["q1"], "corpus-ids": [["d9"]]})
    write_files(tmp_path / "unknown", bad)
    with pytest.raises(DataError, match=r"unknown: top_ranked\[test\]: query 'q1' names candidate 'd9', which is not "
                                        r"in the corpus \(corpus\[corpus\]\); fix the candidates or the corpus"):
        load_task_dataset_from(tmp_path / "unknown")
    with pytest.raises(ValueError, match="give the MTEB task's data as path: .* or hub: .*, one of the two"):
        MtebDataset(loader="mteb", task="retrieval", path="x", hub="org/x")
    with pytest.raises(ValueError, match="revision applies to a hub dataset"):
        MtebDataset(loader="mteb", task="retrieval", path="x", revision="main")
    with pytest.raises(ValueError, match="skip_first_result follows MTEB's task attribute: set protocol: mteb"):
        MtebDataset(loader="mteb", task="retrieval", path="x", retrieval={"skip_first_result": True})


@pytest.fixture
def hub():
    with LocalHub() as served:
        yield served


def hub_config(write_configs, folder: str, task: str, revision: str | None = None):
    entry = {"loader": "mteb", "task": task, "hub": HUB_ID, **({"revision": revision} if revision else {}),
             **({"reranking": {"protocol": "mteb"}} if task == "reranking" else {"retrieval": {"protocol": "mteb"}})}
    return load_config(write_configs(folder, datasets={"dups": entry}))


def test_a_hub_dataset_downloads_into_the_cache_records_its_commit_and_runs_offline(hub, tmp_path, monkeypatch,
                                                                                    write_configs):
    files = mteb_layout()
    first = hub.push(HUB_ID, files, repo_type="dataset", tags=("v1",))
    point_at(monkeypatch, hub, tmp_path / "cache")
    config = hub_config(write_configs, "online", "retrieval")
    raw = load_configured_dataset(config, "dups")
    assert {key: raw.source[key] for key in ("hub", "revision", "commit")} == {"hub": HUB_ID, "revision": "main",
                                                                            "commit": first}
    snapshot = tmp_path / "cache" / f"datasets--{HUB_ID.replace('/', '--')}" / "snapshots" / first
    assert folder_files(snapshot) == files and raw.source["path"] == str(snapshot)
    reranking = hub_config(write_configs, "rerank", "reranking", revision="v1")
    frozen = freeze_task_dataset("dups", load_task_dataset(reranking, "dups"), tmp_path / "frozen")
    assert frozen.manifest["source"]["commit"] == first and frozen.manifest["source"]["revision"] == "v1"
    assert mteb_hub_identity(reranking, reranking.task_dataset("dups"), "dups") == {
        "hub": HUB_ID, "revision": "v1", "commit": first}

    # Offline: the same commit and files from the cache, and not one request to the hub.
    asked = len(hub.requests)
    point_at(monkeypatch, hub, tmp_path / "cache", offline=True)
    offline = load_configured_dataset(hub_config(write_configs, "offline", "retrieval"), "dups")
    assert offline.source["commit"] == first and offline.corpus == raw.corpus and len(hub.requests) == asked

    # A new commit on main: a new commit in its identity (the config facets record it), the tag still names the first.
    second = hub.push(HUB_ID, {**files, "README.md": files["README.md"] + b"\nmore"}, repo_type="dataset")
    point_at(monkeypatch, hub, tmp_path / "cache-2")  # a fresh cache: a process that resolves again
    moved = hub_config(write_configs, "moved", "retrieval")
    assert mteb_hub_identity(moved, moved.dataset("dups"), "dups")["commit"] == second != first
    pinned = hub_config(write_configs, "pinned", "reranking", revision="v1")
    assert mteb_hub_identity(pinned, pinned.task_dataset("dups"), "dups")["commit"] == first


def test_a_hub_dataset_that_cannot_be_had_is_one_line_naming_the_entry(hub, tmp_path, monkeypatch, write_configs):
    point_at(monkeypatch, hub, tmp_path / "cache")
    hub.push(HUB_ID, mteb_layout(), repo_type="dataset")
    with pytest.raises(DataError, match=rf"datasets.yaml: datasets.dups: dataset {HUB_ID} has no revision 'nope' on "
                                        r"http://127\.0\.0\.1:\d+; name a branch, a tag or a commit"):
        load_configured_dataset(hub_config(write_configs, "nope", "retrieval", revision="nope"), "dups")
    point_at(monkeypatch, hub, tmp_path / "empty-cache", offline=True)
    with pytest.raises(DataError, match=rf"datasets.dups: dataset {HUB_ID} @ main is not in the Hugging Face cache "
                                        r".* and HF_HUB_OFFLINE=1: run once online"):
        load_configured_dataset(hub_config(write_configs, "cold", "retrieval"), "dups")
    with pytest.raises(ConfigError, match=r"datasets.bad: hub 'not a/repo id' is not a dataset id"):
        load_config(write_configs("bad", datasets={"bad": {"loader": "mteb", "task": "retrieval",
                                                            "hub": "not a/repo id"}}))


def test_empty_texts_follow_the_entrys_policy_as_in_a_beir_folder(tmp_path):
    files = mteb_layout(top_ranked=False)
    files["corpus/corpus-00000-of-00001.parquet"] = parquet({"_id": ["d1", "d2", "d3", "d4"],
                                                             "title": ["Ubuntu", "", "", ""],
                                                             "text": ["install ubuntu", "  ", "mount a disk", "x"]})
    write_files(tmp_path / "task", files)
    layout = find_layout(tmp_path / "task")
    kept = load_mteb_retrieval(layout, spec(), {})
    assert kept.corpus.num_rows == 4 and kept.source["empty_texts"] == {"policy": "keep"}
    dropped = load_mteb_retrieval(layout, spec(empty_texts="drop"), {})
    assert dropped.corpus["doc_id"].to_pylist() == ["d1", "d3", "d4"]
    assert dropped.queries["query_id"].to_pylist() == ["q1"]  # q2's only judgement named d2
    assert dropped.source["empty_texts"] == {"policy": "drop", "dropped_documents": ["d2"], "dropped_queries": [],
                                             "dropped_qrels": [["q2", "d2", 2]]}
    with pytest.raises(DataError, match=r"task: empty texts: documents \['d2'\] \(corpus\[corpus\]\), queries \[\] "
                                        r"\(queries\[queries\]\); set empty_texts: keep"):
        load_mteb_retrieval(layout, spec(empty_texts="error"), {})


def test_a_reranking_tasks_slices_come_from_its_queries(tmp_path, write_configs):
    files = mteb_layout()
    files["queries/queries-00000-of-00001.parquet"] = parquet({
        "_id": ["q1", "q2", "q3"], "text": ["how to install", "forgot my password", "nothing judged"],
        "forum": ["setup", "accounts", "setup"]})
    write_files(tmp_path / "task", files)
    config = load_config(write_configs(datasets={"dups": {
        "loader": "mteb", "task": "reranking", "path": str(tmp_path / "task"), "slices": ["forum"]}}))
    tables = load_task_dataset(config, "dups")
    forums = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["forum"].to_pylist(), strict=True))
    assert (forums["q:q1"], forums["q:q2"], forums["d:d1"]) == ("setup", "accounts", None)


def test_skip_first_result_reaches_the_datasets_metric_conventions(tmp_path, write_configs):
    write_files(tmp_path / "task", mteb_layout(top_ranked=False))
    entry = {"loader": "mteb", "task": "retrieval", "path": str(tmp_path / "task"),
             "retrieval": {"protocol": "mteb", "skip_first_result": True}}
    config = load_config(write_configs(datasets={"covers": entry}))
    conventions = config.protocol.conventions(config.dataset("covers"))
    assert conventions.skip_first_result and conventions.as_dict()["skip_first_result"] is True
    plain = load_config(write_configs("plain", datasets={"covers": {**entry, "retrieval": {"protocol": "mteb"}}}))
    assert "skip_first_result" not in plain.protocol.conventions(plain.dataset("covers")).as_dict()
