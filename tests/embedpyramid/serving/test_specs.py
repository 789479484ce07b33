from pathlib import Path

import pytest
import yaml

from embedpyramid.config import ConfigError, load_ann_config
from embedpyramid.serving import (
    build_seeds,
    index_file_name,
    nlist_for,
    resolve_factory,
    resolve_metric,
)

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "ann.yaml"


def write_config(tmp_path: Path, indexes: dict, settings: dict | None = None) -> Path:
    path = tmp_path / "ann.yaml"
    path.write_text(yaml.safe_dump({"settings": settings or {}, "indexes": indexes}))
    return path


def test_shipped_config_loads_with_every_required_kind():
    config = load_ann_config(SHIPPED)
    factories = {spec.factory for spec in config.specs}
    assert {"Flat", "HNSW32", "IVF{n},Flat", "SQ8"} <= factories
    assert any(f and f.startswith("IVF{n},PQ") for f in factories)
    assert {spec.kind for spec in config.specs} == {"faiss", "binary", "int8"}
    assert {spec.dimension for spec in config.specs} >= {256, 128, 64}
    assert config.spec("hnsw32").sweep.param == "efSearch"
    assert config.spec("ivf-flat").sweep.param == "nprobe"
    assert all(spec.seed == config.settings.seed for spec in config.specs)
    assert all(spec.metric is None for spec in config.specs)  # every spec takes the card's metric
    assert config.settings.recall_targets == (0.9, 0.95, 0.99) and config.settings.seeds == 2
    assert [str(m) for m in config.settings.measure_objects()][0] == "nDCG@10"


def test_spec_seed_overrides_the_default(tmp_path):
    config = load_ann_config(write_config(tmp_path, {"a": {"factory": "Flat"}, "b": {"factory": "Flat", "seed": 7}},
                                          {"seed": 3}))
    assert [spec.seed for spec in config.specs] == [3, 7]


