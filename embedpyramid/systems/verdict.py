"""Each L5 system against its model's dense exact search: the paired verdicts.

The comparisons of :func:`embedpyramid.stats.comparisons.compare_models` pair *models* within one
system. L5 asks the transposed question — within one model, is the system better than dense
exact? — so the per-query table is relabelled (the model becomes the group, the system the
compared unit, ``exact`` the baseline) and handed to the same function, which gives the same
paired bootstrap intervals, sign-flip and t tests, effect sizes, test families (confirmatory:
the report metric over all queries, each system against exact, Holm; exploratory: the rest,
Benjamini–Hochberg), win/tie/loss and slices. A model-independent system (``model`` = ``none``,
e.g. BM25) is compared with the exact run of every model.

``verdict`` is the row's ``decision`` (its adjusted p-value at ``1 − confidence``) in the
report's words: ``better`` or ``worse`` (system against exact), else ``no detectable difference``.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.config.systems import EXACT, MODEL_INDEPENDENT
from embedpyramid.stats.comparisons import compare_models


def system_comparisons(
    per_query: pl.DataFrame, queries: pl.DataFrame, settings: ComparisonSettings,
    metrics: Sequence[str] | None = None,
) -> pl.DataFrame:
    """One row per dataset × model × system × metric × slice: the system (``system_b``) against
    the model's exact run (``system_a``), with the columns of the comparisons table (``model``
    in place of ``system``, ``system_a``/``system_b`` in place of ``model_a``/``model_b``) and a
    ``verdict``. ``metrics`` limits the metrics compared (e.g. the confirmatory one)."""
    if metrics is not None:
        per_query = per_query.filter(pl.col("metric").is_in(list(metrics)))
    columns = ["dataset", "model", "system", "query_id", "metric", "value"]
    groups = []
    for (dataset, model), exact in per_query.filter(pl.col("system") == EXACT).partition_by(
        ["dataset", "model"], as_dict=True, maintain_order=True
    ).items():
        systems = per_query.filter(
            (pl.col("dataset") == dataset) & (pl.col("system") != EXACT)
            & pl.col("model").is_in([model, MODEL_INDEPENDENT])
        )
        if systems.height:
            groups.append(pl.concat([exact.select(columns), systems.select(columns)]).select(
                "dataset", pl.lit(model).alias("group"), pl.col("system").alias("unit"), "query_id", "metric", "value",
            ))
    if not groups:
        raise ValueError("no system has an exact run of the same model and dataset to be compared with")
    relabelled = pl.concat(groups).rename({"group": "system", "unit": "model"})
    table = compare_models(relabelled, queries, settings.model_copy(update={"baseline": EXACT, "all_pairs": False}))
    return table.rename({"system": "model", "model_a": "system_a", "model_b": "system_b"}).with_columns(
        pl.col("decision").replace({"not significant": "no detectable difference"}).alias("verdict")
    )
