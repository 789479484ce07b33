"""Graph tests of the L2 task families and L1 pair sanity: real Dagster materializations of the
real assets over the embedded data, and over MTEB tasks served by a hub endpoint on 127.0.0.1, with
the two real models of the defaults."""

import json

import duckdb
import pytest
import yaml
from graph_helpers import plan_and_automation, quick_protocol, toy
from hub_server import LocalHub, point_at

from embedpyramid.cli import main
from embedpyramid.config import load_config
from embedpyramid.rendering.tables import escape_markdown
from graphbase.facets import DATASET_SOURCE, TASK_FACETS
from graphbase.instance import open_instance
from graphbase.partitions import (
    model_dataset_key,
    task_datasets_name,
)
from pipelines.runner import run_pipeline

CATEGORIES = ["ai", "computers", "emotion", "food"]
TASKS = {
    "lee-sts": {"loader": "gensim-lee", "task": "sts"},
    "django-ko": {"loader": "django-bitext", "task": "bitext", "languages": ["ko"], "slices": ["language_pair"],
                  "bitext": {"scorings": ["nearest", "csls"], "k": 4, "hubness_k": 10}},
    "duplicates": {"loader": "chatterbot", "task": "pair_classification", "group_column": "answer_group"},
}
CLUSTERS = {"clusters": {"loader": "chatterbot", "task": "clustering", "categories": CATEGORIES,
                         "clustering": {"seeds": [0, 1]}}}


def write(folder, datasets):
    content = yaml.safe_load((folder / "datasets.yaml").read_text())
    content["datasets"] = datasets
    (folder / "datasets.yaml").write_text(yaml.safe_dump(content, sort_keys=False))


