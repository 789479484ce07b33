"""The reserved slice names of the comparisons table, apart from the statistics that fill it, so
that what only displays a table (:mod:`embedpyramid.rendering.tables`) does not import them."""

ALL_QUERIES = "all"
"""``slice_column`` and ``slice_value`` of the row that covers every query of the pair."""
QUERY_LENGTH = "query_length"
"""``slice_column`` of the word-count buckets computed from the query text."""
TRUNCATED = "truncated"
"""``slice_column`` of the queries (``yes``) whose text or a relevant document's text is longer
than either card's max tokens, and the others (``no``)."""
MISSING_SLICE_VALUE = "(missing)"
"""``slice_value`` of queries whose slice column is null."""
