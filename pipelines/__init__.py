"""Dagster wiring of embedpyramid: definitions, partitions, automation, the in-process runner.

Loaded from the repo root (``workspace.yaml`` sets the working directory); not installed, so
the generic names ``pipelines``, ``assets`` and ``resources`` never collide with other packages.
"""