@pytest.mark.heavy
def test_task_families_on_embedded_data_with_two_real_models(write_configs, two_real_models, tiny, tmp_path):
    folder = write_configs(models=two_real_models, datasets={**tiny, **TASKS},
                           protocol=quick_protocol(baseline="minilm-l6"))
    data = tmp_path / "data"
    instance = open_instance(data)
    config = load_config(folder)
    minilm, use = config.models["minilm-l6"].key, config.models["use-m3"].key
    # The CLI's runner: retrieval, the task families on their own partitions (each family's freeze
    # and evaluate jobs), the pair sanity assets and the summaries.
    first = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    assert instance.get_dynamic_partitions(task_datasets_name("bitext")) == ["django-ko"]
    assert first.failures == [] and first.summary_built
    assert sorted(first.materialized) == sorted((model, dataset) for model in (minilm, use)
                                                for dataset in ("tiny", *TASKS))
    assert sorted(first.frozen) == sorted(["tiny", *TASKS])
    assert {asset for model, dataset, asset in first.assets if dataset == "django-ko"} == {
        "bitext_embeddings", "task_bitext", "pair_sanity_bitext"}

    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        def value(dataset, model, system, metric, subset="all", split="test"):
            return con.execute(
                "SELECT value FROM task_summary WHERE dataset = ? AND model = ? AND system = ? AND metric = ? "
                "AND subset = ? AND split = ?", [dataset, model, system, metric, subset, split]).fetchone()[0]

        # Sane, non-trivial values: Lee Spearman around 0.5 for both; USE finds Korean translations, MiniLM not.
        for model in (minilm, use):
            assert 0.3 < value("lee-sts", model, "cosine", "spearman") < 0.7
        assert value("django-ko", use, "csls", "accuracy", "en-ko") > 0.8
        assert value("django-ko", minilm, "csls", "accuracy", "en-ko") < 0.5
        # The per-item rows went through the paired comparisons: USE's win on Korean is confirmatory and clear.
        row = con.execute(
            "SELECT model_a, model_b, mean_delta, ci_low, family, p_adjusted FROM task_comparisons "
            "WHERE dataset = 'django-ko' AND system = 'csls' AND metric = 'accuracy' AND slice_column = 'all'"
        ).fetchone()
        assert row[:2] == (minilm, use) and row[2] > 0.3 and row[3] > 0 and row[4] == "confirmatory" and row[5] < 0.05
        statistics = dict(con.execute(
            "SELECT metric, delta FROM task_statistic_comparisons WHERE dataset = 'lee-sts' AND model_b = ?",
            [use]).fetchall())
        assert set(statistics) == {"spearman", "pearson"}
        assert con.execute("SELECT count(*) FROM task_per_item WHERE dataset = 'duplicates'").fetchone()[0] > 0
        sanity = {(d, m): auc for d, m, auc in con.execute("SELECT dataset, model, auc FROM pair_sanity").fetchall()}
        assert set(sanity) == {(d, m) for d in ("tiny", "lee-sts", "django-ko", "duplicates") for m in (minilm, use)}
        assert sanity[("django-ko", use)] > 0.9 and all(0.5 < auc <= 1.0 for auc in sanity.values())
        # Retrieval's tables are untouched by the tasks.
        assert set(con.execute("SELECT DISTINCT dataset FROM per_query_metrics").fetchall()) == {("tiny",)}
        # The conventions view names the protocol of every task number beside retrieval's conventions.
        conventions = {row[:3]: json.loads(row[3]) for row in con.execute("SELECT * FROM conventions").fetchall()}
        assert "gain" in conventions[("tiny", minilm, "exact")]
        assert {k: conventions[("lee-sts", use, "cosine")][k] for k in ("task", "protocol", "similarity")} == {
            "task": "sts", "protocol": "project", "similarity": "cosine"}
        assert {(d, s) for d, m, s in conventions if m == use and d == "django-ko"} == {("django-ko", "nearest"),
                                                                                       ("django-ko", "csls")}
        assert not any("mteb_version" in c for c in conventions.values())
        warnings = con.execute("SELECT dataset, model, warning FROM task_warnings").fetchall()

    report = (data / "report" / "report.md").read_text()
    for heading in ("L1 pair sanity", "L2 Semantic similarity (STS): lee-sts", "L2 Bitext mining: django-ko",
                    "L2 Pair classification (duplicates): duplicates"):
        assert f"## {heading}" in report
    assert warnings  # the embedded duplicates' dev split is 30 pairs
    for dataset, model, warning in warnings:
        assert escape_markdown(f"{model} on {dataset}: {warning}") in report
    verdict = report.split("## Contents")[0]
    assert f"\\[bitext, csls\\] django-ko · accuracy over 263 pairs: {use} wins" in verdict  # Markdown-escaped
    assert "lee-sts (sts, spearman over 1,225 pairs)" in verdict

    # A new task dataset: retrieval stays fresh, only the new family's dataset is frozen first.
    write(folder, {**tiny, **TASKS, **CLUSTERS})
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/clustering_datasets [clusters]", "config/task_comparison"]
    assert {item for item in planned if item[1] is not None} == {
        ("frozen_clustering_dataset", "clusters"),
        *((asset, str(model_dataset_key(name, "clusters"))) for name in ("minilm-l6", "use-m3")
          for asset in ("clustering_embeddings", "task_clustering"))}
    # The summary is stale (a new task dataset) but waits while the new partitions are evaluated.
    assert requested == {("frozen_clustering_dataset", "clusters")}
    rerun = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    assert sorted(rerun.materialized) == sorted([(minilm, "clusters"), (use, "clusters")]) and rerun.summary_built
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT model, value, sd, n_seeds FROM task_summary WHERE dataset = 'clusters' "
                           "AND metric = 'v_measure' AND subset = 'all'").fetchall()
    assert len(rows) == 2 and all(0.2 < v < 1.0 and sd is not None and n == 2 for _, v, sd, n in rows)
    assert "## L2 Clustering: clusters" in (data / "report" / "report.md").read_text()

    # Editing one family's settings stales that family's partitions of that dataset, nothing else.
    write(folder, {**tiny, **TASKS, **{"clusters": {**CLUSTERS["clusters"], "clustering": {"seeds": [0, 1, 2]}}}})
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/clustering_datasets [clusters]"]
    family = {"frozen_clustering_dataset", "clustering_embeddings", "task_clustering"}
    assert planned and {asset for asset, _ in planned} <= family
    assert requested and {asset for asset, _ in requested} <= family


