"""Thin Dagster assets, one module per level of the evaluation pyramid; logic lives in embedpyramid.

Core modules that import numerical libraries (torch, scipy, FAISS) are imported inside the asset
bodies: building the definitions — a warm ``embedpyramid run`` with nothing to do, a code server
starting — must not pay for libraries only a materialization uses.
"""
