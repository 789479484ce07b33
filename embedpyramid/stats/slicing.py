"""The slices of one dataset's queries: each query's slice, group and length-bucket labels, and
the query masks of every slice a comparison reports (all queries, each slice value, each
query-length bucket, each pair's ``truncated`` split). The reserved names themselves are in
:mod:`embedpyramid.config.slices`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.config.slices import ALL_QUERIES, MISSING_SLICE_VALUE, QUERY_LENGTH, TRUNCATED


def length_bucket_names(edges: Sequence[int]) -> list[str]:
    """Names of the query-length buckets for inclusive upper word-count ``edges``, in order."""
    names = []
    lower = 1
    for edge in edges:
        names.append(f"<={edge} words" if lower == 1 else _word_range(lower, edge))
        lower = edge + 1
    names.append(f">{edges[-1]} words")
    return names


def _word_range(lower: int, upper: int) -> str:
    return f"{lower} words" if lower == upper else f"{lower}-{upper} words"


def query_labels(
    query_ids: pl.Series, queries: pl.DataFrame, settings: ComparisonSettings
) -> dict[str, np.ndarray]:
    """Slice (and group) labels aligned with ``query_ids``, as string arrays."""
    wanted = [c for c in settings.slice_columns if c in queries.columns]
    if settings.group_column is not None:
        if settings.group_column not in queries.columns:
            raise ValueError(
                f"group_column {settings.group_column!r} is not a queries column; "
                f"columns: {queries.columns}"
            )
        wanted.append(settings.group_column)
    if settings.length_buckets:
        if "text" not in queries.columns:
            raise ValueError(
                "the query_length slice needs the queries' text column; "
                "set length_buckets=() to turn it off"
            )
        wanted.append("text")
    unknown = query_ids.filter(~query_ids.is_in(queries["query_id"].implode()))
    if unknown.len():
        raise ValueError(
            f"{unknown.len()} scored queries are missing from the queries table, "
            f"e.g. {unknown.head(5).to_list()}"
        )
    aligned = pl.DataFrame({"query_id": query_ids}).join(
        queries.select("query_id", *dict.fromkeys(wanted)), on="query_id", how="left"
    )
    labels = {}
    for column in settings.slice_columns:
        if column in aligned.columns:
            labels[column] = (
                aligned[column].cast(pl.String).fill_null(MISSING_SLICE_VALUE).to_numpy()
            )
    if settings.group_column is not None:
        groups = aligned[settings.group_column]
        if groups.null_count():
            nulls = aligned.filter(groups.is_null())["query_id"].head(5).to_list()
            raise ValueError(
                f"group_column {settings.group_column!r} is null for {groups.null_count()} "
                f"queries, e.g. {nulls}; every query needs a group to be resampled with"
            )
        labels[settings.group_column] = groups.cast(pl.String).to_numpy()
    if settings.length_buckets:
        words = aligned["text"].fill_null("").str.count_matches(r"\S+").to_numpy()
        bucket = np.searchsorted(np.asarray(settings.length_buckets), words, side="left")
        labels[QUERY_LENGTH] = np.asarray(length_bucket_names(settings.length_buckets))[bucket]
    return labels


def query_slices(
    labels: dict[str, np.ndarray],
    query_ids: pl.Series,
    settings: ComparisonSettings,
    pairs: list[tuple[str, str]],
    truncated: Mapping[str, Collection[str]],
) -> list[tuple[str, str, np.ndarray, list[int]]]:
    """(slice_column, slice_value, mask, pair indices) for all queries, each slice value, each
    length bucket (every pair), then each pair's ``truncated`` split."""
    every_pair = list(range(len(pairs)))
    n_queries = query_ids.len()
    slices = [(ALL_QUERIES, ALL_QUERIES, np.ones(n_queries, dtype=bool), every_pair)]
    for column in (c for c in settings.slice_columns if c in labels):
        values = labels[column]
        present = sorted(set(values.tolist()) - {MISSING_SLICE_VALUE})
        if (values == MISSING_SLICE_VALUE).any():
            present.append(MISSING_SLICE_VALUE)
        slices += [(column, value, values == value, every_pair) for value in present]
    if QUERY_LENGTH in labels:
        buckets = labels[QUERY_LENGTH]
        slices += [
            (QUERY_LENGTH, name, buckets == name, every_pair)
            for name in length_bucket_names(settings.length_buckets)
            if (buckets == name).any()
        ]
    for index, (model_a, model_b) in enumerate(pairs):
        known = [set(truncated[m]) for m in (model_a, model_b) if truncated.get(m) is not None]
        if not known:
            continue
        flagged = query_ids.is_in(sorted(set().union(*known))).to_numpy()
        if 0 < flagged.sum() < n_queries:
            slices += [(TRUNCATED, "yes", flagged, [index]), (TRUNCATED, "no", ~flagged, [index])]
    return slices
