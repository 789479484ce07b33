"""Published scores on task datasets: checked against each family's whole-set statistic under the
protocol they were published with (a passing and a failing case per family), and refused at
load when the dataset cannot check them."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from embedpyramid.config import ConfigError, load_config
from embedpyramid.config.tasks import (
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    MtebClassification,
    MtebClustering,
    PairClassificationSettings,
    StsSettings,
)
from embedpyramid.current_inputs import SummaryInputs
from embedpyramid.store import ArtifactStore
from embedpyramid.tasks import tasks_dir, write_task_result
from embedpyramid.tasks.bitext import evaluate_bitext
from embedpyramid.tasks.classification import evaluate_classification
from embedpyramid.tasks.clustering import evaluate_clustering
from embedpyramid.tasks.pair_classification import evaluate_pair_classification
from embedpyramid.tasks.sts import evaluate_sts
from embedpyramid.transfer.level import evaluate_transfer
from embedpyramid.transfer.task_reproduction import task_reproduction
from embedpyramid.vectors import TextVectors


def _vectors(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    return [f"t{i:04d}" for i in range(n)], np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)


def _pairs(n: int, gold: np.ndarray, **columns: Any) -> tuple[pl.DataFrame, TextVectors]:
    ids, raw = _vectors(2 * n, 1)
    raw[n:] = raw[n:] * 0.7 + raw[:n] * (np.asarray(gold, np.float32)[:, None] + 0.3)
    frame = pl.DataFrame({"pair_id": [f"p{i:04d}" for i in range(n)], "text_id_1": ids[:n], "text_id_2": ids[n:],
                          "gold": gold, **columns})
    return frame, TextVectors(ids, raw)


def _labelled(n: int, split: bool) -> tuple[pl.DataFrame, TextVectors]:
    ids, raw = _vectors(n, 2)
    labels = np.arange(n) % 3
    raw[:, :3] += 2.0 * np.eye(3, dtype=np.float32)[labels]
    columns = {"split": ["train" if i < n * 2 // 3 else "test" for i in range(n)]} if split else {}
    return pl.DataFrame({"text_id": ids, "label": [f"c{label}" for label in labels], **columns}), TextVectors(ids, raw)


def _result(family: str, key: str):
    gold01 = (np.arange(60) % 3 == 0).astype(np.int64)
    if family == "sts":
        pairs, vectors = _pairs(60, np.linspace(0, 1, 60), split=["test"] * 60)
        return evaluate_sts(pairs, vectors, StsSettings(protocol="mteb"), dataset="d", model=key)
    if family == "pair_classification":
        pairs, vectors = _pairs(60, gold01, split=["test"] * 60)
        return evaluate_pair_classification(pairs, vectors, PairClassificationSettings(protocol="mteb"), dataset="d",
                                            model=key)
    if family == "classification":
        texts, vectors = _labelled(90, split=True)
        settings = ClassificationSettings(protocol="mteb", mteb=MtebClassification(n_experiments=2))
        return evaluate_classification(texts, vectors, settings, dataset="d", model=key)
    if family == "clustering":
        texts, vectors = _labelled(60, split=False)
        settings = ClusteringSettings(protocol="mteb", mteb=MtebClustering(n_draws=2, sample_size=64))
        return evaluate_clustering(texts, vectors, settings, dataset="d", model=key)
    pairs, vectors = _pairs(40, np.ones(40), language_pair=["en-de"] * 40)
    return evaluate_bitext(pairs.drop("gold"), vectors, BitextSettings(protocol="mteb"), dataset="d", model=key)


ENTRIES = {
    "sts": ({"loader": "gensim-lee", "sts": {"protocol": "mteb"}}, "Spearman", ("cosine", "spearman")),
    "pair_classification": ({"loader": "chatterbot", "task": "pair_classification",
                             "pair_classification": {"protocol": "mteb"}}, "MaxAP", ("max", "ap")),
    "classification": ({"loader": "gensim-newsgroups", "task": "classification",
                        "classification": {"protocol": "mteb", "mteb": {"n_experiments": 2}}}, "Accuracy",
                       ("logreg", "accuracy")),
    "clustering": ({"loader": "gensim-newsgroups", "task": "clustering",
                    "clustering": {"protocol": "mteb", "mteb": {"n_draws": 2, "sample_size": 64}}}, "V-measure",
                   ("minibatch_kmeans", "v_measure")),
    "bitext": ({"loader": "django-bitext", "languages": ["de"], "bitext": {"protocol": "mteb"}}, "F1",
               ("nearest", "f1")),
}


def _reference(model: str, metric: str, value: float, **extra: Any) -> dict[str, Any]:
    return {"model": model, "metric": metric, "value": value, "tolerance": 0.001, "source": "MTEB leaderboard",
            **extra}


STOCHASTIC = {"classification", "clustering"}
"""The families above whose MTEB protocol draws at random: judged against their measured spread."""


@pytest.mark.parametrize("family", list(ENTRIES))
def test_a_published_task_score_passes_or_fails_and_names_the_causes(family, write_configs, two_real_models,
                                                                     tmp_path):
    entry, metric, (system, statistic) = ENTRIES[family]
    keys = {card: model.key for card, model in load_config(write_configs("keys", models=two_real_models)).models.items()}
    store = ArtifactStore(tmp_path / "data")
    measured, spread = {}, {}
    for card, key in keys.items():
        result = _result(family, key)
        write_task_result(result, tasks_dir(store, "bench", key))
        row = result.summary.filter((pl.col("system") == system) & (pl.col("metric") == statistic))
        measured[card] = float(row["value"][0])
        spread[card] = result.settings["noise"]["spread"][statistic] if family in STOCHASTIC else None
    minilm, use = sorted(keys)
    if family in STOCHASTIC:
        # One spread off passes within two spreads; three spreads off fails.
        rule = {"tolerance": None, "spread_multiple": 2}
        offsets = {minilm: spread[minilm], use: -3 * spread[use]}
        assert all(0 < value < 1 for value in spread.values())
    else:
        rule, offsets = {}, {minilm: 0.0004, use: -0.05}
    references = [_reference(minilm, metric, measured[minilm] + offsets[minilm], protocol="mteb", **rule),
                  _reference(use, metric, measured[use] + offsets[use], **rule)]
    config = load_config(write_configs(models=two_real_models, datasets={
        "mine": {"loader": "chatterbot", "categories": ["ai"]}, "bench": {**entry, "reference": references}}))
    passed, failed = task_reproduction(config, store, SummaryInputs())
    assert (passed.status, failed.status) == ("pass", "fail")
    assert passed.measured == pytest.approx(measured[minilm]) and failed.difference == pytest.approx(-offsets[use])
    assert "reproduced" in passed.message and "protocol mteb (mteb 2.26)" in failed.message
    assert f"the card's similarity {config.models[use].similarity}" in failed.message
    if family in STOCHASTIC:
        assert (passed.rule, passed.spread, passed.spread_multiple, passed.noise_runs) == ("noise", spread[minilm], 2, 5)
        assert failed.tolerance == pytest.approx(2 * spread[use])  # the bound it was held to
        assert f"(2 × the spread {spread[use]:.4g} over 5 runs of the protocol)" in failed.message
    else:
        assert (passed.rule, passed.tolerance, passed.spread) == ("tolerance", 0.001, None)
    level = evaluate_transfer(config, store, {}, inputs=SummaryInputs())
    assert [check.status for check in level.reproduction] == ["pass", "fail"]
    assert level.references.filter(pl.col("dataset") == "bench").height == 2


def test_a_task_score_without_a_current_result_is_not_measured(write_configs, two_real_models, tmp_path):
    entry, metric, _ = ENTRIES["sts"]
    card = next(iter(two_real_models))
    config = load_config(write_configs(models=two_real_models, datasets={
        "mine": {"loader": "chatterbot", "categories": ["ai"]},
        "bench": {**entry, "reference": [_reference(card, metric, 0.82032)]}}))
    [check] = task_reproduction(config, ArtifactStore(tmp_path / "data"), SummaryInputs())
    assert check.status == "not measured" and "no current task_sts result" in check.message


@pytest.mark.parametrize(("entry", "message"), [
    ({"loader": "gensim-lee", "reference": [_reference("minilm-l6", "V-measure", 0.5)]},
     r"V-measure is not a statistic the sts family computes under protocol 'project'; allowed: Spearman, Pearson"),
    ({"loader": "gensim-lee", "reference": [_reference("minilm-l6", "Spearman", 0.82, protocol="mteb")]},
     r"published under protocol 'mteb' but the dataset is evaluated under 'project': set sts.protocol: mteb"),
    ({"loader": "gensim-newsgroups", "reference": [_reference("minilm-l6", "Accuracy", 0.9)]},
     r"no published classification score can be checked under protocol 'project'"),
    ({"loader": "gensim-newsgroups", "task": "clustering", "clustering": {"protocol": "mteb"},
      "reference": [_reference("minilm-l6", "V-measure", 0.5, split="dev", tolerance=None, spread_multiple=2)]},
     r"split 'dev' is not one the clustering family reports under protocol 'mteb'; allowed: all, test"),
    ({"loader": "gensim-lee", "reference": [_reference("minilm-l6", "Spearman", 0.8, subset="en-de")]},
     r"subset 'en-de': this entry has no subsets"),
    ({"loader": "gensim-newsgroups", "task": "clustering", "clustering": {"protocol": "mteb"},
      "reference": [_reference("minilm-l6", "V-measure", 0.5)]},
     r"clustering under protocol 'mteb' draws at random, so a published score passes within spread_multiple × the "
     r"spread its noise seeds measure: set spread_multiple \(e.g. 2\) instead of tolerance"),
    ({"loader": "gensim-lee", "reference": [_reference("minilm-l6", "Spearman", 0.8, spread_multiple=2)]},
     r"sts under protocol 'project' is deterministic, so a published score passes within a fixed tolerance: set "
     r"tolerance \(e.g. 0.0005\) instead of spread_multiple"),
    ({"loader": "gensim-newsgroups", "task": "clustering",
      "clustering": {"protocol": "mteb", "mteb": {"noise_seeds": 0}},
      "reference": [_reference("minilm-l6", "V-measure", 0.5, tolerance=None, spread_multiple=2)]},
     r"a published clustering score is judged against the spread of the protocol over its seeds, and this entry "
     r"measures none: set clustering.mteb.noise_seeds to 1 or more"),
    ({"loader": "gensim-newsgroups", "task": "clustering", "clustering": {"seeds": [0]},
      "reference": [_reference("minilm-l6", "V-measure", 0.5, tolerance=None, spread_multiple=2)]},
     r"measures none: clustering.seeds needs at least two seeds"),
    ({"loader": "django-bitext", "languages": ["de"], "bitext": {"protocol": "mteb"},
      "reference": [_reference("minilm-l6", "F1", 0.8, subset="en-de"), _reference("minilm-l6", "F1", 0.7,
                                                                                   subset="en-de", split="test")]},
     r"two references for model 'minilm-l6' and F1, subset 'en-de'; keep one"),
    ({"loader": "chatterbot", "reference": [_reference("minilm-l6", "Spearman", 0.8)]},
     r"Spearman is not a retrieval measure"),
    ({"loader": "gensim-lee", "reference": [_reference("minilm-l6", "Kappa", 0.8)]}, r"unknown measure 'Kappa'"),
])
def test_a_reference_the_dataset_cannot_check_is_refused_at_load(write_configs, two_real_models, entry, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write_configs(models=two_real_models, datasets={"bench": entry}))


def test_mteb_results_on_a_project_protocol_task_dataset_are_refused(write_configs, two_real_models, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    entry = {"loader": "gensim-lee", "mteb_results": {"path": str(folder), "task": "STSBenchmark",
                                                      "models": {"minilm-l6": "x/y"}, "tolerance": 0.001}}
    with pytest.raises(ConfigError, match=r"MTEB scores follow MTEB's protocol .* set sts.protocol: mteb"):
        load_config(write_configs(models=two_real_models, datasets={"bench": entry}))


def test_references_are_kept_per_subset_and_checked_against_the_subset_the_dataset_reads(write_configs,
                                                                                       two_real_models, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from embedpyramid.data import freeze_task_dataset, load_task_dataset
    from embedpyramid.tasks.level import evaluate_task

    card = sorted(two_real_models)[0]
    # A bitext dataset's language pairs each carry their own published F1.
    pairs = load_config(write_configs("bitext", models=two_real_models, datasets={"tatoeba": {
        "loader": "django-bitext", "languages": ["de", "fr"], "bitext": {"protocol": "mteb"},
        "reference": [_reference(card, "F1", 0.9, subset="en-de"), _reference(card, "F1", 0.8, subset="en-fr")]}}))
    assert [r.subset for r in pairs.task_dataset("tatoeba").reference] == ["en-de", "en-fr"]
    # A multilingual MTEB task read one subset at a time: a score for another subset is refused at load...
    folder = tmp_path / "sts17"
    for subset in ("de", "fr"):
        (folder / subset).mkdir(parents=True)
        pq.write_table(pa.table({"sentence1": [f"{subset} a{i}" for i in range(30)],
                                 "sentence2": [f"{subset} b{i}" for i in range(30)],
                                 "score": [float(i % 6) for i in range(30)]}), folder / subset / "test.parquet")
    entry = {"loader": "mteb", "task": "sts", "path": str(folder), "subset": "de", "sts": {"protocol": "mteb"}}
    with pytest.raises(ConfigError, match=r"reference\[0\] \(.*, Spearman\): published for subset 'fr' but the entry "
                                          r"reads subset 'de'; add an entry for subset 'fr' and give the score there"):
        load_config(write_configs("refused", models=two_real_models, datasets={
            "sts17": {**entry, "reference": [_reference(card, "Spearman", 0.8, subset="fr")]}}))
    # ... and checked against the result of the subset it reads.
    config = load_config(write_configs(models=two_real_models, datasets={"sts17": {**entry, "reference": [
        _reference(card, "Spearman", 0.5, subset="de", tolerance=1.0)]}}))
    store = ArtifactStore(tmp_path / "data")
    frozen = freeze_task_dataset("sts17", load_task_dataset(config, "sts17"), store.dataset_dir("sts17"))
    texts = frozen.read("texts")
    vectors = TextVectors(texts["text_id"].to_pylist(), np.random.default_rng(3).normal(size=(texts.num_rows, 8)))
    model = config.models[card]
    result = evaluate_task(config.task_dataset("sts17"), frozen, vectors, dataset="sts17", model=model.key)
    write_task_result(result, tasks_dir(store, "sts17", model.key))
    [check] = task_reproduction(config, store, SummaryInputs())
    assert check.status == "pass" and check.measured == pytest.approx(
        result.summary.filter((pl.col("system") == "cosine") & (pl.col("metric") == "spearman"))["value"][0])
    # An entry that names no subset reads the data's only one; a score for another is not measured.
    only = tmp_path / "sts17-de"
    (only / "de").mkdir(parents=True)
    (only / "de" / "test.parquet").write_bytes((folder / "de" / "test.parquet").read_bytes())
    unnamed = {key: value for key, value in entry.items() if key != "subset"}
    config = load_config(write_configs("unnamed", models=two_real_models, datasets={"sts17": {
        **unnamed, "path": str(only), "reference": [_reference(card, "Spearman", 0.5, subset="fr", tolerance=1.0)]}}))
    [check] = task_reproduction(config, store, SummaryInputs())
    assert check.status == "not measured" and ("the score is for subset 'fr' but the dataset reads subset 'de'"
                                               in check.message)
