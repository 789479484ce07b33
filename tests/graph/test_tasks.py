"""Graph tests of the L2 task families and L1 pair sanity: real Dagster materializations of the
real assets over the embedded data with the two real models of the defaults."""

import json

import duckdb
import yaml
from graph_helpers import plan_and_automation, quick_protocol, toy

from embedpyramid.cli import main
from embedpyramid.config import load_config
from embedpyramid.rendering.tables import escape_markdown
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
