"""Fixtures of the graph tests that need a dataset but not its size."""

import pytest
from graph_helpers import beir_folder


@pytest.fixture
def tiny(tmp_path) -> dict:
    """A 12-document BEIR dataset named ``tiny``: every level of the graph runs on it in seconds."""
    return {"tiny": {"loader": "beir", "path": str(beir_folder(tmp_path / "tiny-beir"))}}
