import polars as pl
import pytest

from embedpyramid.serving import frontier, frontier_svg, qps_at_recall

POINTS = pl.DataFrame(
    {
        "spec": ["flat", "hnsw", "hnsw", "hnsw", "ivf", "ivf", "sq8"],
        "sweep_param": [None, "efSearch", "efSearch", "efSearch", "nprobe", "nprobe", None],
        "sweep_value": [None, 16, 64, 256, 1, 8, None],
        "ann_recall": [1.0, 0.80, 0.95, 0.99, 0.60, 0.93, 0.95],
        "qps": [100.0, 5000.0, 2000.0, 800.0, 9000.0, 1500.0, 300.0],
    }
)


def test_frontier_keeps_the_undominated_points_by_recall():
    front = frontier(POINTS)
    # ivf nprobe=8 (0.93, 1500) is dominated by hnsw ef=64 (0.95, 2000), sq8 (0.95, 300) too.
    assert list(zip(front["spec"], front["sweep_value"], strict=True)) == [
        ("ivf", 1), ("hnsw", 16), ("hnsw", 64), ("hnsw", 256), ("flat", None)]
    assert front.columns == POINTS.columns


def test_frontier_keeps_one_of_exact_duplicates():
    doubled = pl.concat([POINTS.head(2), POINTS.head(2).with_columns(pl.lit("copy").alias("spec"))])
    assert frontier(doubled)["spec"].to_list() == ["hnsw", "flat"]


def test_qps_at_recall_takes_the_fastest_point_reaching_each_target():
    table = qps_at_recall(POINTS, [0.9, 0.95, 0.99, 0.995])
    assert table.columns == ["target_recall", "spec", "sweep_param", "sweep_value", "ann_recall", "qps"]
    assert table.rows() == [
        (0.9, "hnsw", "efSearch", 64, 0.95, 2000.0),
        (0.95, "hnsw", "efSearch", 64, 0.95, 2000.0),
        (0.99, "hnsw", "efSearch", 256, 0.99, 800.0),
        (0.995, "flat", None, None, 1.0, 100.0),
    ]
    assert qps_at_recall(POINTS.filter(pl.col("ann_recall") < 0.9), [0.9]).row(0) == (0.9, None, None, None, None, None)
    # a mean of tenths a rounding step below the target still meets it
    assert qps_at_recall(POINTS.with_columns(pl.col("ann_recall") - 1e-12), [0.99])["spec"].to_list() == ["hnsw"]


def test_frontier_svg_is_a_standalone_plot():
    svg = frontier_svg(POINTS, title="minilm on chatterbot")
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and svg.rstrip().endswith("</svg>")
    assert svg.count("<circle") == 7 and svg.count("<polyline") == 1
    assert "hnsw efSearch=64: recall 0.9500, 2000 QPS" in svg and "minilm on chatterbot" in svg


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match=r"lack columns \['qps'\]"):
        frontier(POINTS.drop("qps"))
