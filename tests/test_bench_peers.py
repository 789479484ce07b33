"""benchmarks/bench_peers.py's verdicts: a ratio is the median of the rounds' own ratios, and each
verdict says whether every round fell on the same side of its target."""

from __future__ import annotations

import pytest


@pytest.fixture
def bench_peers(benchmark_script):
    return benchmark_script("bench_peers")


def test_a_ratio_is_the_median_of_the_rounds_ratios(bench_peers):
    # Rounds 44/35.2 = 1.25, 41.3/38.8 = 1.0644..., 43.7/34 = 1.2853...: the median is 1.25, not
    # the ratio of the sums (129/108 = 1.1944...).
    pipeline, bare = [44.0, 41.3, 43.7], [35.2, 38.8, 34.0]
    assert bench_peers.round_ratios(pipeline, bare) == pytest.approx([1.25, 41.3 / 38.8, 43.7 / 34.0])
    assert bench_peers.paired_ratio(pipeline, bare) == pytest.approx(1.25)


def test_rounds_on_both_sides_of_a_target_do_not_settle_its_verdict(bench_peers):
    # At most 1.15: 1.25 and 1.29 both fail, settled; 1.02 and 1.29 straddle it.
    assert bench_peers.settled([1.25, 1.29], 1.15, at_most=True)
    assert bench_peers.settled([1.01, 1.10, 1.15], 1.15, at_most=True)
    assert not bench_peers.settled([1.02, 1.29], 1.15, at_most=True)
    # At least 0.97: 0.92, 1.07, 0.95 straddle it; 0.97 itself meets it.
    assert not bench_peers.settled([0.92, 1.07, 0.95], 0.97, at_most=False)
    assert bench_peers.settled([0.97, 1.12], 0.97, at_most=False)
    assert bench_peers.agreement([0.92, 1.07, 0.95], 0.97, at_most=False) == (
        "rounds 0.92-1.07 straddle the target: not settled by 3")
    assert bench_peers.agreement([1.12, 1.13, 1.06], 0.97, at_most=False) == "every round on that side, 1.06-1.13"
    assert bench_peers.agreement([1.2], 1.15, at_most=True) == "one round"