def test_a_config_of_task_datasets_only_gets_every_summary_and_checks_its_published_score(write_configs, tmp_path,
                                                                                          capsys):
    reference = {"model": "ngrams", "metric": "spearman", "value": 0.09, "tolerance": 0.01,
                 "source": "a published number of the toy encoder, for this test"}
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)},
                           datasets={"lee-sts": {**TASKS["lee-sts"], "reference": [reference]}},
                           protocol=quick_protocol())
    data = tmp_path / "data"
    report = run_pipeline(folder, data, log=lambda _line: None)
    assert report.failures == [] and report.summary_skipped is None and report.summary_built
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM per_query_metrics").fetchall() == [(0,)]  # no retrieval here
        checked = con.execute("SELECT dataset, model, status FROM reproduction").fetchall()
        compared = con.execute("SELECT count(*) FROM task_statistic_comparisons").fetchall()
    assert checked == [("lee-sts", "ngrams", "pass")] and compared[0][0] > 0
    assert "## Reproduction" in (data / "report" / "report.md").read_text()
    assert main(["leaderboard", "--data", str(data)]) == 0
    answer = capsys.readouterr().out
    assert "lee-sts  sts" in answer and "published scores: 1 checked — 1 pass" in answer


RERANK_ID, RETRIEVAL_ID = "mteb/tiny-askubuntu", "mteb/tiny-cqa"
QUESTIONS = {
    "q1": ("How do I install Ubuntu from a USB stick?", ["Create a bootable USB drive to install Ubuntu",
                                                          "Installing Ubuntu from a flash drive"],
           ["How to change the wallpaper", "Python script fails with import error", "Mount an NTFS partition"]),
    "q2": ("I forgot my login password", ["Reset a forgotten user password", "Recover access after losing my password"],
           ["Install Steam on Ubuntu", "Change the screen resolution", "Set up a printer over the network"]),
    "q3": ("Wifi does not connect after an update", ["Wireless network stopped working after upgrade"],
           ["Increase the swap size", "Uninstall a snap package", "Keyboard layout keeps resetting",
            "Configure a static IP on the ethernet card"]),
    "q4": ("Sound is not working through HDMI", ["No audio output over HDMI to my TV"],
           ["Enable the firewall", "Compile a kernel module", "Create a desktop shortcut"]),
}


