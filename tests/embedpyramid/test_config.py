import re
from pathlib import Path

import pytest
import yaml

from embedpyramid.config import ConfigError, load_config

DEFAULT_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_default_configs_load_two_models_on_different_backends(write_configs):
    config = load_config(write_configs())
    backends = {model.card.backend for model in config.models.values()}
    assert len(config.models) >= 2 and len(backends) >= 2
    for model in config.models.values():
        assert re.fullmatch(rf"{re.escape(model.name)}@[0-9a-f]{{7}}", model.key)
    assert config.protocol.k_values == [1, 3, 5, 10, 100]
    assert [str(m) for m in config.protocol.measures()][:2] == ["Recall@1", "Recall@3"]


@pytest.mark.parametrize(
    ("field", "value", "changes_vectors"),
    [
        ("query_prompt", "query: ", True),
        ("document_prompt", "passage: ", True),
        ("normalize", False, True),
        ("dimension", 128, True),
        ("max_tokens", 128, True),
        ("truncation_side", "left", True),
        ("similarity", "l2", True),
        ("similarity", "cosine", False),  # the default of a card that normalizes
        ("run", {"batch_size": 7}, False),
        ("run", {"batch_size": 64, "threads": 1, "device": "cpu", "shard_size": 16, "price_per_device_hour": 2.5}, False),
    ],
)
def test_card_hash_covers_exactly_the_fields_that_change_vectors(write_configs, default_models, field, value, changes_vectors):
    before = load_config(write_configs("a", models=default_models)).models["minilm-l6"]
    edited = {**default_models, "minilm-l6": {**default_models["minilm-l6"], field: value}}
    after = load_config(write_configs("b", models=edited)).models["minilm-l6"]
    assert (before.card_hash != after.card_hash) is changes_vectors
    assert load_config(write_configs("c", models=edited)).models["use-m3"].key == load_config(
        write_configs("d", models=default_models)).models["use-m3"].key


def test_unknown_backend_names_file_key_and_allowed_values(write_configs, default_models):
    folder = write_configs(models={**default_models, "minilm-l6": {**default_models["minilm-l6"], "backend": "onnx"}})
    with pytest.raises(ConfigError) as error:
        load_config(folder)
    message = str(error.value)
    assert str(folder / "models.yaml") in message
    assert "models.minilm-l6.backend" in message
    for allowed in ("sentence-transformers", "model2vec", "entry-point"):
        assert allowed in message


def test_missing_model_path_is_named(write_configs, tmp_path):
    folder = write_configs(models={"local": {"backend": "sentence-transformers", "source": {"path": "no/such/model"}}})
    with pytest.raises(ConfigError, match=r"models\.local\.source: model path .*no/such/model does not exist"):
        load_config(folder)


def test_missing_package_is_named(write_configs):
    folder = write_configs(models={"pkg": {"backend": "model2vec", "source": {"package": "no_such_package_xyz"}}})
    with pytest.raises(ConfigError, match="package 'no_such_package_xyz' is not installed"):
        load_config(folder)


def test_entry_point_backend_needs_an_entry_point(write_configs):
    folder = write_configs(models={"ep": {"backend": "entry-point"}})
    with pytest.raises(ConfigError, match=r"models\.ep: Value error, backend 'entry-point' needs entry_point"):
        load_config(folder)


def test_unknown_key_in_a_card_is_refused(write_configs, default_models):
    folder = write_configs(models={**default_models, "minilm-l6": {**default_models["minilm-l6"], "normalise": True}})
    with pytest.raises(ConfigError, match=r"models\.minilm-l6\.normalise: Extra inputs are not permitted"):
        load_config(folder)


def test_unsafe_model_name_is_refused(write_configs, default_models):
    folder = write_configs(models={"Mini LM": default_models["minilm-l6"]})
    with pytest.raises(ConfigError, match="names must be lowercase"):
        load_config(folder)


def test_depth_below_largest_k_is_refused(write_configs):
    folder = write_configs(protocol={"k_values": [1, 10], "depth": 5})
    with pytest.raises(ConfigError, match=r"(?s)protocol\.yaml.*\(top level\): Value error, depth 5 must be at least the largest k \(10\)"):
        load_config(folder)


def test_gain_allowed_values_are_listed(write_configs):
    folder = write_configs(protocol={"gain": "log"})
    with pytest.raises(ConfigError, match=r"gain: Input should be 'linear' or 'exponential'"):
        load_config(folder)


def test_unknown_dataset_loader_and_missing_beir_folder(write_configs):
    with pytest.raises(ConfigError, match=r"(?s)datasets\.x.*'chatterbot', 'beir'"):
        load_config(write_configs("a", datasets={"x": {"loader": "csv"}}))
    with pytest.raises(ConfigError, match=r"datasets\.y\.path: folder .*nowhere does not exist"):
        load_config(write_configs("b", datasets={"y": {"loader": "beir", "path": "nowhere"}}))


