import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from embedpyramid.config.transfer import TransferSettings
from embedpyramid.stats.bootstrap import bootstrap_indices
from embedpyramid.transfer import (
    CorrelationScores,
    PublishedScores,
    QueryMeanScores,
    dataset_seed,
    transfer_analysis,
)

COLUMNS = ["dataset", "model", "system", "query_id", "metric", "value"]


def long_format(dataset: str, values: dict[str, list[float]], metric: str = "nDCG@10") -> pl.DataFrame:
    rows = [(dataset, model, "exact", f"q{i:03d}", metric, value)
            for model, column in values.items() for i, value in enumerate(column)]
    return pl.DataFrame(rows, schema=COLUMNS, orient="row")


def constant(dataset: str, role: str, means: dict[str, float], n: int = 5) -> QueryMeanScores:
    """Every query scores the model's mean: every resample gives the same ranking."""
    per_query = long_format(dataset, {model: [mean] * n for model, mean in means.items()})
    return QueryMeanScores.from_per_query(per_query, dataset=dataset, metric="nDCG@10", role=role)


SETTINGS = TransferSettings(n_resamples=999, seed=3)


def test_flip_table_on_toy_rankings_by_hand():
    public = PublishedScores("bench", "nDCG@10", ("a", "b", "c", "d"), np.array([0.9, 0.7, 0.7, 0.5]))
    own = constant("mine", "own", {"a": 0.6, "b": 0.8, "c": 0.6, "d": 0.4})
    result = transfer_analysis([public, own], SETTINGS)
    flips = {(r["model_a"], r["model_b"]): r for r in result.flips.iter_rows(named=True)}
    assert {pair: (r["public_order"], r["own_order"], r["flipped"]) for pair, r in flips.items()} == {
        ("a", "b"): ("a > b", "a < b", True),
        ("a", "c"): ("a > b", "tie", False),
        ("a", "d"): ("a > b", "a > b", False),
        ("b", "c"): ("tie", "a > b", False),
        ("b", "d"): ("a > b", "a > b", False),
        ("c", "d"): ("a > b", "a > b", False),
    }
    # Neither side varies (published numbers; constant per-query values): shares are exactly 0 or 1.
    assert {pair: r["share_flipped"] for pair, r in flips.items()} == {
        ("a", "b"): 1.0, ("a", "c"): 0.0, ("a", "d"): 0.0, ("b", "c"): 0.0, ("b", "d"): 0.0, ("c", "d"): 0.0}
    pair = result.pairs.row(0, named=True)
    assert pair["kendall_tau_b"] == pytest.approx(0.4) and pair["spearman"] == pytest.approx(0.5)
    assert pair["tau_b_ci_low"] == pytest.approx(0.4) and pair["tau_b_ci_high"] == pytest.approx(0.4)
    assert (pair["n_flips"], pair["pairwise_agreement"], pair["informative"]) == (1, 0.5, True)
    assert (pair["public_winner"], pair["own_winner"], pair["p_same_winner"]) == (["a"], ["b"], 0.0)
    assert (pair["public_resampled"], pair["own_resampled"]) == (False, True)
    assert "bench: published numbers, not resampled" in pair["note"]


def test_two_models_give_pairwise_agreement_only():
    public = constant("bench", "public", {"a": 0.5, "b": 0.6})
    own = constant("mine", "own", {"a": 0.7, "b": 0.4})
    pair = transfer_analysis([public, own], SETTINGS).pairs.row(0, named=True)
    assert pair["informative"] is False
    assert pair["kendall_tau_b"] is None and pair["spearman"] is None and pair["tau_b_ci_low"] is None
    assert "2 models: a rank correlation is not informative" in pair["note"]
    assert (pair["pairwise_agreement"], pair["n_flips"], pair["p_same_winner"]) == (0.0, 1, 0.0)


def test_fewer_than_two_common_models_is_said_not_hidden():
    public = constant("bench", "public", {"a": 0.5, "x": 0.6})
    own = constant("mine", "own", {"a": 0.7, "y": 0.4})
    result = transfer_analysis([public, own], SETTINGS)
    assert result.pairs.row(0, named=True)["note"] == "1 model(s) evaluated on both datasets: nothing to compare"
    assert result.flips.is_empty()


def test_every_public_dataset_meets_every_own_dataset():
    datasets = [constant(name, role, {"a": 0.1, "b": 0.2}) for name, role in
                (("p1", "public"), ("p2", "public"), ("o1", "own"), ("o2", "own"), ("o3", "own"))]
    pairs = transfer_analysis(datasets, SETTINGS).pairs
    assert pairs.select("public_dataset", "own_dataset").rows() == [
        ("p1", "o1"), ("p1", "o2"), ("p1", "o3"), ("p2", "o1"), ("p2", "o2"), ("p2", "o3")]


