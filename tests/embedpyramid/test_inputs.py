"""Which per-partition results a summary may use: admission, the excluded table, the verdict
notes, and the provenance table read back from recorded files."""

import json

import polars as pl

from embedpyramid.current_inputs import ExcludedInput, SummaryInputs, excluded_keys, provenance_table, system_asset_name
from embedpyramid.store import ArtifactStore, write_json

STALE = ExcludedInput("retrieval_metrics", "tiny", "a@1", "stale", "frozen_dataset [tiny] has a new data version")
MISSING = ExcludedInput("system_bm25", "tiny", None, "missing", "never materialized")


def test_only_the_named_partition_of_the_named_asset_is_refused():
    inputs = SummaryInputs((STALE, MISSING))
    assert not inputs.admits("retrieval_metrics", "tiny", "a@1")
    assert inputs.admits("retrieval_metrics", "tiny", "b@2")
    assert inputs.admits("retrieval_metrics", "other", "a@1")
    assert inputs.admits("efficiency", "tiny", "a@1")
    assert not inputs.admits(system_asset_name("bm25"), "tiny")
    assert SummaryInputs().admits("retrieval_metrics", "tiny", "a@1")


def test_the_excluded_table_and_sentences_name_asset_partition_state_and_cause():
    inputs = SummaryInputs((STALE, MISSING))
    assert inputs.frame().to_dicts() == [
        {"asset": "retrieval_metrics", "dataset": "tiny", "model": "a@1", "state": "stale",
         "reason": "frozen_dataset [tiny] has a new data version"},
        {"asset": "system_bm25", "dataset": "tiny", "model": None, "state": "missing", "reason": "never materialized"}]
    assert SummaryInputs().frame().schema == pl.Schema(
        {"asset": pl.String, "dataset": pl.String, "model": pl.String, "state": pl.String, "reason": pl.String})
    assert inputs.sentences("tiny", ("retrieval_metrics",)) == [
        "a@1 × tiny (retrieval_metrics) excluded: stale (frozen_dataset [tiny] has a new data version)"]
    assert inputs.sentences("tiny", ("system_bm25",)) == ["tiny (system_bm25) excluded: missing (never materialized)"]


def test_a_verdict_names_what_it_left_out_and_a_dataset_without_one_says_why():
    verdicts = [{"dataset": "other", "text": "other: b wins."}]
    annotated = SummaryInputs((STALE,)).annotate(verdicts, ["tiny", "other"], ("retrieval_metrics",))
    assert annotated == [
        {"dataset": "tiny", "excluded": [STALE.text],
         "text": f"tiny: no verdict: comparing would mix versions. Not compared (not current): {STALE.text}."},
        {"dataset": "other", "excluded": [], "text": "other: b wins."}]
    # An excluded input the verdicts do not compare (L1 here) leaves them alone.
    assert SummaryInputs((STALE,)).annotate(verdicts, ["tiny", "other"], ("norm_geometry",)) == [
        {"dataset": "other", "excluded": [], "text": "other: b wins."}]


def test_the_provenance_table_keeps_current_cards_and_admitted_partitions(tmp_path):
    store = ArtifactStore(tmp_path)
    for asset, model in [("retrieval_metrics", "a@1"), ("retrieval_metrics", "b@2"), ("retrieval_metrics", "old@0"),
                         ("system_bm25", None)]:
        write_json({"asset": asset, "dataset": "tiny", "card_key": model, "partition": f"tiny|{model}",
                    "dataset_version": "d1", "code_version": "c1", "facets": {"config/measures": "m1"}},
                   store.provenance_path(asset, "tiny", model or "tiny"))
    table = provenance_table(store, ["a@1", "b@2"], SummaryInputs((STALE,)))
    assert table.select("asset", "model").rows() == [("retrieval_metrics", "b@2"), ("system_bm25", None)]
    assert json.loads(table["facets"][0]) == {"config/measures": "m1"}
    assert table["dataset_version"].to_list() == ["d1", "d1"]


def test_excluded_keys_ignore_state_and_cause():
    failed = ExcludedInput("retrieval_metrics", "tiny", "a@1", "failed", "its last run failed")
    assert excluded_keys(SummaryInputs((MISSING, STALE))) == ["retrieval_metrics tiny a@1", "system_bm25 tiny"]
    assert excluded_keys(SummaryInputs((STALE,))) == excluded_keys(SummaryInputs((failed,)))
