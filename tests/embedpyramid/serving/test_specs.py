from pathlib import Path

import pytest
import yaml

from embedpyramid.config import ConfigError
from embedpyramid.serving import check_metric, index_file_name, load_ann_config, nlist_for, resolve_factory

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
    assert config.settings.recall_targets == (0.9, 0.95, 0.99)
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
        ({"x": {"factory": "Flat", "metric": "cosine"}}, None, r"indexes\.x\.metric.*'inner_product' or 'l2'"),
        ({"x": {"kind": "faiss"}}, None, r"indexes\.x.*needs a factory"),
        ({"x": {"kind": "int8", "factory": "Flat"}}, None, r"indexes\.x.*takes no factory"),
        ({"x": {"factory": "HNSW{n}"}}, None, r"indexes\.x.*only allowed as the IVF list count"),
        ({"x": {"factory": "IVF{n},PQ{n}"}}, None, r"indexes\.x.*only allowed as the IVF list count"),
        ({"b": {"kind": "binary"}}, None, r"indexes\.b.*needs sweep: \{rescore"),
        ({"b": {"kind": "binary", "sweep": {"rescore": [5, 50]}}}, None, r"indexes\.b\.sweep: rescore values must be at least settings\.k=10"),
        ({"x": {"factory": "Flat", "metric": "l2", "dimension": 64}}, None, r"indexes\.x.*use metric 'inner_product'"),
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


def test_l2_spec_on_a_normalized_card_is_refused_naming_the_spec(make_spec):
    with pytest.raises(ConfigError, match=r"spec 'hnsw-l2' \(faiss HNSW32\) has metric 'l2'.*normalizes its vectors"):
        check_metric(make_spec("hnsw-l2", factory="HNSW32", metric="l2"), normalized=True)
    with pytest.raises(ConfigError, match=r"spec 'ip'.*does not normalize.*metric: l2"):
        check_metric(make_spec("ip", factory="Flat"), normalized=False)
    check_metric(make_spec("ip", factory="Flat"), normalized=True)
    check_metric(make_spec("l2", factory="Flat", metric="l2"), normalized=False)


def test_nlist_rule_and_resolved_factory(make_spec):
    assert nlist_for(100_000) == round(4 * 100_000**0.5) == 1265
    assert nlist_for(2000) == 2000 // 39 == 51
    assert nlist_for(10) == 1
    assert resolve_factory(make_spec(factory="IVF{n},PQ8"), 100_000) == "IVF1265,PQ8"
    assert resolve_factory(make_spec(kind="int8"), 10) == "Int8Flat"


def test_index_file_name_is_content_addressed(make_spec):
    spec = make_spec("hnsw", factory="HNSW32", sweep={"efSearch": [16, 32]})
    name = index_file_name(spec, "sha-a", 42)
    assert name.startswith("hnsw-") and name == index_file_name(spec, "sha-a", 42)
    assert name == index_file_name(make_spec("hnsw", factory="HNSW32"), "sha-a", 42)  # sweeps are search-time
    assert len({name, index_file_name(spec, "sha-b", 42), index_file_name(spec, "sha-a", 43),
                index_file_name(make_spec("hnsw", factory="HNSW16"), "sha-a", 42)}) == 4
