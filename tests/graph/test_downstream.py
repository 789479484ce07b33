"""L6 in the graph: real materializations on a chatterbot subset with both real models, the
offline extractive generator and qrels judge; the report section, the judge metrics in
results.duckdb and the comparisons, and a judge.yaml edit that makes only L6 stale. Then an HTTP
judge (a local stub server) in the graph, on a tiny dataset with toy encoders."""

import json

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml
from graph_helpers import default_cards, default_section, plan_and_automation, quick_protocol, toy
from stub_server import Reply, StubServer

from embedpyramid.config import load_config
from graphbase.partitions import model_dataset_key
from pipelines.graph import build_definitions
from pipelines.runner import run_pipeline

CATEGORIES = ["ai", "emotion"]
MODELS = ("minilm-l6", "use-m3")


def judge_yaml(**changes) -> dict:
    judge = default_section("judge")
    judge["analysis"]["power"] = {**judge["analysis"]["power"], "n_simulations": 200}
    return {**judge, **changes}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Two real models on two chatterbot categories, evaluated through L6 and summarized."""
    root = tmp_path_factory.mktemp("l6")
    folder, data = root / "configs", root / "data"
    folder.mkdir()
    models = {name: default_cards()[name] for name in MODELS}
    sections = {"models": {"models": models}, "protocol": quick_protocol(),
                "datasets": {"datasets": {"chat": {"loader": "chatterbot", "categories": CATEGORIES,
                                                   "slices": ["category"]}}},
                "judge": judge_yaml()}
    for name, content in sections.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
    instance = dg.DagsterInstance.ephemeral()
    report = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    return {"folder": folder, "data": data, "instance": instance, "report": report, "config": load_config(folder)}


@pytest.mark.heavy
def test_l6_assets_materialize_per_partition_and_once_across_models(evaluated):
    report, config = evaluated["report"], evaluated["config"]
    assert report.failures == [] and report.summary_built
    keys = [config.models[name].key for name in MODELS]
    assert sorted((m, a) for m, _, a in report.assets if a == "downstream_answers") == sorted(
        (key, "downstream_answers") for key in keys)
    record = evaluated["instance"].fetch_materializations(dg.AssetRecordsFilter(
        dg.AssetKey("downstream_answers"), asset_partitions=[str(model_dataset_key("minilm-l6", "chat"))]),
        limit=1).records[0]
    metadata = record.asset_materialization.metadata
    assert 1 <= metadata["exact judge:relevance"].value <= 5
    assert metadata["malformed"].value == 0 and metadata["ungraded"].value == 0
    assert metadata["judge"].value["kind"] == "qrels"
    analysis = evaluated["instance"].fetch_materializations(dg.AssetKey("grade_analysis"), limit=1).records[0]
    assert analysis.asset_materialization.metadata["analyses"].value == ["chat · exact"]


def test_judge_metrics_join_per_query_metrics_and_the_comparisons(evaluated):
    config = evaluated["config"]
    baseline, other = (config.models[name].key for name in MODELS)
    with duckdb.connect(str(evaluated["data"] / "results.duckdb"), read_only=True) as con:
        per_query = pl.from_arrow(con.sql(
            "SELECT model, metric, count(*) AS n FROM per_query_metrics WHERE metric LIKE 'judge:%' "
            "OR metric LIKE 'answer:%' OR metric = 'context:recall' GROUP BY ALL").to_arrow_table())
        exact_queries = con.execute("SELECT count(DISTINCT query_id) FROM per_query_metrics "
                                "WHERE metric = 'nDCG@10'").fetchall()[0][0]
        compared = pl.from_arrow(con.sql(
            "SELECT metric, model_a, model_b, slice_column, n, family, decision FROM comparisons "
            "WHERE metric LIKE 'judge:%' OR metric LIKE 'answer:%'").to_arrow_table())
        views = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        grades = pl.from_arrow(con.sql("SELECT * FROM grade_descriptive").to_arrow_table())
        answers = con.execute("SELECT count(*), count(DISTINCT model) FROM downstream_answers").fetchall()[0]
        queries = con.execute("SELECT count(DISTINCT query_id) FROM qrels").fetchall()[0][0]
    # Every judged query has each metric under each model: the same queries as the retrieval metrics.
    assert set(per_query["metric"]) == {"judge:relevance", "judge:ranking", "judge:coverage", "answer:citation_precision",
                                        "answer:citation_recall", "context:recall", "answer:contains_gold",
                                        "answer:token_f1"}
    assert set(per_query["n"]) == {exact_queries} and set(per_query["model"]) == {baseline, other}
    relevance = compared.filter((pl.col("metric") == "judge:relevance") & (pl.col("slice_column") == "all"))
    assert relevance.rows() == [("judge:relevance", baseline, other, "all", exact_queries, "exploratory",
                                 relevance["decision"][0])]
    assert set(compared.filter(pl.col("metric") == "judge:relevance")["slice_column"]) >= {"all", "category"}
    assert {"downstream_answers", "judgements", "judge_agreement", "downstream_dropped", "grade_descriptive",
            "grade_fits", "grade_omnibus", "grade_pairwise", "grade_letters", "grade_power",
            "grade_power_curve"} <= views
    assert set(grades["model"]) == {baseline, other} and (grades["n"] > 0).all()
    assert answers == (2 * queries, 2)


def test_the_report_has_an_l6_section_with_the_verdict_tables_and_plots(evaluated):
    markdown = (evaluated["data"] / "report" / "report.md").read_text()
    assert "## L6 downstream answers: chat · exact" in markdown
    section = markdown.split("## L6 downstream answers: chat · exact", 1)[1]
    assert section.lstrip().startswith("chat · exact: the answer quality ")
    for text in ("Wald χ²(1)", "covariance clustered on", "letter groups:", "Power: a 0.25 grade-point difference",
                 "Model choice: ", "Not measured offline", "Letter groups", "Mean grade (SD)",
                 "qrels judge"):
        assert text in section, text
    figures = evaluated["data"] / "report" / "figures"
    assert {f"{name}-chat-exact.svg" for name in ("grades_box", "grades_bar", "grades_heatmap")} <= {
        path.name for path in figures.iterdir()}


def test_editing_judge_yaml_makes_only_l6_stale(evaluated):
    folder, data, instance = evaluated["folder"], evaluated["data"], evaluated["instance"]
    (folder / "judge.yaml").write_text(yaml.safe_dump(judge_yaml(k=3), sort_keys=False))
    planned, requested, changes = plan_and_automation(folder, data, instance)
    assert changes == ["config/judge"]
    partitions = {str(model_dataset_key(name, "chat")) for name in MODELS}
    assert requested == planned == {("downstream_answers", partition) for partition in partitions}
    report = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    assert report.failures == []
    assert {asset for _, _, asset in report.assets} == {"downstream_answers"}
    assert report.summary_built


def test_without_judge_yaml_there_is_no_l6(evaluated, tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in ("models", "datasets", "protocol"):
        (folder / f"{name}.yaml").write_text((evaluated["folder"] / f"{name}.yaml").read_text())
    graph = build_definitions(folder, tmp_path / "data").resolve_asset_graph()
    names = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert not names & {"downstream_answers", "grade_analysis", "config/judge"}


KEY = "sk-stub-5ecret-0123456789"


class ScriptedJudge:
    """An OpenAI-compatible judge: grades derived from the prompt's content; the first request
    about the query "owls" gets a malformed reply (so one model lacks that query's grades)."""

    def __init__(self):
        self.owls = 0

    def __call__(self, request):
        content = request.json["messages"][1]["content"]
        if content.startswith("Question: owls\n"):
            self.owls += 1
            if self.owls == 1:
                return Reply(json=completion("I would rather not grade this."))
        digest = sum(content.encode())
        return Reply(json=completion(json.dumps({"relevance": 1 + digest % 5, "ranking": 1 + digest // 5 % 5,
                                                 "coverage": 1 + digest // 25 % 5,
                                                 "rationale": "scripted"})))


def completion(content):
    return {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def test_an_http_judge_in_the_graph_malformed_replies_counted_and_dropped_from_the_pairs(
        write_configs, tiny, tmp_path, monkeypatch):
    folder = write_configs(models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny, protocol=quick_protocol())
    endpoint = {"url_env": "TEST_LLM_URL", "model_env": "TEST_LLM_MODEL", "key_env": "TEST_LLM_KEY"}
    judge = judge_yaml()
    judge["judge"] = {**judge["judge"], "kind": "http", "endpoint": endpoint}
    (folder / "judge.yaml").write_text(yaml.safe_dump(judge, sort_keys=False))
    data = tmp_path / "data"
    with StubServer(ScriptedJudge()) as server:
        monkeypatch.setenv("TEST_LLM_URL", server.url + "/v1")
        monkeypatch.setenv("TEST_LLM_MODEL", "stub-model")
        monkeypatch.setenv("TEST_LLM_KEY", KEY)
        instance = dg.DagsterInstance.ephemeral()
        report = run_pipeline(folder, data, instance=instance, log=lambda _line: None)
    assert report.failures == [] and report.summary_built
    malformed = [record.asset_materialization.metadata["malformed"].value
                 for record in instance.fetch_materializations(dg.AssetKey("downstream_answers"), limit=10).records]
    assert sorted(malformed) == [0, 1]
    with duckdb.connect(str(data / "results.duckdb"), read_only=True) as con:
        dropped = con.execute("SELECT metric, dropped_queries FROM downstream_dropped ORDER BY metric").fetchall()
        agreement = con.execute("SELECT count(DISTINCT model), count(*) FROM judge_agreement").fetchall()[0]
        n = dict(con.execute("SELECT metric, n FROM comparisons WHERE slice_column = 'all' AND metric IN "
                             "('judge:relevance', 'nDCG@10', 'answer:citation_precision')").fetchall())
        judgements = con.execute("SELECT count(*) FROM judgements WHERE malformed IS NOT NULL").fetchall()[0][0]
    # The malformed judgement leaves that query out of the judge metrics' pairs, nowhere else.
    assert dropped == [("judge:coverage", 1), ("judge:ranking", 1), ("judge:relevance", 1)]
    assert n == {"nDCG@10": 12, "answer:citation_precision": 12, "judge:relevance": 11}
    assert judgements == 3 and agreement == (2, 6)
    markdown = (data / "report" / "report.md").read_text()
    for text in ("Judge agreement with the qrels judge", "Queries dropped from the paired comparisons"):
        assert text in markdown
    # The key reaches the server only: no artefact, cache file or report holds it.
    assert not [path for path in data.rglob("*") if path.is_file() and KEY.encode() in path.read_bytes()]
