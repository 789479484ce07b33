import polars as pl
import pytest

from embedpyramid.tasks.common import STATISTIC_COMPARISON_SCHEMA
from embedpyramid.tasks.summary import statistic_verdicts, task_report_sections


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
