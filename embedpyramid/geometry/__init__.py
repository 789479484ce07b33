"""Pyramid L1, geometry: raw-vector norms and anisotropy (``norms``), the price of normalization
mistakes (``normalization``), whether known-similar pairs score above random ones
(``pair_sanity``), and the level's store-backed entry points and report section (``level``)."""
