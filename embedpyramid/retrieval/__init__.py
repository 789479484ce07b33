"""Pyramid L2, retrieval: exact search (``search``), per-query metrics (``metrics``, one module per
measure), and the level's store-backed entry points (``level``)."""
