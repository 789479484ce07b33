from pathlib import Path

import pytest
import yaml

from embedpyramid.config import ConfigError, load_config
from embedpyramid.config.systems import (
    MODEL_INDEPENDENT,
    AnnReference,
    load_systems_config,
    parse_ann_reference,
)

REPO_CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def copy_configs(target: Path, systems: dict | None = None, *, drop: tuple[str, ...] = ()) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for source in REPO_CONFIGS.glob("*.yaml"):
        if source.stem not in drop:
            (target / source.name).write_text(source.read_text())
    if systems is not None:
        (target / "systems.yaml").write_text(yaml.safe_dump(systems, sort_keys=False))
    return target


def default_systems() -> dict:
    return yaml.safe_load((REPO_CONFIGS / "systems.yaml").read_text())


def test_the_default_systems_load_with_their_dependencies():
    systems = load_config(REPO_CONFIGS).systems
    assert systems is not None
    assert list(systems.systems) == ["bm25", "rrf", "weighted-minmax", "weighted-zscore", "rerank-by-use-m3",
                                     "rerank-by-minilm-l6", "hnsw-rerank-by-use-m3"]
    assert systems.model_independent("bm25") and not systems.model_independent("rrf")
    assert systems.model_label("bm25", "minilm-l6@1234567") == MODEL_INDEPENDENT
    assert systems.upstream_systems("rrf") == ["bm25"]
    assert systems.applies_to("rerank-by-use-m3", "minilm-l6") and not systems.applies_to("rerank-by-use-m3", "use-m3")
    assert systems.candidate_depth("rrf") == 100 and systems.candidate_depth("bm25") is None
    assert systems.ann_references() == {"ann:hnsw32:efSearch=64": 100}


def test_a_folder_without_systems_yaml_still_loads(tmp_path: Path):
    assert load_config(copy_configs(tmp_path / "c", drop=("systems",))).systems is None


def test_changing_one_systems_settings_moves_only_its_hash_and_its_dependents(tmp_path: Path):
    before = load_config(copy_configs(tmp_path / "a", default_systems())).systems.hashes
    changed = default_systems()
    changed["systems"]["rrf"]["k"] = 10
    after = load_config(copy_configs(tmp_path / "b", changed)).systems.hashes
    assert {name for name in before if before[name] != after[name]} == {"rrf"}
    changed = default_systems()
    changed["systems"]["bm25"]["k1"] = 0.9
    after = load_config(copy_configs(tmp_path / "c", changed)).systems.hashes
    assert {name for name in before if before[name] != after[name]} == {"bm25", "rrf", "weighted-minmax",
                                                                         "weighted-zscore"}
    # The cross-encoder's batch size is recorded, not hashed; a bi-encoder's hash follows its card.
    models = yaml.safe_load((REPO_CONFIGS / "models.yaml").read_text())
    models["models"]["use-m3"]["query_prompt"] = "query: "
    folder = copy_configs(tmp_path / "d", default_systems())
    (folder / "models.yaml").write_text(yaml.safe_dump(models))
    after = load_config(folder).systems.hashes
    assert {name for name in before if before[name] != after[name]} == {"rerank-by-use-m3", "hnsw-rerank-by-use-m3"}


def test_the_ann_reference_syntax():
    assert parse_ann_reference("exact") is None
    assert parse_ann_reference("ann:flat") == AnnReference("flat", None, None)
    assert parse_ann_reference("ann:hnsw32:efSearch=64") == AnnReference("hnsw32", "efSearch", 64)
    with pytest.raises(ValueError, match="must look like"):
        parse_ann_reference("ann:hnsw32:efSearch")


