"""Pyramid L3 settings: how the transfer analysis resamples and ranks, derived from the protocol's
``comparison:`` block (:func:`transfer_settings`) so that L3 resamples as the paired comparisons do.

Imported by the transfer analysis only: its validation
(:func:`~embedpyramid.config.resampling.percentile_rank`) stays out of the code version of what
merely reads a config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import model_validator

from embedpyramid.config.base import Strict
from embedpyramid.config.resampling import percentile_rank

if TYPE_CHECKING:
    from embedpyramid.config.project import ProjectConfig


class TransferSettings(Strict):
    """Bootstrap resamples, base seed, interval level, and the score difference counted as a tie."""

    n_resamples: int = 10_000
    seed: int = 42
    confidence: float = 0.95
    tie_epsilon: float = 1e-9

    @model_validator(mode="after")
    def _valid(self) -> TransferSettings:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1; got {self.confidence}")
        percentile_rank(self.n_resamples, self.confidence)
        if not self.tie_epsilon >= 0.0:
            raise ValueError(f"tie_epsilon must be a non-negative number; got {self.tie_epsilon}")
        return self


def transfer_settings(config: ProjectConfig) -> TransferSettings:
    """The paired comparisons' resampling settings (``protocol.yaml``, ``comparison:``)."""
    return TransferSettings.model_validate(
        config.protocol.comparison.model_dump(include=set(TransferSettings.model_fields))
    )