def noisy(dataset: str, role: str, means: dict[str, float], n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return long_format(dataset, {m: list(np.clip(mu + rng.normal(0, 0.25, n), 0, 1)) for m, mu in means.items()})


def test_bootstrap_is_seeded_recorded_and_brackets_the_observed_value():
    public = QueryMeanScores.from_per_query(noisy("bench", "public", {"a": 0.4, "b": 0.5, "c": 0.6, "d": 0.55}, 80, 1),
                                            dataset="bench", metric="nDCG@10", role="public")
    own = QueryMeanScores.from_per_query(noisy("mine", "own", {"a": 0.45, "b": 0.5, "c": 0.7, "d": 0.4}, 60, 2),
                                         dataset="mine", metric="nDCG@10", role="own")
    first, second = transfer_analysis([public, own], SETTINGS), transfer_analysis([public, own], SETTINGS)
    assert first.pairs.equals(second.pairs) and first.flips.equals(second.flips)
    assert first.settings["dataset_seeds"] == {"bench": dataset_seed(3, "bench"), "mine": dataset_seed(3, "mine")}
    assert first.rankings.filter(pl.col("dataset") == "mine")["seed"].unique().to_list() == [dataset_seed(3, "mine")]
    pair = first.pairs.row(0, named=True)
    assert -1 <= pair["tau_b_ci_low"] <= pair["kendall_tau_b"] <= pair["tau_b_ci_high"] <= 1
    assert 0 < pair["p_same_winner"] <= 1 and pair["public_winner"] == ["c"] and pair["own_winner"] == ["c"]
    other = transfer_analysis([public, own], TransferSettings(n_resamples=999, seed=4)).pairs.row(0, named=True)
    assert other["p_same_winner"] != pair["p_same_winner"] or other["tau_b_ci_low"] != pair["tau_b_ci_low"]


def test_query_resamples_match_a_naive_loop_and_ignore_the_other_models():
    per_query = noisy("mine", "own", {"a": 0.4, "b": 0.5, "c": 0.6}, 30, 5)
    scores = QueryMeanScores.from_per_query(per_query, dataset="mine", metric="nDCG@10", role="own")
    draws = np.random.default_rng(11).integers(0, 30, size=(200, 30))
    assert np.allclose(scores.resampled(200, 11), scores.values[draws].mean(axis=1), rtol=0, atol=1e-12)
    two = QueryMeanScores.from_per_query(per_query.filter(pl.col("model") != "c"), dataset="mine",
                                         metric="nDCG@10", role="own")
    assert np.array_equal(two.resampled(200, 11), scores.resampled(200, 11)[:, :2])


def test_group_resamples_draw_whole_groups():
    per_query = long_format("mine", {"a": [0.0, 1.0, 1.0, 0.0], "b": [1.0, 1.0, 0.0, 0.0]})
    groups = {"q000": "g1", "q001": "g1", "q002": "g2", "q003": "g3"}
    scores = QueryMeanScores.from_per_query(per_query, dataset="mine", metric="nDCG@10", role="own", groups=groups)
    draws = np.random.default_rng(5).integers(0, 3, size=(50, 3))
    sums, sizes = np.array([[1.0, 2.0], [1.0, 0.0], [0.0, 0.0]]), np.array([2.0, 1.0, 1.0])
    expected = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)[:, None]
    assert np.allclose(scores.resampled(50, 5), expected, rtol=0, atol=1e-12)
    assert scores.resampling == "group"


def test_correlation_scores_resample_items_and_rank_ties():
    rng = np.random.default_rng(2)
    gold = {f"q{i:03d}": float(rng.integers(0, 6)) for i in range(40)}
    per_item = long_format("sts", {"a": list(rng.random(40)), "b": list(rng.random(40))}, metric="cosine")
    scores = CorrelationScores.from_per_item(per_item, gold, dataset="sts", similarity="cosine", metric="Spearman",
                                             role="public")
    gold_array = np.array(list(gold.values()))
    assert scores.observed[0] == pytest.approx(spearmanr(scores.values[:, 0], gold_array).statistic)
    resampled = scores.resampled(20, 9)
    indices = next(bootstrap_indices(40, n_resamples=20, seed=9))
    for row in range(20):
        expected = spearmanr(scores.values[indices[row], 1], gold_array[indices[row]]).statistic
        assert resampled[row, 1] == pytest.approx(expected, abs=1e-12)


def test_bad_inputs_are_refused_with_the_reason():
    incomplete = long_format("mine", {"a": [0.1, 0.2], "b": [0.3, 0.4]}).filter(
        ~((pl.col("model") == "b") & (pl.col("query_id") == "q001")))
    with pytest.raises(ValueError, match=r"models lack queries the others have \(\{'b': 1\}\)"):
        QueryMeanScores.from_per_query(incomplete, dataset="mine", metric="nDCG@10", role="own")
    with pytest.raises(ValueError, match="no per-query values for dataset 'mine', system 'exact', metric 'MRR@10'"):
        QueryMeanScores.from_per_query(incomplete, dataset="mine", metric="MRR@10", role="own")
    published_own = PublishedScores("mine", "nDCG@10", ("a", "b"), np.array([0.1, 0.2]), role="own")
    with pytest.raises(ValueError, match="own data needs per-query values"):
        transfer_analysis([published_own], SETTINGS)
    with pytest.raises(ValueError, match="too few"):
        TransferSettings(n_resamples=10, confidence=0.95)
