"""Progress and status lines stay short: counts, the first few names and "+N more"; the full
lists with --verbose and in status --format json."""

import json

import dagster as dg
from graph_helpers import quick_protocol, toy

from embedpyramid.cli import main
from graphbase.freshness import AssetState
from pipelines.runner import _describe, run_pipeline
from pipelines.status import level_status

ASSETS = [f"asset_{i:02d}" for i in range(28)]


def test_a_wave_names_its_first_assets_and_counts_the_rest():
    states = [AssetState(asset, "p", "missing") for asset in ASSETS]
    states.append(AssetState("retrieval_metrics", "p", "stale", ("config/measures has a new data version",)))
    assert _describe(states) == ("never materialized: 28 assets: asset_00, asset_01, asset_02 +25 more; "
                                 "stale (config/measures has a new data version): retrieval_metrics")
    assert _describe(states, verbose=True).startswith("never materialized: " + ", ".join(ASSETS) + "; stale")
    causes = tuple(f"config/facet_{i} has a new data version" for i in range(5))
    assert _describe([AssetState("exact_topk", "p", "stale", causes)]) == (
        "stale (5 causes: config/facet_0 has a new data version, config/facet_1 has a new data version, "
        "config/facet_2 has a new data version +2 more): exact_topk")


def test_a_status_row_is_brief_in_the_table_and_whole_in_json():
    causes = tuple(f"input retrieval_metrics [d{i}|m] is stale" for i in range(6))
    row = level_status(None, None, "summary", [AssetState("comparisons", None, "stale", causes),
                                               AssetState("comparison_report", None, "stale", causes[:1])])
    assert row.brief == ("6 causes: input retrieval_metrics [d0|m] is stale (comparison_report, comparisons); "
                         "input retrieval_metrics [d1|m] is stale (comparisons); "
                         "input retrieval_metrics [d2|m] is stale (comparisons) +3 more")
    assert row.why.count("input retrieval_metrics") == 6 and row.reasons["input retrieval_metrics [d5|m] is stale"] == [
        "comparisons"]
    many = level_status("d", "m", "l2_retrieval", [AssetState(asset, "p", "missing") for asset in ASSETS])
    assert many.brief == "never materialized (asset_00, asset_01, asset_02 +25 more)"


def test_the_config_changed_line_counts_the_settings(write_configs, tiny, tmp_path, capsys):
    folder = write_configs(models={"ngrams": toy()}, datasets=tiny, protocol=quick_protocol())
    instance, data = dg.DagsterInstance.ephemeral(), tmp_path / "data"
    lines: list[str] = []
    assert run_pipeline(folder, data, instance=instance, log=lines.append).failures == []
    changed = next(line for line in lines if line.startswith("config changed: "))
    count = int(changed.removeprefix("config changed: ").split()[0])
    assert count > 3 and changed.endswith(f" +{count - 3} more") and len(changed) < 200
    verbose: list[str] = []
    edited = write_configs("edited", models={"ngrams": toy(), "ngrams-24": toy(24)}, datasets=tiny,
                           protocol=quick_protocol())
    run_pipeline(edited, data, instance=instance, log=verbose.append, verbose=True)
    assert "more" not in next(line for line in verbose if line.startswith("config changed: "))
    assert main(["status", "--configs", str(edited), "--data", str(data), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(row) == {"dataset", "model", "level", "state", "why", "reasons"} for row in rows)