@pytest.mark.parametrize(
    ("indexes", "settings", "message"),
    [
        ({"flat": {"factory": "Flat", "sweep": {"efSearch": [16]}}}, None,
         r"indexes\.flat.*'efSearch' does not apply.*allowed: none"),
        ({"hnsw": {"factory": "HNSW32", "sweep": {"nprobe": [1]}}}, None, r"indexes\.hnsw.*allowed: efSearch"),
        ({"hnsw": {"factory": "HNSW32", "sweep": {"efSearch": [64, 16]}}}, None, r"indexes\.hnsw\.sweep.*increasing"),
        ({"hnsw": {"factory": "HNSW32", "sweep": {"ef": [16]}}}, None,
         r"indexes\.hnsw\.sweep\.param.*'efSearch', 'nprobe' or 'rescore'"),
        ({"x": {"kind": "graph"}}, None, r"indexes\.x\.kind.*'faiss', 'binary' or 'int8'"),
        ({"x": {"factory": "Flat", "metric": "dot"}}, None, r"indexes\.x\.metric.*'inner_product', 'cosine' or 'l2'"),
        ({"x": {"kind": "faiss"}}, None, r"indexes\.x.*needs a factory"),
        ({"x": {"kind": "int8", "factory": "Flat"}}, None, r"indexes\.x.*takes no factory"),
        ({"x": {"factory": "HNSW{n}"}}, None, r"indexes\.x.*only allowed as the IVF list count"),
        ({"x": {"factory": "IVF{n},PQ{n}"}}, None, r"indexes\.x.*only allowed as the IVF list count"),
        ({"b": {"kind": "binary"}}, None, r"indexes\.b.*needs sweep: \{rescore"),
        ({"b": {"kind": "binary", "sweep": {"rescore": [5, 50]}}}, None, r"indexes\.b\.sweep: rescore values must be at least settings\.k=10"),
        ({"x": {"factory": "HNSW32", "seeds": 0}}, None, r"indexes\.x\.seeds"),
        ({"x": {"factory": "Flat", "dimension": 0}}, None, r"indexes\.x\.dimension"),
        ({"x": {"factory": "Flat", "nlist": 4}}, None, r"indexes\.x\.nlist: unknown key; allowed here: .*factory"),
        ({"Bad Name": {"factory": "Flat"}}, None, r"indexes\.Bad Name: names must be"),
        ({"x": {"factory": "Flat"}}, {"measures": ["nDCG@100"]}, r"settings.*'nDCG@100' reads past.*k=10"),
        ({"x": {"factory": "Flat"}}, {"delta_metric": "nDCG@5"}, r"settings.*delta_metric 'nDCG@5'.*allowed: nDCG@10"),
        ({"x": {"factory": "Flat"}}, {"batch_size": 0}, r"settings\.batch_size"),
        ({"x": {"factory": "Flat"}}, {"recall_targets": [0.9, 1.5]}, r"settings.*recall_targets"),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path, indexes, settings, message):
    path = write_config(tmp_path, indexes, settings)
    with pytest.raises(ConfigError, match=message) as raised:
        load_ann_config(path)
    assert str(path) in str(raised.value)


def test_missing_file_and_empty_indexes(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_ann_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="non-empty mapping under 'indexes:'"):
        load_ann_config(write_config(tmp_path, {}))


def test_a_spec_takes_the_cards_metric_and_an_override_warns_naming_both(make_spec):
    spec = make_spec("hnsw", factory="HNSW32")
    for card_metric in ("inner_product", "cosine", "l2"):
        resolved, warning = resolve_metric(spec, card_metric, unit_vectors=False)
        assert resolved.metric == card_metric and warning is None
    resolved, warning = resolve_metric(make_spec("hnsw-l2", factory="HNSW32", metric="l2"), "inner_product",
                                       unit_vectors=True)
    assert resolved.metric == "l2"
    assert warning.startswith("spec 'hnsw-l2' (faiss HNSW32) overrides the card's similarity 'inner_product' with 'l2'")
    # Over unit vectors cosine and inner product rank alike: nothing to warn about.
    assert resolve_metric(make_spec("c", factory="Flat", metric="cosine"), "inner_product", unit_vectors=True)[1] is None
    assert resolve_metric(make_spec("c", factory="Flat", metric="cosine"), "inner_product", unit_vectors=False)[1]


def test_stochastic_specs_are_built_with_several_seeds(make_spec):
    settings = load_ann_config(SHIPPED).settings
    assert settings.seeds == 2
    assert build_seeds(make_spec(factory="HNSW32", seed=5), settings) == (5, 6)
    assert build_seeds(make_spec(factory="IVF{n},PQ32", seed=5, seeds=3), settings) == (5, 6, 7)
    for deterministic in ({"factory": "Flat"}, {"factory": "SQ8"}, {"kind": "int8"},
                          {"kind": "binary", "sweep": {"rescore": [10]}}):
        assert build_seeds(make_spec(**deterministic, seed=5), settings) == (5,)


def test_nlist_rule_and_resolved_factory(make_spec):
    assert nlist_for(100_000) == round(4 * 100_000**0.5) == 1265
    assert nlist_for(2000) == 2000 // 39 == 51
    assert nlist_for(10) == 1
    assert resolve_factory(make_spec(factory="IVF{n},PQ8"), 100_000) == "IVF1265,PQ8"
    assert resolve_factory(make_spec(kind="int8"), 10) == "Int8Flat"


def test_index_file_name_is_content_addressed(make_spec):
    spec = make_spec("hnsw", factory="HNSW32", sweep={"efSearch": [16, 32]}, metric="inner_product")
    name = index_file_name(spec, "sha-a", 42)
    assert name.startswith("hnsw-") and name == index_file_name(spec, "sha-a", 42)
    assert name == index_file_name(make_spec("hnsw", factory="HNSW32", metric="inner_product"), "sha-a", 42)
    assert len({name, index_file_name(spec, "sha-b", 42), index_file_name(spec, "sha-a", 43),
                index_file_name(make_spec("hnsw", factory="HNSW16", metric="inner_product"), "sha-a", 42),
                index_file_name(make_spec("hnsw", factory="HNSW32", metric="l2"), "sha-a", 42)}) == 5
    with pytest.raises(ValueError, match="resolve its metric against the card first"):
        index_file_name(make_spec("hnsw", factory="HNSW32"), "sha-a", 42)


def test_a_cut_at_or_above_the_vectors_dimension_does_not_apply(make_spec):
    cut = make_spec("cut", factory="Flat", dimension=256)
    assert cut.cut_beyond(384) is None and make_spec("flat", factory="Flat").cut_beyond(128) is None
    assert cut.cut_beyond(128) == ("spec 'cut' (faiss Flat) cuts to 256 dimensions, but the card's vectors have 128: "
                                   "skipped (a cut must keep fewer dimensions than the vectors have)")
    assert cut.cut_beyond(256) is not None  # the same index as the uncut spec
