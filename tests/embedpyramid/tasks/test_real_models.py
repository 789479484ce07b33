"""The task families on the embedded data with the two real models of the default config,
called directly (no Dagster): values must be non-trivial and sane."""

from functools import cache

import numpy as np
import polars as pl

from embedpyramid.config import (
    BitextSettings,
    ChatterbotDataset,
    ClassificationSettings,
    ClusteringSettings,
    DjangoBitextDataset,
    PairClassificationSettings,
    load_config,
)
from embedpyramid.data import TaskTables, load_chatterbot_pairs, load_chatterbot_questions, load_django_bitext, load_lee
from embedpyramid.encode import load_encoder
from embedpyramid.geometry.pair_sanity import PairSanitySettings, task_pair_sanity
from embedpyramid.tasks.bitext import compare_bitext, evaluate_bitext
from embedpyramid.tasks.classification import evaluate_classification
from embedpyramid.tasks.clustering import evaluate_clustering
from embedpyramid.tasks.pair_classification import evaluate_pair_classification
from embedpyramid.tasks.sts import evaluate_sts
from embedpyramid.vectors import TextVectors

MINILM, USE = "minilm-l6", "use-m3"
CATEGORIES = ["ai", "computers", "emotion", "food", "science", "sports"]


@cache
def encoder(name: str):
    return load_encoder(load_config("configs").models[name])


def embed(name: str, tables: TaskTables) -> TextVectors:
    """The one place these tests encode: the backend's raw vectors of every text."""
    return TextVectors(tables.texts["text_id"].to_pylist(), encoder(name).encode(tables.texts["text"].to_pylist(), "query"))


def summary_values(summary: pl.DataFrame, **where) -> dict[str, float]:
    selected = summary.filter(*(pl.col(column) == value for column, value in where.items()))
    return dict(zip(selected["metric"], selected["value"], strict=True))


def test_multilingual_use_beats_minilm_on_korean_bitext():
    full = load_django_bitext(DjangoBitextDataset(loader="django-bitext", languages=["ko"]))
    pairs = pl.from_arrow(full.pairs).head(80)
    used = set(pairs["text_id_1"]) | set(pairs["text_id_2"])
    texts = full.texts.filter(pl.Series([t in used for t in full.texts["text_id"].to_pylist()]).to_arrow())
    tables = TaskTables("bitext", texts, None, {})
    settings = BitextSettings()
    results = {name: evaluate_bitext(pairs, embed(name, tables), settings, dataset="ko", model=name)
               for name in (MINILM, USE)}
    use = summary_values(results[USE].summary, system="csls", subset="en-ko")
    minilm = summary_values(results[MINILM].summary, system="csls", subset="en-ko")
    assert use["accuracy"] > 0.8 and minilm["accuracy"] < 0.5 and use["f1"] > minilm["f1"]
    # MiniLM has no Korean: its nearest neighbours collapse onto hubs, which CSLS partly undoes.
    minilm_nearest = summary_values(results[MINILM].summary, system="nearest", subset="en-ko")
    assert minilm_nearest["hubness_skew"] > minilm["hubness_skew"]
    compared = compare_bitext(results[MINILM].predictions, results[USE].predictions, n_resamples=1000)
    csls = compared.filter(pl.col("system") == "csls").row(0, named=True)
    assert csls["ci_low"] > 0.2


def test_minilm_orders_lee_document_similarity():
    tables = load_lee()
    vectors = embed(MINILM, tables)
    pairs = pl.from_arrow(tables.pairs)
    values = summary_values(evaluate_sts(pairs, vectors, dataset="lee", model=MINILM).summary)
    # LSI reaches Pearson 0.6 on these pairs (Lee et al. 2005, reproduced by gensim's tests).
    assert 0.3 < values["spearman"] < 0.9 and 0.4 < values["pearson"] < 0.95
    sanity = task_pair_sanity("sts", pairs, vectors, PairSanitySettings())
    assert sanity.auc > 0.75 and sanity.warning is None


def test_minilm_separates_and_clusters_chatterbot_categories():
    tables = load_chatterbot_questions(ChatterbotDataset(loader="chatterbot", task="classification",
                                                         categories=CATEGORIES))
    texts = pl.from_arrow(tables.texts)
    vectors = embed(MINILM, tables)
    majority = texts["label"].value_counts()["count"].max() / texts.height
    classification = evaluate_classification(
        texts, vectors, ClassificationSettings(folds=3, inner_folds=2, seeds=[0], c_grid=[1.0, 100.0]),
        dataset="cats", model=MINILM)
    for system in ("knn", "probe"):
        accuracy = summary_values(classification.summary, system=system)["accuracy"]
        assert majority + 0.2 < accuracy < 1.0
    clustering = evaluate_clustering(texts, vectors, ClusteringSettings(seeds=[0, 1]), dataset="cats", model=MINILM)
    values = summary_values(clustering.summary)
    assert 0.2 < values["v_measure"] < 1.0 and 0.2 < values["ami"] < 1.0 and values["ari"] > 0.05


def test_minilm_finds_duplicate_questions_above_chance():
    tables = load_chatterbot_pairs(ChatterbotDataset(loader="chatterbot", task="pair_classification"),
                                   PairClassificationSettings())
    pairs = pl.from_arrow(tables.pairs)
    vectors = embed(MINILM, tables)
    result = evaluate_pair_classification(pairs, vectors, PairClassificationSettings(), dataset="dup", model=MINILM)
    test = summary_values(result.summary, split="test")
    # Half the test pairs are positive, so chance AP is 0.5.
    assert test["ap"] > 0.7 and result.per_item.height == pairs.filter(pl.col("split") == "test").height
    sanity = task_pair_sanity("pair_classification", pairs, vectors, PairSanitySettings())
    assert sanity.auc > 0.7
    assert np.isfinite(test["threshold"])