def mteb_layout_files(parts: dict[str, tuple[str, dict]]) -> dict[str, bytes]:
    """A hub dataset in MTEB's retrieval layout: one parquet file per config, listed in README.md."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    files = {}
    for config, (split, columns) in parts.items():
        sink = io.BytesIO()
        pq.write_table(pa.table(columns), sink)
        files[f"{config}/{split}-00000-of-00001.parquet"] = sink.getvalue()
    configs = [{"config_name": config, "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"}]}
               for config, (split, _) in parts.items()]
    files["README.md"] = ("---\n" + yaml.safe_dump({"configs": configs}) + "---\n").encode()
    return files


def reranking_and_retrieval_files() -> tuple[dict[str, bytes], dict[str, bytes]]:
    doc_ids, texts, qrels, candidates = [], [], [], {}
    for query, (_, positives, negatives) in QUESTIONS.items():
        ranked = []
        for grade, group in ((1, positives), (0, negatives)):
            for text in group:
                doc_ids.append(f"d{len(doc_ids):02d}")
                texts.append(text)
                ranked.append(doc_ids[-1])
                qrels.append((query, doc_ids[-1], grade))
        candidates[query] = ranked
    parts = {
        "corpus": ("corpus", {"_id": doc_ids, "title": [""] * len(doc_ids), "text": texts}),
        "queries": ("queries", {"_id": list(QUESTIONS), "text": [q for q, _, _ in QUESTIONS.values()]}),
        "default": ("test", {"query-id": [r[0] for r in qrels], "corpus-id": [r[1] for r in qrels],
                             "score": [r[2] for r in qrels]}),
    }
    reranking = mteb_layout_files({**parts, "top_ranked": ("test", {"query-id": list(candidates),
                                                                    "corpus-ids": list(candidates.values())})})
    relevant = [r for r in qrels if r[2] > 0]
    retrieval = mteb_layout_files({**parts, "default": ("test", {
        "query-id": [r[0] for r in relevant], "corpus-id": [r[1] for r in relevant], "score": [1] * len(relevant)})})
    return reranking, retrieval


def test_mteb_reranking_and_retrieval_tasks_from_the_hub_run_end_to_end(write_configs, two_real_models, tmp_path,
                                                                       monkeypatch):
    reranking, retrieval = reranking_and_retrieval_files()
    datasets = {
        "askubuntu": {"loader": "mteb", "task": "reranking", "hub": RERANK_ID, "reranking": {"protocol": "mteb"},
                      "reference": [{"model": "minilm-l6", "metric": "MAP@1000", "value": 0.5, "tolerance": 0.5,
                                     "source": "set by this test"}]},
        "cqa": {"loader": "mteb", "task": "retrieval", "hub": RETRIEVAL_ID, "retrieval": {"protocol": "mteb"}},
    }
    with LocalHub() as hub:
        commits = {RERANK_ID: hub.push(RERANK_ID, reranking, repo_type="dataset"),
                   RETRIEVAL_ID: hub.push(RETRIEVAL_ID, retrieval, repo_type="dataset")}
        point_at(monkeypatch, hub, tmp_path / "hf-cache")
        folder = write_configs(models=two_real_models, datasets=datasets, protocol=quick_protocol(baseline="minilm-l6"))
        data = tmp_path / "data"
        instance = open_instance(data)
        config = load_config(folder)
        minilm, use = config.models["minilm-l6"].key, config.models["use-m3"].key
        # The config facets record each hub dataset's commit: a branch that moves stales its partitions.
        rerank_facet = next(facet for facet in TASK_FACETS if facet.partitioned_by == "reranking")
        assert rerank_facet.fragment(config, "askubuntu")["hub"]["commit"] == commits[RERANK_ID]
        assert DATASET_SOURCE.fragment(config, "cqa")["hub"]["commit"] == commits[RETRIEVAL_ID]
        run = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    assert run.failures == [] and run.summary_built
    assert sorted(run.frozen) == ["askubuntu", "cqa"]
    assert instance.get_dynamic_partitions(task_datasets_name("reranking")) == ["askubuntu"]
    assert {asset for _, dataset, asset in run.assets if dataset == "askubuntu"} == {"reranking_embeddings",
                                                                                     "task_reranking"}
    for name, hub_id in (("askubuntu", RERANK_ID), ("cqa", RETRIEVAL_ID)):
        manifest = json.loads((data / "datasets" / name / "manifest.json").read_text())
        assert (manifest["source"]["hub"], manifest["source"]["commit"]) == (hub_id, commits[hub_id])

    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        summary = dict(con.execute("SELECT model, value FROM task_summary WHERE dataset = 'askubuntu' "
                                   "AND metric = 'MAP@1000' AND system = 'cosine'").fetchall())
        # Both models put a duplicate question above most of the unrelated ones.
        assert set(summary) == {minilm, use} and all(0.6 < value <= 1.0 for value in summary.values())
        per_query = con.execute("SELECT count(DISTINCT query_id) FROM task_per_item WHERE dataset = 'askubuntu' "
                                "AND metric = 'MRR@10'").fetchone()[0]
        assert per_query == len(QUESTIONS)
        compared = con.execute("SELECT metric, family FROM task_comparisons WHERE dataset = 'askubuntu' AND "
                               "slice_column = 'all' AND metric = 'MAP@1000'").fetchall()
        assert compared == [("MAP@1000", "confirmatory")]  # per-query paired statistics on the primary measure
        conventions = json.loads(con.execute("SELECT conventions FROM conventions WHERE dataset = 'askubuntu' "
                                             "AND model = ?", [minilm]).fetchone()[0])
        assert (conventions["protocol"], conventions["mteb_version"]) == ("mteb", "2.26")
        retrieved = con.execute("SELECT count(DISTINCT query_id) FROM per_query_metrics WHERE dataset = 'cqa' "
                                "AND metric = 'nDCG@10' AND system = 'exact'").fetchone()[0]
        assert retrieved == len(QUESTIONS)
        check = con.execute("SELECT measured, status, rule FROM reproduction WHERE dataset = 'askubuntu'").fetchone()
    assert check == (pytest.approx(summary[minilm]), "pass", "tolerance")
    report = (data / "report" / "report.md").read_text()
    assert "## L2 Reranking: askubuntu" in report
