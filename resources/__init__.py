"""Dagster resources of embedpyramid (loaded from the repo root, not installed)."""

from resources.project import EncoderRegistry, ProjectResource

__all__ = ["EncoderRegistry", "ProjectResource"]
