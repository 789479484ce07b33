import polars as pl

from embedpyramid.tasks.common import STATISTIC_COMPARISON_SCHEMA
from embedpyramid.tasks.summary import statistic_verdicts, task_report_sections


def statistic_row(metric: str, delta: float, low: float, high: float) -> dict:
    return {"dataset": "lee", "system": "cosine", "subset": "all", "split": "test", "metric": metric,
            "model_a": "a@1", "model_b": "b@2", "n": 1225, "n_units": 1225, "value_a": 0.5, "value_b": 0.5 + delta,
            "delta": delta, "ci_low": low, "ci_high": high, "boot_median": delta, "share_above_zero": 0.5,
            "n_valid": 200, "confidence": 0.95, "n_resamples": 200, "seed": 42, "resampling": "item"}


def test_statistic_verdicts_read_the_interval_of_the_primary_statistic_only():
    frame = pl.DataFrame([statistic_row("spearman", -0.056, -0.097, -0.015), statistic_row("pearson", 0.2, 0.1, 0.3)],
                         schema=STATISTIC_COMPARISON_SCHEMA)
    (verdict,) = statistic_verdicts(frame, "spearman", "sts")
    assert verdict["metric"] == "spearman" and verdict["text"].endswith("— a@1 is better.")
    assert "b@2 − a@1 = -0.0560 [-0.0970, -0.0150]" in verdict["text"] and "unadjusted" in verdict["text"]
    spanning = pl.DataFrame([statistic_row("v_measure", 0.01, -0.02, 0.04)], schema=STATISTIC_COMPARISON_SCHEMA)
    assert statistic_verdicts(spanning, "v_measure", "clustering")[0]["text"].endswith("no detectable difference.")
    above = pl.DataFrame([statistic_row("v_measure", 0.05, 0.01, 0.09)], schema=STATISTIC_COMPARISON_SCHEMA)
    assert statistic_verdicts(above, "v_measure", "clustering")[0]["text"].endswith("b@2 is better.")


def test_no_task_summary_adds_no_report_section():
    assert task_report_sections(None, None) == []
