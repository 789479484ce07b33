"""Dagster resources of embedpyramid: they import `graphbase` and the core, never `assets` or `pipelines`."""

from resources.project import EncoderRegistry, ProjectResource, ShardWorkspace

__all__ = ["EncoderRegistry", "ProjectResource", "ShardWorkspace"]
