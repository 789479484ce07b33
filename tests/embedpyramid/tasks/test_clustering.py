import numpy as np
import pytest
from sklearn import metrics as skm

from embedpyramid.config import ClusteringSettings
from embedpyramid.tasks import clustering
from embedpyramid.tasks.clustering import clustering_scores_rows, compare_clustering, evaluate_clustering
from embedpyramid.vectors import TextVectors


def test_a_perfect_clustering_scores_one_on_every_metric_and_seed(blobs):
    texts, vectors = blobs
    result = evaluate_clustering(texts, vectors, ClusteringSettings(seeds=[0, 1, 2]), dataset="d", model="m")
    assert result.settings["k"] == 3 and result.settings["k_rule"] == "the number of gold classes"
    assert result.per_seed["value"].to_list() == pytest.approx([1.0] * 9)
    assert result.summary["metric"].to_list() == ["v_measure", "ari", "ami"]
    assert result.summary["value"].to_list() == pytest.approx([1.0] * 3)
    assert result.summary["sd"].to_list() == pytest.approx([0.0] * 3) and set(result.summary["n_seeds"]) == {3}
    assert result.per_item.height == 0  # no metric here is a mean of per-item values


def test_cluster_numbering_does_not_matter():
    gold = np.array([[0, 0, 1, 1, 2, 2]])
    renamed = np.array([[2, 2, 0, 0, 1, 1]])
    assert clustering_scores_rows(gold, renamed)[0] == pytest.approx([1.0, 1.0, 1.0])


def test_contingency_kernel_matches_scikit_learn_including_degenerate_labellings():
    rng = np.random.default_rng(0)
    cases = [(6, 2, 2), (30, 3, 5), (120, 6, 4), (10, 1, 3), (10, 4, 1)]
    for n, classes, clusters in cases:
        gold, predicted = rng.integers(0, classes, size=(25, n)), rng.integers(0, clusters, size=(25, n))
        gold[0], predicted[0] = 0, 0  # one class and one cluster: every score is 1 by convention
        got = clustering_scores_rows(gold, predicted)
        expected = [[skm.v_measure_score(g, p), skm.adjusted_rand_score(g, p), skm.adjusted_mutual_info_score(g, p)]
                    for g, p in zip(gold, predicted, strict=True)]
        np.testing.assert_allclose(got, expected, atol=1e-12)


def test_expected_mutual_information_in_small_chunks_is_the_same(monkeypatch):
    rng = np.random.default_rng(1)
    gold, predicted = rng.integers(0, 5, size=(10, 60)), rng.integers(0, 6, size=(10, 60))
    whole = clustering_scores_rows(gold, predicted)
    monkeypatch.setattr(clustering, "_EMI_TERMS_PER_CHUNK", 7)
    monkeypatch.setattr(clustering, "_DENSE_KEYS", 0)  # the np.unique path as well
    np.testing.assert_allclose(clustering_scores_rows(gold, predicted), whole, atol=1e-14)


def test_comparison_against_a_worse_embedding(blobs):
    texts, vectors = blobs
    scrambled = TextVectors(vectors.ids, np.random.default_rng(2).normal(size=(12, 3)))
    settings = ClusteringSettings(seeds=[0, 1])
    good = evaluate_clustering(texts, vectors, settings, dataset="d", model="good")
    bad = evaluate_clustering(texts, scrambled, settings, dataset="d", model="bad")
    compared = compare_clustering(bad.predictions, good.predictions, n_resamples=300)
    assert compared["metric"].to_list() == ["v_measure", "ari", "ami"]
    means = dict(zip(bad.summary["metric"], bad.summary["value"], strict=True))
    for row in compared.iter_rows(named=True):
        assert row["value_a"] == pytest.approx(means[row["metric"]], abs=1e-12)
        assert row["value_b"] == pytest.approx(1.0) and row["delta"] > 0
    same = compare_clustering(good.predictions, good.predictions, n_resamples=100)
    assert same["ci_low"].to_list() == [0.0] * 3 and same["ci_high"].to_list() == [0.0] * 3


def test_the_noise_of_each_protocol_is_the_spread_its_seeds_alone_produce():
    rng = np.random.default_rng(4)
    ids = [f"t{i:03d}" for i in range(90)]
    labels = [f"c{i % 3}" for i in range(90)]
    raw = rng.normal(size=(90, 6)) + 1.2 * np.eye(6)[[i % 3 for i in range(90)]]
    import polars as pl

    from embedpyramid.config.tasks import MtebClustering

    texts, vectors = pl.DataFrame({"text_id": ids, "label": labels}), TextVectors(ids, raw)
    project = evaluate_clustering(texts, vectors, ClusteringSettings(seeds=[0, 1, 2, 3]), dataset="d", model="m")
    per_seed = project.per_seed.filter(pl.col("metric") == "v_measure")["value"].to_list()
    noise = project.settings["noise"]
    assert noise["values"]["v_measure"] == per_seed and noise["seeds"] == [0, 1, 2, 3]
    assert noise["spread"]["v_measure"] == pytest.approx(np.std(per_seed, ddof=1) / 2)  # the seed mean's error
    settings = ClusteringSettings(protocol="mteb", mteb=MtebClustering(n_draws=2, sample_size=60, noise_seeds=2))
    mteb = evaluate_clustering(texts, vectors, settings, dataset="d", model="m")
    runs = mteb.settings["noise"]
    again = evaluate_clustering(texts, vectors, ClusteringSettings(
        protocol="mteb", mteb=MtebClustering(n_draws=2, sample_size=60, seed=44, noise_seeds=0)), dataset="d", model="m")
    main = mteb.summary.filter(pl.col("metric") == "v_measure")["value"][0]
    assert runs["seeds"] == [42, 43, 44] and runs["values"]["v_measure"][0] == main
    assert runs["values"]["v_measure"][2] == again.summary.filter(pl.col("metric") == "v_measure")["value"][0]
    assert runs["spread"]["v_measure"] == pytest.approx(np.std(runs["values"]["v_measure"], ddof=1))
    assert len(set(runs["values"]["v_measure"])) == 3  # the seeds move it
