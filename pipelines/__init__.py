"""Dagster wiring of embedpyramid: definitions, the graph of a config folder, automation, the
in-process runner. The top layer: it imports ``assets``, ``resources``, ``graphbase`` and the
core; nothing imports it but the code location (workspace.yaml) and the CLI's commands that run
the graph.
"""
