import polars as pl
import pytest
from toy_per_query import QUERIES, SETTINGS, per_query_table

from embedpyramid.stats.hsd_tables import HSD_PAIR_SCHEMA, HSD_SCHEMA, tukey_hsd_tables


def test_tukey_hsd_tables_give_letters_rank_intervals_and_simultaneous_intervals():
    # Three models: "new" is far above "base" and "copy" (identical to base) on 6 queries.
    copy = per_query_table(models=("base",)).with_columns(pl.lit("copy").alias("model"))
    per_query = pl.concat([per_query_table(), copy])
    settings = SETTINGS.model_copy(update={"n_permutations": 4_000})
    models, pairs = tukey_hsd_tables(per_query, QUERIES, settings, "nDCG@10")
    assert models.schema == pl.Schema(HSD_SCHEMA) and pairs.schema == pl.Schema(HSD_PAIR_SCHEMA)
    assert models["model"].to_list() == ["new", "base", "copy"]  # best first
    assert models["mean"].to_list() == pytest.approx([3.25 / 6, 2.25 / 6, 2.25 / 6])
    assert pairs.select("model_a", "model_b").rows() == [("base", "copy"), ("base", "new"), ("copy", "new")]
    same = pairs.row(0, named=True)
    assert (same["mean_delta"], same["p_value"], same["significant"]) == (0.0, 1.0, False)
    critical = models["critical_range"][0]
    assert pairs["ci_high"].to_list() == pytest.approx([d + critical for d in pairs["mean_delta"]])
    # base and copy always share a letter and a rank interval.
    letters = dict(models.select("model", "letters").rows())
    assert letters["base"] == letters["copy"]
    ranks = {m: (lo, hi) for m, lo, hi in models.select("model", "rank_low", "rank_high").rows()}
    assert ranks["base"] == ranks["copy"]
    # With only two models there is nothing for an HSD to add.
    two_models, two_pairs = tukey_hsd_tables(per_query_table(), QUERIES, settings, "nDCG@10")
    assert two_models.is_empty() and two_pairs.is_empty()
