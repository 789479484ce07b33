"""Pyramid L1, geometry: raw-vector norms and anisotropy (``norms``), the price of normalization
mistakes (``normalization``), and the level's store-backed entry points and report section (``level``)."""
