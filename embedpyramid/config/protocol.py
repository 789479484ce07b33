"""The evaluation protocol (``protocol.yaml``): cutoffs, depth, metric conventions, search
blocking and the paired comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from embedpyramid.config.base import Strict, format_validation, read_yaml
from embedpyramid.config.conventions import MetricConventions
from embedpyramid.config.datasets import AnyDataset
from embedpyramid.config.measures import Measure, default_measures
from embedpyramid.config.tasks import MTEB_VERSION


class SearchSettings(Strict):
    doc_block_size: int = Field(16384, ge=1)
    query_block_size: int = Field(1024, ge=1)


class ComparisonConfig(Strict):
    """Paired comparisons against a baseline card: resampling, tests, families, slices and the
    report. ``report_metric`` is the confirmatory metric (Holm over the models against the
    baseline, all queries); every other metric and slice is exploratory (Benjamini–Hochberg).
    ``interval`` is the interval of a mean delta (``hybrid``: t where half the deltas or more tie,
    studentized otherwise — chosen by ``benchmarks/interval_coverage.py``); comparisons and slices
    under ``min_slice_n`` queries are flagged; ``power`` and ``detectable_delta`` set the verdict's
    planning numbers (the minimum detectable effect, the queries needed to detect that delta)."""

    baseline: str | None = None
    all_pairs: bool = False
    n_resamples: int = Field(10_000, ge=1)
    n_permutations: int = Field(100_000, ge=1)
    seed: int = 42
    confidence: float = Field(0.95, gt=0, lt=1)
    interval: Literal["hybrid", "t", "studentized", "bca", "percentile"] = "hybrid"
    power: float = Field(0.8, gt=0, lt=1)
    detectable_delta: float = Field(0.02, gt=0)
    tie_epsilon: float = Field(1e-9, ge=0)
    min_slice_n: int = Field(30, ge=1)
    worst_n: int = Field(10, ge=1)
    length_buckets: list[int] = Field(default_factory=lambda: [4, 8, 16])
    report_metric: str = "nDCG@10"


class Protocol(Strict):
    """The evaluation protocol: cutoffs, retrieval depth, metric conventions, search blocking,
    and the paired comparisons."""

    k_values: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 100])
    depth: int = Field(100, ge=1)
    gain: Literal["linear", "exponential"] = "linear"
    relevance_threshold: int = Field(1, ge=1)
    ties: Literal["expected", "trec_eval", "doc_id"] = "expected"
    search: SearchSettings = Field(default_factory=SearchSettings)
    comparison: ComparisonConfig = Field(default_factory=ComparisonConfig)

    @model_validator(mode="after")
    def _depth_covers_k(self) -> Protocol:
        if not self.k_values or any(k < 1 for k in self.k_values):
            raise ValueError("k_values must be a non-empty list of positive integers")
        if self.depth < max(self.k_values):
            raise ValueError(f"depth {self.depth} must be at least the largest k ({max(self.k_values)})")
        allowed = [str(m) for m in self.measures()]
        if self.comparison.report_metric not in allowed:
            raise ValueError(f"comparison.report_metric {self.comparison.report_metric!r} is not measured; "
                             f"allowed: {', '.join(allowed)}")
        return self

    def mteb_depth_problem(self, dataset: AnyDataset) -> str | None:
        """Why this protocol's run cannot give MTEB's numbers for an ``mteb`` dataset, or None.

        MTEB drops a self-hit from its top_k documents, so a query that retrieves itself keeps
        top_k - 1; a run of ``depth`` < top_k that drops it keeps depth - 1, one fewer than MTEB
        at a cutoff equal to depth."""
        settings = dataset.retrieval
        if settings is None or settings.protocol != "mteb" or not dataset.drop_self_hits:
            return None
        if self.depth < settings.top_k and self.depth == max(self.k_values):
            return (f"retrieval.protocol mteb with drop_self_hits needs protocol.yaml depth ({self.depth}) at least "
                    f"retrieval.top_k ({settings.top_k}) or above the largest k ({max(self.k_values)}): MTEB drops "
                    "self-hits from its top_k documents, the project from its depth")
        return None

    def measures(self) -> list[Measure]:
        return default_measures(sorted(set(self.k_values)))

    def conventions(self, dataset: AnyDataset) -> MetricConventions:
        """The dataset's metric conventions: protocol.yaml's, or MTEB's under ``retrieval:
        {protocol: mteb}`` (with the dataset's drop_self_hits either way)."""
        if dataset.retrieval is not None and dataset.retrieval.protocol == "mteb":
            return MetricConventions.mteb(drop_self_hits=dataset.drop_self_hits, top_k=dataset.retrieval.top_k,
                                          mteb_version=MTEB_VERSION,
                                          skip_first_result=dataset.retrieval.skip_first_result)
        return MetricConventions(
            gain=self.gain,
            relevance_threshold=self.relevance_threshold,
            drop_self_hits=dataset.drop_self_hits,
            ties=self.ties,
        )


def load_protocol(directory: Path) -> Protocol:
    path = directory / "protocol.yaml"
    try:
        return Protocol.model_validate(read_yaml(path))
    except ValidationError as error:
        raise format_validation(path, "", error) from None
