import json

import polars as pl
import pytest
from simulated_grades import simulated_grades

from embedpyramid.config import AnalysisConfig
from embedpyramid.downstream import analyse_grades, write_grade_analysis
from embedpyramid.store import read_table_metadata

SETTINGS = AnalysisConfig(power={"n_simulations": 200, "difference": 0.5}, seed=7)


def test_a_known_effect_is_described_modelled_tested_grouped_and_powered(tmp_path):
    per_query = simulated_grades(1, (0.0, 0.8, 0.0), n_queries=50, query_sd=0.5)
    extra = per_query.filter(pl.col("model") == "m0").with_columns(metric=pl.lit("nDCG@10"))  # ignored
    # One malformed judgement: the query is left out of the model for every model, and counted.
    holed = pl.concat([per_query, extra]).filter(
        ~((pl.col("model") == "m2") & (pl.col("query_id") == "q0003") & (pl.col("metric") == "judge:ranking")))
    analysis = analyse_grades(holed, SETTINGS, dataset="toy", system="exact", models=["m2", "m0", "m1"])
    assert analysis.manifest["models"] == ["m2", "m0", "m1"] and analysis.manifest["modelled_queries"] == 49
    assert analysis.manifest["incomplete_queries"] == 1
    assert analysis.descriptive.height == 3 * 4 and set(analysis.descriptive["n"]) == {49}
    assert analysis.fits["selected"].sum() == 1 and analysis.fits.filter(pl.col("selected"))["comparable"].item()
    assert analysis.omnibus["test"].to_list() == ["likelihood ratio", "wald", "likelihood ratio"]
    assert (analysis.omnibus["p_value"] < 1e-6).all()
    assert dict(zip(analysis.letters["model"], analysis.letters["letters"], strict=True)) == {
        "m1": "a", "m2": "b", "m0": "b"}
    assert set(analysis.power["criterion"]) == {"relevance", "ranking", "coverage", "mean"}
    assert (analysis.power["seed"] == 7).all() and analysis.power_curve.height > 4
    assert set(analysis.plots) == {"grades_box", "grades_bar", "grades_heatmap"}

    paths = write_grade_analysis(analysis, tmp_path / "analysis")
    assert {p.name for p in paths.values()} >= {"fits.parquet", "omnibus.parquet", "grades_box.svg", "manifest.json"}
    assert read_table_metadata(paths["pairwise"])["settings"]["seed"] == 7
    assert json.loads(paths["manifest"].read_text())["selection"].startswith("gaussian-")


def test_one_model_gets_the_description_and_a_reason_for_no_model():
    analysis = analyse_grades(simulated_grades(2, (0.3,)), SETTINGS, dataset="toy", system="exact")
    assert analysis.descriptive.height == 4 and analysis.fits.is_empty() and analysis.pairwise.is_empty()
    assert analysis.manifest["selection"].startswith("one model only")
    assert set(analysis.plots) == {"grades_box", "grades_bar", "grades_heatmap"}


def test_no_grades_is_a_clear_error():
    with pytest.raises(ValueError, match="no judge grades .* dataset 'other'"):
        analyse_grades(simulated_grades(2, (0.3,)), SETTINGS, dataset="other", system="exact")
    with pytest.raises(ValueError, match="not in the model order"):
        analyse_grades(simulated_grades(2, (0.3, 0.1)), SETTINGS, dataset="toy", system="exact", models=["m0"])