def test_missing_file_is_named(tmp_path):
    (tmp_path / "models.yaml").write_text("models: {}\n")
    with pytest.raises(ConfigError, match=r"models\.yaml: needs a non-empty mapping under 'models:'"):
        load_config(tmp_path)


def test_comparison_baseline_and_report_metric_are_checked(write_configs, default_models):
    protocol = yaml.safe_load((DEFAULT_CONFIGS / "protocol.yaml").read_text())
    with pytest.raises(ConfigError, match=r"comparison\.baseline 'e5' is not a card in models\.yaml; allowed: minilm-l6, use-m3"):
        load_config(write_configs("a", protocol={**protocol, "comparison": {"baseline": "e5"}}))
    with pytest.raises(ConfigError, match=r"comparison\.report_metric 'nDCG@20' is not measured"):
        load_config(write_configs("b", protocol={**protocol, "comparison": {"report_metric": "nDCG@20"}}))
    config = load_config(write_configs("c", protocol={**protocol, "comparison": {"baseline": "use-m3", "seed": 3}}))
    settings = config.comparison_settings("chatterbot-en")
    assert settings.baseline == config.models["use-m3"].key and settings.seed == 3
    assert settings.slice_columns == ("category",) and settings.group_column is None
    assert load_config(write_configs("d", protocol={**protocol, "comparison": {}})).baseline.name == "minilm-l6"


def test_similarity_defaults_to_cosine_for_normalizing_cards_and_inner_product_otherwise(write_configs, default_models):
    minilm = default_models["minilm-l6"]
    config = load_config(write_configs(models={
        "unit": minilm, "raw": {**minilm, "normalize": False}, "euclid": {**minilm, "normalize": False, "similarity": "l2"}}))
    assert {name: m.similarity for name, m in config.models.items()} == {
        "unit": "cosine", "raw": "inner_product", "euclid": "l2"}
    assert config.models["euclid"].hashed_fields()["similarity"] == "l2"


REMOTE = {
    "http": {"backend": "http", "source": {"url": "https://api.example.com/v1/embeddings", "model": "embed-small",
                                           "dimensions": 256},
             "api": {"key_env": "EXAMPLE_KEY", "requests_per_minute": 500, "price_per_million_tokens": 0.02}},
    "titan": {"backend": "bedrock", "source": {"bedrock": "amazon.titan-embed-text-v2:0", "region": "eu-west-1"}},
}


def test_remote_cards_hash_the_endpoint_and_model_not_the_key_price_or_rate(write_configs):
    config = load_config(write_configs("a", models=REMOTE))
    http = config.models["http"]
    assert http.is_remote and http.source_path is None
    assert http.hashed_fields()["source"] == {"url": "https://api.example.com/v1/embeddings", "model": "embed-small",
                                              "dimensions": 256}
    cheaper = {**REMOTE, "http": {**REMOTE["http"], "api": {"key_env": "OTHER_KEY", "price_per_million_tokens": 0.01}}}
    assert load_config(write_configs("b", models=cheaper)).models["http"].card_hash == http.card_hash
    other = {**REMOTE, "http": {**REMOTE["http"], "source": {**REMOTE["http"]["source"], "dimensions": 512}}}
    assert load_config(write_configs("c", models=other)).models["http"].card_hash != http.card_hash


@pytest.mark.parametrize(("card", "message"), [
    ({"backend": "http", "source": {"url": "https://u:pw@api.example.com/v1/embeddings", "model": "m"}},
     r"models\.x\.source\.HttpSource\.url.*without credentials, query or fragment"),
    ({"backend": "http", "source": {"url": "https://api.example.com/v1/embeddings?key=abc", "model": "m"}},
     r"put the key in api\.key_env"),
    ({"backend": "http", "source": {"bedrock": "amazon.titan-embed-text-v2:0", "region": "us-east-1"}},
     r"backend 'http' needs source: \{url: \.\.\., model: \.\.\.\}"),
    ({"backend": "bedrock", "source": {"bedrock": "m", "region": "us-east-1"}, "api": {"key_env": "AWS_KEY"}},
     r"boto3's credential chain"),
    ({"backend": "http", "source": {"url": "https://api.example.com/v1/embeddings", "model": "m"}, "pooling": "mean"},
     r"remote model that pools, truncates and picks its dtype itself"),
    ({"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "api": {"key_env": "K"}},
     r"api: settings are for backends http, bedrock"),
    ({"backend": "http", "source": {"url": "https://api.example.com/v1/embeddings", "model": "m"},
      "api": {"key_env": "not a name"}}, r"models\.x\.api\.key_env"),
])
def test_bad_remote_cards_name_the_key(write_configs, card, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write_configs(models={"x": card}))
