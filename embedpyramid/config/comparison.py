"""The settings of one dataset's paired comparisons: the protocol's ``comparison:`` block with the
baseline card resolved and the dataset's slices and resampling groups.

:class:`ComparisonSettings` extends :class:`~embedpyramid.config.protocol.ComparisonConfig`, the
block a user writes in ``protocol.yaml``, with what only a dataset knows; every function that
pairs, tests or lists models (:mod:`embedpyramid.stats.comparisons`,
:mod:`embedpyramid.stats.hsd_tables`, :mod:`embedpyramid.summary.regressions`) takes it.
:func:`comparison_settings` derives it from a config folder, every field of the protocol's block
carried over as it is.

This module is imported by what compares models only: the statistics' validation it runs
(:func:`~embedpyramid.config.resampling.percentile_rank`) stays out of the code version of what
merely reads a config.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from embedpyramid.config.protocol import ComparisonConfig
from embedpyramid.config.resampling import percentile_rank
from embedpyramid.config.slices import ALL_QUERIES, QUERY_LENGTH, TRUNCATED

if TYPE_CHECKING:
    from embedpyramid.config.project import ProjectConfig


class ComparisonSettings(ComparisonConfig):
    """How models are paired, resampled, tested and sliced.

    ``baseline`` is ``model_a`` of every comparison (``all_pairs`` adds every other pair, the
    earlier model in sorted order as ``model_a``). ``n_resamples`` bootstrap resamples and
    ``n_permutations`` sign patterns (and HSD permutations), all seeded by ``seed``;
    ``confidence`` is the intervals' level and ``1 - confidence`` the tests' alpha;
    ``interval`` the interval of a mean delta (``hybrid``, the default: ``t`` where half the
    deltas or more tie at 0, ``studentized`` otherwise; or ``t``, ``studentized``, ``bca``,
    ``percentile`` for every row; see :mod:`embedpyramid.stats.bootstrap` for the evidence).
    ``report_metric`` is the confirmatory metric (None: every test is exploratory).
    ``value_range`` is the range every per-query value must lie in (metrics in [0, 1]); the
    intervals of a mean delta are clipped to ``[low - high, high - low]``; None turns both off.
    ``power`` is the power of the minimum detectable effect (``mde``). ``tie_epsilon``:
    ``|delta| <= tie_epsilon`` is a tie, and its delta is exactly 0 in every statistic. Comparisons
    and slices with fewer than ``min_slice_n`` queries (default 30: below it an interval's coverage
    depends on the shape of the deltas; at n = 10 none of the candidates holds 92% on tied or
    skewed ones) are flagged ``small_slice``. ``worst_n`` regressions and improvements are listed per pair.
    ``group_column`` (a queries column such as a session or source document) makes whole groups
    the resampling unit. ``slice_columns`` are queries columns to slice by, used where the
    dataset has them. ``length_buckets`` are inclusive upper word-count edges of the computed
    ``query_length`` slice: ``(4, 8, 16)`` gives ``<=4``, ``5-8``, ``9-16`` and ``>16`` words;
    ``()`` turns that slice off.

    Built by hand (tests, benchmarks) the defaults are the statistics' own: 10,000 sign
    patterns and no confirmatory metric; :func:`comparison_settings` carries the protocol's.
    """

    baseline: str
    n_permutations: int = Field(10_000, ge=1)
    report_metric: str | None = None
    value_range: tuple[float, float] | None = (0.0, 1.0)
    length_buckets: tuple[int, ...] = (4, 8, 16)
    group_column: str | None = None
    slice_columns: tuple[str, ...] = ("category",)

    @model_validator(mode="after")
    def _consistent(self) -> ComparisonSettings:
        if not self.baseline:
            raise ValueError("baseline must name the model every other model is compared with")
        if self.value_range is not None and not self.value_range[0] < self.value_range[1]:
            raise ValueError(f"value_range must be (low, high) with low < high; got {self.value_range}")
        percentile_rank(self.n_resamples, self.confidence)
        edges = self.length_buckets
        if any(edge < 1 for edge in edges) or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ValueError(
                f"length_buckets must be strictly increasing positive word counts; got {edges}"
            )
        reserved = {ALL_QUERIES, QUERY_LENGTH, TRUNCATED, "query_id", "text"}
        clashing = sorted(reserved.intersection(self.slice_columns))
        if clashing:
            raise ValueError(
                f"slice_columns may not use the reserved names {clashing}; "
                f"the {QUERY_LENGTH!r} slice is configured through length_buckets"
            )
        return self

    @property
    def resampling(self) -> str:
        """``"query"``, or ``"group:<group_column>"`` for the cluster bootstrap."""
        return "query" if self.group_column is None else f"group:{self.group_column}"

    @property
    def alpha(self) -> float:
        """The tests' level, ``1 - confidence``."""
        return 1.0 - self.confidence

    @property
    def delta_bounds(self) -> tuple[float, float] | None:
        """The range a mean delta can take, from ``value_range``."""
        if self.value_range is None:
            return None
        width = self.value_range[1] - self.value_range[0]
        return (-width, width)


def comparison_settings(config: ProjectConfig, dataset: str) -> ComparisonSettings:
    """The paired-comparison settings of one dataset of a config, retrieval or task: the
    protocol's comparison with the baseline card's key and the dataset's slices and resampling
    groups."""
    spec = config.task_dataset(dataset) if dataset in config.task_datasets else config.dataset(dataset)
    return ComparisonSettings.model_validate({
        **config.protocol.comparison.model_dump(),
        "baseline": config.baseline.key, "group_column": spec.group_column, "slice_columns": spec.slices,
    })
