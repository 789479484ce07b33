"""Thin Dagster assets, one module per level of the evaluation pyramid; logic lives in embedpyramid."""