@pytest.mark.parametrize(
    ("systems", "message"),
    [
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact", "nope"]}}},
         "systems.f: unknown input 'nope'; allowed: 'exact'"),
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact"]}}}, "systems.f.inputs: Tuple should have at least 2"),
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact", "exact"]}}}, "inputs must be distinct"),
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact", "ann:hnsw32:efSearch=7"]}}},
         "is not a sweep point of 'hnsw32'; allowed: 'ann:hnsw32:efSearch=16'"),
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact", "ann:nope"]}}}, "names no index spec of ann.yaml"),
        ({"systems": {"f": {"kind": "rrf", "inputs": ["exact", "ann:flat:efSearch=16"]}}},
         "index spec 'flat' has no sweep; write 'ann:flat'"),
        ({"systems": {"a": {"kind": "rrf", "inputs": ["exact", "b"]}, "b": {"kind": "rrf", "inputs": ["exact", "a"]}}},
         "systems form a cycle \\(a -> b -> a\\)"),
        ({"systems": {"a": {"kind": "rrf", "inputs": ["exact", "a"]}}}, "cannot take itself as input"),
        ({"systems": {"r": {"kind": "bi-encoder", "first_stage": "exact", "by": "nope"}}},
         "systems.r.by: 'nope' is not a card of models.yaml; allowed: minilm-l6, use-m3"),
        ({"systems": {"w": {"kind": "weighted", "inputs": ["exact", "b"], "weights": [0.7, 0.7]}, "b": {"kind": "bm25"}}},
         "weights must be non-negative and sum to 1"),
        ({"systems": {"w": {"kind": "weighted", "inputs": ["exact", "b", "c"], "sweep": [0.5]},
                      "b": {"kind": "bm25"}, "c": {"kind": "bm25"}}}, "it needs exactly two inputs"),
        ({"systems": {"w": {"kind": "weighted", "inputs": ["exact", "b"], "tune_metric": "nope@3"},
                      "b": {"kind": "bm25"}}}, "cannot parse measure 'nope@3'"),
        ({"systems": {"b": {"kind": "bm25", "tokenizer": {"stemmer": "klingon"}}}},
         "stemmer 'klingon' is not a PyStemmer algorithm"),
        ({"systems": {"b": {"kind": "bm25", "tokenizer": {"stopwords": "klingon"}}}},
         "stopwords 'klingon' is not a bm25s stopword list"),
        ({"systems": {"b": {"kind": "bm25", "b": 2}}}, "systems.b.b: Input should be less than or equal to 1"),
        ({"systems": {"exact": {"kind": "bm25"}}}, "names must be"),
        ({"systems": {"b": {"kind": "bm26"}}}, "systems.b.kind: 'bm26' is not a kind; allowed: bm25, rrf, weighted"),
        ({"settings": {"dev_datasets": {"chatterbot-en": "nope"}}, "systems": {"b": {"kind": "bm25"}}},
         "settings.dev_datasets.chatterbot-en: nope: 'nope' is not a dataset of datasets.yaml"),
        ({"settings": {"dev_datasets": {"chatterbot-en": "chatterbot-en"}}, "systems": {"b": {"kind": "bm25"}}},
         "cannot be its own dev split"),
        ({"systems": {"c": {"kind": "cross-encoder", "first_stage": "exact", "source": {"package": "no_such_pkg"}}}},
         "systems.c.source: package 'no_such_pkg' is not installed"),
        ({"systems": {"c": {"kind": "cross-encoder", "first_stage": "exact", "source": {"path": "missing-model"}}}},
         "missing-model does not exist; point it at a CrossEncoder folder"),
        ({"systems": {}}, "needs a non-empty mapping under 'systems:'"),
        ({"system": {}}, "keys 'settings' and 'systems'"),
    ],
)
def test_invalid_systems_name_the_file_key_and_what_is_allowed(tmp_path: Path, systems: dict, message: str):
    folder = copy_configs(tmp_path / "c", systems)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(folder)
    assert str(folder / "systems.yaml") in str(caught.value)


def test_ann_references_need_ann_yaml(tmp_path: Path):
    folder = copy_configs(tmp_path / "c", {"systems": {"f": {"kind": "rrf", "inputs": ["exact", "ann:flat"]}}},
                          drop=("ann",))
    with pytest.raises(ConfigError, match="needs the L4 index specs of ann.yaml, which this folder lacks"):
        load_config(folder)


