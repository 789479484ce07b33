import json
from types import SimpleNamespace

import polars as pl
import pytest

from embedpyramid.tasks.common import STATISTIC_COMPARISON_SCHEMA
from embedpyramid.tasks.comparison import statistic_verdicts, task_report_sections


def statistic_row(metric: str, delta: float, low: float, high: float, p_value: float = 0.01,
                  model_b: str = "b@2") -> dict:
    return {"dataset": "lee", "system": "cosine", "subset": "all", "split": "test", "metric": metric,
            "model_a": "a@1", "model_b": model_b, "n": 1225, "n_units": 1225, "value_a": 0.5, "value_b": 0.5 + delta,
            "delta": delta, "ci_low": low, "ci_high": high, "boot_median": delta, "share_above_zero": 0.5,
            "p_value": p_value, "n_valid": 200, "confidence": 0.95, "n_resamples": 200, "seed": 42,
            "resampling": "item"}


def test_statistic_verdicts_read_the_primary_statistic_only_with_the_retrieval_words():
    frame = pl.DataFrame([statistic_row("spearman", -0.056, -0.097, -0.015), statistic_row("pearson", 0.2, 0.1, 0.3)],
                         schema=STATISTIC_COMPARISON_SCHEMA)
    (verdict,) = statistic_verdicts(frame, "spearman", "sts")
    assert (verdict["metric"], verdict["decision"], verdict["p_adjusted"], verdict["family_size"]) == (
        "spearman", "worse", 0.01, 1)
    assert verdict["text"].endswith("p (Holm over the sts family, 1 test) = 0.0100 — a@1 is better than b@2.")
    assert "b@2 − a@1 = -0.0560, unadjusted 95% CI [-0.0970, -0.0150]" in verdict["text"]
    spanning = pl.DataFrame([statistic_row("v_measure", 0.01, -0.02, 0.04, p_value=0.5)],
                            schema=STATISTIC_COMPARISON_SCHEMA)
    (verdict,) = statistic_verdicts(spanning, "v_measure", "clustering")
    assert verdict["decision"] == "not significant" and verdict["text"].endswith("no detectable difference.")


def test_statistic_verdicts_are_holm_adjusted_over_the_family():
    # Raw p 0.03 and 0.04 both pass 0.05 alone; Holm: 2 x 0.03 = 0.06, max(0.06, 0.04) = 0.06.
    close = pl.DataFrame([statistic_row("v_measure", 0.05, 0.01, 0.09, p_value=0.03),
                          statistic_row("v_measure", 0.04, 0.005, 0.08, p_value=0.04, model_b="c@3")],
                         schema=STATISTIC_COMPARISON_SCHEMA)
    verdicts = statistic_verdicts(close, "v_measure", "clustering")
    assert [v["p_adjusted"] for v in verdicts] == pytest.approx([0.06, 0.06])
    assert [v["decision"] for v in verdicts] == ["not significant", "not significant"]
    assert all("2 tests" in v["text"] and "no detectable difference" in v["text"] for v in verdicts)
    # Raw p 0.01 and 0.04: Holm 0.02 and max(0.02, 0.04) = 0.04, both better.
    clear = close.with_columns(p_value=pl.Series([0.01, 0.04]))
    verdicts = statistic_verdicts(clear, "v_measure", "clustering")
    assert [v["p_adjusted"] for v in verdicts] == pytest.approx([0.02, 0.04])
    assert [v["text"].rsplit("— ", 1)[1] for v in verdicts] == ["b@2 is better than a@1.", "c@3 is better than a@1."]


def test_no_task_summary_adds_no_report_section():
    assert task_report_sections(None, None) == []


@pytest.fixture(scope="module")
def small_results():
    """A pair classification result whose dev split is too small and a classification result whose
    probe C sits on its grid's edge (a two-value grid, not widened), from the real evaluators."""
    import numpy as np

    from embedpyramid.config.tasks import ClassificationSettings, PairClassificationSettings
    from embedpyramid.tasks.classification import evaluate_classification
    from embedpyramid.tasks.pair_classification import evaluate_pair_classification
    from embedpyramid.vectors import TextVectors

    rng = np.random.default_rng(0)
    ids = [f"t{i:03d}" for i in range(40)]
    vectors = TextVectors(ids, rng.normal(size=(40, 8)).astype(np.float32))
    pairs = pl.DataFrame({"pair_id": [f"p{i:02d}" for i in range(20)], "text_id_1": ids[:20], "text_id_2": ids[20:],
                          "gold": [float(i % 2) for i in range(20)], "split": ["dev"] * 8 + ["test"] * 12})
    pair = evaluate_pair_classification(pairs, vectors, PairClassificationSettings(), dataset="dups", model="a@1",
                                        similarity="cosine")
    texts = pl.DataFrame({"text_id": ids, "label": [str(i % 2) for i in range(40)]})
    labelled = evaluate_classification(texts, vectors, ClassificationSettings(seeds=[0], c_grid=[1e-4, 1e-3],
                                                                             c_widenings=0),
                                       dataset="cats", model="a@1", similarity="cosine")
    return pair, labelled


def test_warnings_and_conventions_are_read_from_the_result_settings(small_results):
    from embedpyramid.tasks.comparison import task_conventions, task_warnings

    pair, labelled = small_results
    warned = pl.concat([task_warnings("dups", "a@1", pair), task_warnings("cats", "a@1", labelled)])
    assert warned.select("dataset", "task", "setting").rows() == [("dups", "pair_classification", "dev_warning"),
                                                                 ("cats", "classification", "c_warning")]
    assert warned["warning"][0] == pair.settings["dev_warning"] and "the dev split has 8 pairs" in warned["warning"][0]
    assert warned["warning"][1].startswith("the chosen C sits on an edge")
    conventions = task_conventions("cats", "a@1", labelled)
    assert conventions["system"].to_list() == ["knn", "probe"]
    assert json.loads(conventions["conventions"][0]) == {"task": "classification", "protocol": "project",
                                                         "similarity": "cosine"}


def test_the_family_section_shows_the_warnings_its_results_carry(small_results):
    from embedpyramid.tasks.comparison import TASK_TABLE_SCHEMAS, TaskSummary, task_warnings

    pair, labelled = small_results
    tables = {name: pl.DataFrame(schema=schema) for name, schema in TASK_TABLE_SCHEMAS.items()}
    tables["task_summary"] = pl.concat([pair.summary, labelled.summary])
    tables["task_warnings"] = pl.concat([task_warnings("dups", "a@1", pair), task_warnings("cats", "a@1", labelled)])
    families = {"pair_classification": ["dups"], "classification": ["cats"]}
    config = SimpleNamespace(family_datasets=lambda family: families.get(family, []))
    sections = {s.title.split(":")[0]: s for s in task_report_sections(config, TaskSummary(tables, [], []))}
    pairs_section = sections["L2 Pair classification (duplicates)"]
    assert f"WARNING: a@1 on dups: {pair.settings['dev_warning']}." in pairs_section.intro
    caption, shown = pairs_section.tables[1]
    assert caption == "Warnings recorded with the numbers" and shown["setting"].to_list() == ["dev_warning"]
    assert "WARNING: a@1 on cats: the chosen C sits on an edge" in sections["L2 Classification on frozen embeddings"].intro
