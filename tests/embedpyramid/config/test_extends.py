"""``extends:``: a config file laid over another one, and the full settings folder built so."""

import os
from pathlib import Path

import pytest

from embedpyramid.config import ConfigError, load_config
from embedpyramid.config.base import read_yaml, yaml_sources

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_mappings_merge_key_by_key_and_lists_and_values_replace(tmp_path):
    write(tmp_path / "base.yaml", "a: {x: 1, y: [1, 2], z: {deep: 1, keep: 2}}\nb: 3\n")
    top = write(tmp_path / "sub" / "top.yaml", "extends: ../base.yaml\na: {y: [9], z: {deep: 5}}\nc: 4\n")
    assert read_yaml(top) == {"a": {"x": 1, "y": [9], "z": {"deep": 5, "keep": 2}}, "b": 3, "c": 4}
    assert yaml_sources(top) == [top, (tmp_path / "base.yaml").resolve()]


def test_chains_resolve_nearest_last_and_a_cycle_or_missing_file_is_named(tmp_path):
    write(tmp_path / "a.yaml", "v: 1\nw: 1\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\nv: 2\n")
    c = write(tmp_path / "c.yaml", "extends: b.yaml\nw: 3\n")
    assert read_yaml(c) == {"v": 2, "w": 3}
    loop = write(tmp_path / "loop.yaml", "extends: loop2.yaml\n")
    write(tmp_path / "loop2.yaml", "extends: loop.yaml\n")
    with pytest.raises(ConfigError, match=r"loop2.yaml: extends 'loop.yaml' makes a cycle: .*loop.yaml -> .*loop2.yaml -> .*loop.yaml"):
        read_yaml(loop)
    gone = write(tmp_path / "gone.yaml", "extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"gone.yaml: extends 'nowhere.yaml': no such file"):
        read_yaml(gone)
    bad = write(tmp_path / "bad.yaml", "extends: [a.yaml]\n")
    with pytest.raises(ConfigError, match="bad.yaml: extends must be the path of another YAML file"):
        read_yaml(bad)


def test_an_error_in_an_extended_file_names_that_file(tmp_path):
    write(tmp_path / "base.yaml", "a: 1\na: 2\n")
    top = write(tmp_path / "top.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError, match=r"base.yaml: .*'a'"):
        read_yaml(top)


def test_the_full_folder_is_the_default_with_its_full_settings():
    quick, full = load_config(CONFIGS), load_config(CONFIGS / "full")
    assert [model.key for model in full.models.values()] == [model.key for model in quick.models.values()]
    assert (quick.protocol.comparison.n_resamples, full.protocol.comparison.n_resamples) == (2_000, 10_000)
    assert (quick.protocol.comparison.n_permutations, full.protocol.comparison.n_permutations) == (20_000, 100_000)
    assert (quick.ann.settings.seeds, full.ann.settings.seeds) == (2, 3)
    assert list(full.task_datasets) == [*quick.task_datasets, "newsgroups", "newsgroups-clusters"]
    assert full.task_datasets["django-bitext"].languages == ["de", "fr", "es", "ja", "ko"]
    categories = full.task_datasets["chatterbot-categories"].classification
    assert categories.seeds == [0, 1, 2] and categories.k == quick.task_datasets["chatterbot-categories"].classification.k
    assert full.task_datasets["chatterbot-clusters"].clustering.seeds == [0, 1, 2, 3, 4]
    # Everything else is the default's: the same systems, judge, index specs and retrieval data.
    assert full.systems.hashes == quick.systems.hashes and full.ann.specs == quick.ann.specs
    assert full.downstream == quick.downstream and full.datasets == quick.datasets
    # Every file of the full folder extends its namesake, so editing the default edits both.
    for path in sorted((CONFIGS / "full").glob("*.yaml")):
        assert yaml_sources(path)[1:] == [(CONFIGS / path.name).resolve()], path


def test_editing_an_extended_file_rebuilds_the_asset_graph_of_the_folder_that_extends_it(tmp_path):
    from pipelines.graph import location_asset_graph

    base = write(tmp_path / "base" / "ann.yaml", (CONFIGS / "ann.yaml").read_text())
    for name in ("models", "datasets", "protocol"):
        write(tmp_path / "base" / f"{name}.yaml", (CONFIGS / f"{name}.yaml").read_text())
    folder = tmp_path / "top"
    for name in ("models", "datasets", "protocol", "ann"):
        write(folder / f"{name}.yaml", f"extends: ../base/{name}.yaml\n")
    before = location_asset_graph(str(folder), str(tmp_path / "data"))
    assert location_asset_graph(str(folder), str(tmp_path / "data")) is before
    base.write_text(base.read_text().replace("  sq8:\n    factory: SQ8\n", ""))
    os.utime(base, ns=(base.stat().st_atime_ns, base.stat().st_mtime_ns + 1_000_000_000))
    after = location_asset_graph(str(folder), str(tmp_path / "data"))
    keys = {key.to_user_string() for key in before.get_all_asset_keys()}
    assert "ann_sq8" in keys and "ann_sq8" not in {key.to_user_string() for key in after.get_all_asset_keys()}
