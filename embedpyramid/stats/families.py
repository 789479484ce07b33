"""The two test families of a comparisons table, stated in every row (``family``, ``adjustment``,
``family_size``, ``p_adjusted``, ``decision``):

* ``confirmatory``: the report metric over all queries, each model against the baseline — the
  question the evaluation was run to answer; Holm across those tests only, so the family-wise
  error rate is controlled and adding a metric or a slice cannot move its p-values;
* ``exploratory``: every other metric, every slice and every non-baseline pair;
  Benjamini–Hochberg within the dataset (false discovery rate), labelled as such.

``decision`` reads the adjusted p-value at ``alpha = 1 - confidence``: ``better`` or ``worse``
(model B against A) or ``not significant``.
"""

from __future__ import annotations

import polars as pl

from embedpyramid.config.comparison import ComparisonSettings
from embedpyramid.config.slices import ALL_QUERIES
from embedpyramid.stats.multiple import benjamini_hochberg_adjust, holm_adjust

CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
DECISIONS = ("better", "worse", "not significant")

FAMILY_SCHEMA: dict[str, pl.DataType] = {
    "family": pl.String(),
    "adjustment": pl.String(),
    "family_size": pl.Int64(),
    "p_adjusted": pl.Float64(),
    "decision": pl.String(),
}
"""The family columns of the comparisons table, in its order."""


def with_families(table: pl.DataFrame, settings: ComparisonSettings) -> pl.DataFrame:
    """State each row's family, adjust its p-value within the family and the dataset, decide."""
    confirmatory = (
        (pl.col("metric") == (settings.report_metric or ""))
        & (pl.col("slice_column") == ALL_QUERIES)
        & (pl.col("model_a") == settings.baseline)
    )
    labelled = table.with_row_index("_row").with_columns(
        pl.when(confirmatory).then(pl.lit(CONFIRMATORY)).otherwise(pl.lit(EXPLORATORY)).alias("family")
    )
    parts = []
    for (_, family), part in labelled.partition_by(["dataset", "family"], as_dict=True).items():
        adjust, name = (holm_adjust, "holm") if family == CONFIRMATORY else (benjamini_hochberg_adjust, "bh")
        parts.append(part.with_columns(
            pl.lit(name).alias("adjustment"),
            pl.lit(part.height, dtype=pl.Int64()).alias("family_size"),
            pl.Series("p_adjusted", adjust(part["p_value"].to_numpy()), dtype=pl.Float64()),
        ))
    if not parts:
        return labelled.drop("_row").with_columns(
            pl.lit(None, dtype=dtype).alias(name) for name, dtype in FAMILY_SCHEMA.items() if name != "family"
        )
    significant = pl.col("p_adjusted") <= settings.alpha
    return pl.concat(parts).sort("_row").drop("_row").with_columns(
        pl.when(significant & (pl.col("mean_delta") > 0)).then(pl.lit(DECISIONS[0]))
        .when(significant & (pl.col("mean_delta") < 0)).then(pl.lit(DECISIONS[1]))
        .otherwise(pl.lit(DECISIONS[2])).alias("decision")
    )
