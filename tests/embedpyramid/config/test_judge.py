from pathlib import Path

import pytest
import yaml

from embedpyramid.config import ConfigError, DownstreamConfig, load_config, load_downstream_config

DEFAULT_CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def test_the_shipped_judge_yaml_loads_with_the_offline_generator_and_judge(write_configs):
    config = load_config(write_configs())
    assert config.downstream is None  # the fixture writes no judge.yaml: L6 is off
    shipped = load_downstream_config(DEFAULT_CONFIGS / "judge.yaml")
    assert shipped == DownstreamConfig()  # the file spells out the defaults
    assert shipped.generator.kind == "extractive" and shipped.judge.kind == "qrels"
    assert shipped.judge.criteria == ["relevance", "ranking", "coverage"] and shipped.k == 5
    assert load_config(DEFAULT_CONFIGS).downstream == shipped


def write_judge(folder, content):
    (folder / "judge.yaml").write_text(yaml.safe_dump(content))
    return folder


@pytest.mark.parametrize(("content", "message"), [
    ({"judge": {"criteria": ["fluency"]}}, r"judge: .*criterion 'fluency' needs a definition under descriptions"),
    ({"judge": {"criteria": ["fluency"], "descriptions": {"fluency": "Reads well?"}}},
     r"the qrels judge grades only relevance, ranking, coverage; \['fluency'\] need kind: http"),
    ({"judge": {"kind": "llm"}}, r"judge\.kind: .*'qrels' or 'http'"),
    ({"judge": {"criteria": ["Relevance!"], "kind": "http"}}, "names are lowercase letters"),
    ({"generator": {"kind": "http", "endpoint": {"key_env": "sk-123"}}}, "key_env must name an environment variable"),
    ({"k": 0}, r"k: Input should be greater than or equal to 1"),
    ({"analysis": {"power": {"target": 1.5}}}, r"analysis\.power\.target"),
    ({"temperature": 0.7}, r"temperature: unknown key; .*allowed here: k, systems, generator, judge, analysis"),
])
def test_errors_name_the_file_the_key_and_what_is_allowed(write_configs, content, message):
    folder = write_judge(write_configs(), content)
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(folder)
    assert str(folder / "judge.yaml") in str(raised.value)


def test_an_http_judge_may_define_its_own_criteria(write_configs):
    folder = write_judge(write_configs(), {"judge": {"kind": "http", "criteria": ["relevance", "fluency"],
                                                     "descriptions": {"fluency": "Is the answer fluent?"}}})
    judge = load_config(folder).downstream.judge
    assert judge.description("fluency") == "Is the answer fluent?" and judge.description("relevance").startswith("Does")


def test_systems_answered_from_must_be_per_model_runs_of_the_folder(write_configs):
    folder = write_judge(write_configs(), {"systems": ["exact", "nosuch"]})
    with pytest.raises(ConfigError) as refused:
        load_config(folder)
    assert str(refused.value) == (f"{folder / 'judge.yaml'}:3: systems.1: 'nosuch' is not a system (this folder "
                                  "has no systems.yaml); allowed: exact")  # the file, the line of the item, the key
    systems = {"systems": {"bm25": {"kind": "bm25"}, "hybrid": {"kind": "rrf", "inputs": ["exact", "bm25"]}}}
    folder = write_judge(write_configs("with-systems", systems=systems), {"systems": ["exact", "nosuch"]})
    with pytest.raises(ConfigError, match=r"judge\.yaml:\d+: systems\.1: 'nosuch' is not a system of systems\.yaml; "
                                          r"allowed: exact, hybrid$"):
        load_config(folder)
    write_judge(folder, {"systems": ["bm25"]})
    with pytest.raises(ConfigError, match=r"systems\.0: 'bm25' is computed once per dataset, not per model .*"
                                          r"allowed: exact, hybrid$"):
        load_config(folder)
    write_judge(folder, {"systems": ["hybrid", "exact"]})
    assert load_config(folder).downstream.systems == ["hybrid", "exact"]