def test_a_cross_encoder_path_resolves_against_the_config_folder(tmp_path: Path):
    (tmp_path / "model").mkdir()
    (tmp_path / "systems.yaml").write_text(
        "systems:\n  ce: {kind: cross-encoder, first_stage: exact, top_n: 20, source: {path: model}, batch_size: 8}\n"
    )
    config = load_systems_config(tmp_path / "systems.yaml", {}, {})
    assert config.cross_encoders["ce"].location == str(tmp_path / "model")
    assert config.candidate_depth("ce") == 20
    (tmp_path / "systems.yaml").write_text(
        "systems:\n  ce: {kind: cross-encoder, first_stage: exact, top_n: 20, source: {path: model}, batch_size: 64}\n"
    )
    assert load_systems_config(tmp_path / "systems.yaml", {}, {}).hashes == config.hashes


def test_shared_settings_move_the_hashes_of_the_systems_they_change(tmp_path: Path):
    before = load_config(copy_configs(tmp_path / "a", default_systems())).systems.hashes
    changed = default_systems()
    changed["settings"]["latency_queries"] = 50
    assert load_config(copy_configs(tmp_path / "b", changed)).systems.hashes == before
    changed = default_systems()
    changed["settings"]["depth"] = 200
    after = load_config(copy_configs(tmp_path / "c", changed)).systems.hashes
    assert {name for name in before if before[name] != after[name]} == {"bm25", "rrf", "weighted-minmax",
                                                                         "weighted-zscore"}
    folder = copy_configs(tmp_path / "d", None)
    (folder / "datasets.yaml").write_text(yaml.safe_dump({"datasets": {
        "chatterbot-en": {"loader": "chatterbot"}, "chatterbot-dev": {"loader": "chatterbot", "categories": ["ai"]}}}))
    changed = default_systems()
    changed["settings"]["dev_datasets"] = {"chatterbot-en": "chatterbot-dev"}
    (folder / "systems.yaml").write_text(yaml.safe_dump(changed))
    after = load_config(folder).systems.hashes
    assert {name for name in before if before[name] != after[name]} == {"weighted-minmax", "weighted-zscore"}


def test_model_independence_follows_the_chain(tmp_path: Path):
    (tmp_path / "model").mkdir()
    (tmp_path / "systems.yaml").write_text(
        "systems:\n  lexical: {kind: bm25}\n"
        "  lexical-ce: {kind: cross-encoder, first_stage: lexical, source: {path: model}}\n"
        "  hybrid: {kind: rrf, inputs: [lexical-ce, exact]}\n"
        "  hybrid-ce: {kind: cross-encoder, first_stage: hybrid, top_n: 30, source: {path: model}}\n"
    )
    config = load_systems_config(tmp_path / "systems.yaml", {}, {})
    assert [config.model_independent(n) for n in config.systems] == [True, True, False, False]
    assert config.upstream_systems("hybrid-ce") == ["lexical", "lexical-ce", "hybrid"]
    assert config.model_label("lexical-ce", "m@1") == MODEL_INDEPENDENT
    assert config.model_label("hybrid-ce", "m@1") == "m@1"


def test_the_stopword_lists_checked_without_bm25s_are_the_ones_bm25s_has():
    import bm25s.stopwords
    from bm25s.tokenization import Tokenizer

    from embedpyramid.config.system_kinds import BM25S_STOPWORD_LISTS

    for name in BM25S_STOPWORD_LISTS:
        assert Tokenizer(stopwords=name).stopwords, name
    languages = {name.removeprefix("STOPWORDS_").lower() for name in dir(bm25s.stopwords) if name.startswith("STOPWORDS_")}
    assert languages <= BM25S_STOPWORD_LISTS
    with pytest.raises(ValueError):
        Tokenizer(stopwords="klingon")
