import numpy as np
import polars as pl
import pytest

from embedpyramid.vectors import TextVectors


@pytest.fixture
def blobs() -> tuple[pl.DataFrame, TextVectors]:
    """Three well-separated labelled blobs of four points each, in 3-d (not unit vectors)."""
    rng = np.random.default_rng(0)
    centres = {"red": [10.0, 0, 0], "green": [0, 10.0, 0], "blue": [0, 0, 10.0]}
    ids, labels, rows = [], [], []
    for label, centre in centres.items():
        for index in range(4):
            ids.append(f"{label}-{index}")
            labels.append(label)
            rows.append(np.array(centre) + rng.normal(scale=0.5, size=3))
    return pl.DataFrame({"text_id": ids, "label": labels}), TextVectors(ids, np.array(rows))
