import xml.etree.ElementTree as ElementTree

import numpy as np
import polars as pl
import pytest

from embedpyramid.downstream.plots import bar_chart_svg, box_plot_svg, heatmap_svg

NS = {"svg": "http://www.w3.org/2000/svg"}
DESCRIPTIVE = pl.DataFrame({
    "model": ["a", "a", "a", "b", "b", "b"], "criterion": ["rel", "cov", "all"] * 2,
    "n": [3] * 6, "mean": [1.0, 3.0, 2.0, 5.0, 4.0, 4.5], "sd": [0.0, 1.0, 0.5, 0.0, 0.0, 0.0],
    "median": [1.0, 3.0, 2.0, 5.0, 4.0, 4.5], "ci_low": [1.0, 0.5, 0.8, 5.0, 4.0, 4.5],
    "ci_high": [1.0, 5.5, 3.2, 5.0, 4.0, 4.5], "confidence": [0.95] * 6,
})


def parse(svg):
    root = ElementTree.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root, [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]


def test_box_plot_draws_quartiles_whiskers_and_outliers():
    values = np.array([1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0])
    root, titles = parse(box_plot_svg({"a": values, "b": np.array([3.0, 3.0])}, title="Grades"))
    # quartiles 2 and 3 (IQR 1): the whiskers reach 1..4 (within 1.5), 5 is an outlier.
    assert any("quartiles 2.000-3.000, whiskers 1.000-4.000" in t for t in titles)
    assert "5.000: 1 query" in titles
    assert len(root.findall(".//svg:rect[@fill-opacity]", NS)) == 2
    with pytest.raises(ValueError, match="at least one grade"):
        box_plot_svg({"a": np.array([])})


def test_bar_chart_shows_means_intervals_and_letters():
    root, titles = parse(bar_chart_svg(DESCRIPTIVE, {"a": "b", "b": "a"}))
    assert "a: mean 2.000 [0.800, 3.200], sd 0.500, n=3, group b" in titles
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "4.50 a" in texts and "mean grade, 95% CI" in texts


def test_heatmap_colours_cells_from_white_to_green():
    root, titles = parse(heatmap_svg(DESCRIPTIVE))
    fills = {rect.get("fill") for rect in root.findall(".//svg:g/svg:rect", NS)}
    assert fills == {"rgb(255,255,255)", "rgb(128,180,155)", "rgb(0,104,55)", "rgb(64,142,105)"}
    assert "b · rel: mean 5.000, sd 0.000, n=3" in titles and len(root.findall(".//svg:g", NS)) == 4
