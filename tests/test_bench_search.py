"""benchmarks/bench_search.py's rounding check, on hand-made vectors: where the two products round
differently, two top-k lists count as the same only where each rank's documents score within
the sum of the two sides' own roundings in float64."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def bench_search(monkeypatch, benchmark_script):
    # The script sets these for itself when unset, and puts the repository and benchmarks/ on
    # sys.path; set here, the test leaves the environment and sys.path as they were.
    monkeypatch.setenv("POLARS_MAX_THREADS", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    return benchmark_script("bench_search")


# One query along the first axis: documents 0, 1 and 2 score 1, 0.5 and 0.5 + 2^-23 exactly.
QUERIES = np.array([[1.0, 0.0]], np.float32)
DOCUMENTS = np.array([[1.0, 0.0], [0.5, 0.0], [0.5 + 2.0**-23, 0.0]], np.float32)


def test_a_swap_inside_the_two_sides_rounding_is_the_same_result(bench_search):
    # The project reports document 1 at 0.5000002 (rounding 1.8e-7); FAISS reports document 2 exactly.
    project = (np.array([[1.0, 0.5000002]], np.float32), np.array([[0, 1]]))
    faiss_side = (np.array([[1.0, 0.5 + 2.0**-23]], np.float32), np.array([[0, 2]]))
    check = bench_search.rounding_check(QUERIES, DOCUMENTS, project, faiss_side)
    assert check["project_rounding"] == pytest.approx(np.float64(np.float32(0.5000002)) - 0.5)
    assert check["faiss_rounding"] == 0.0
    assert check["largest_rank_gap"] == 2.0**-23 and check["equal"]


def test_a_different_document_beyond_the_rounding_is_not_the_same_result(bench_search):
    # Both sides report exact scores (no rounding), so the 2^-23 between documents 1 and 2 is a real difference.
    project = (np.array([[1.0, 0.5]], np.float32), np.array([[0, 1]]))
    faiss_side = (np.array([[1.0, 0.5 + 2.0**-23]], np.float32), np.array([[0, 2]]))
    check = bench_search.rounding_check(QUERIES, DOCUMENTS, project, faiss_side)
    assert (check["project_rounding"], check["faiss_rounding"]) == (0.0, 0.0)
    assert check["largest_rank_gap"] == 2.0**-23 and not check["equal"]
