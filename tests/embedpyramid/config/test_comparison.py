import pytest

from embedpyramid.config.comparison import ComparisonSettings


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"confidence": 1.5}, "confidence"),
        ({"n_resamples": 10}, "too few"),
        ({"tie_epsilon": -1.0}, "tie_epsilon"),
        ({"min_slice_n": 0}, "min_slice_n"),
        ({"length_buckets": (8, 4)}, "strictly increasing"),
        ({"slice_columns": ("all",)}, "reserved"),
    ],
)
def test_settings_are_validated(changes, message):
    with pytest.raises(ValueError, match=message):
        ComparisonSettings(baseline="base", **changes)
