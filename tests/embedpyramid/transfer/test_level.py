import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from task_vectors import merge, pair_vectors, pairs_frame

from embedpyramid.config import ConfigError, has_data, load_config
from embedpyramid.current_inputs import SummaryInputs
from embedpyramid.data import DataError, freeze_dataset, load_configured_dataset, load_squad
from embedpyramid.store import ArtifactStore, write_parquet
from embedpyramid.tasks import tasks_dir, write_task_result
from embedpyramid.tasks.sts import evaluate_sts
from embedpyramid.transfer import (
    CorrelationScores,
    PublishedScore,
    ReproductionContext,
    check_reproduction,
    dataset_references,
)
from embedpyramid.transfer.level import (
    analyse_transfer,
    check_summary,
    evaluate_transfer,
    read_transfer,
    report_sections,
    reproduce_model,
    sts_scores,
    transfer_dir,
    transfer_verdicts,
    transfer_views,
    write_level,
    write_reproduction,
    write_transfer,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def reference(model: str, value: float, metric: str = "nDCG@10", tolerance: float = 0.0005) -> dict:
    return {"model": model, "metric": metric, "value": value, "tolerance": tolerance, "source": "a paper, table 2"}


def test_default_config_marks_the_embedded_data_as_own():
    config = load_config(Path(__file__).resolve().parents[3] / "configs")
    assert {name: spec.role for name, spec in config.datasets.items()} == {"chatterbot-en": "own"}
    assert all(not spec.reference and spec.mteb_results is None for spec in config.datasets.values())
    # Lee's corpus is the public benchmark the transfer analysis compares chatterbot-en with.
    assert config.task_dataset("lee-sts").role == "public" and not config.task_dataset("lee-sts").reference


@pytest.mark.parametrize(("entry", "message"), [
    ({"reference": [reference("e5", 0.5)]},
     r"datasets.yaml:\d+: datasets.mine.reference\[0\].model: 'e5' is not a card in models.yaml; allowed: minilm-l6, "
     r"use-m3"),
    ({"reference": [reference("minilm-l6", 0.5, metric="NDCG10")]}, r"unknown measure 'NDCG10'"),
    ({"reference": [reference("minilm-l6", 0.5), reference("minilm-l6", 0.6, metric="ndcg@10")]},
     r"two references for model 'minilm-l6' and nDCG@10; keep one"),
    ({"reference": [reference("minilm-l6", 0.5, tolerance=-1)]}, r"reference.0.tolerance: Input should be greater"),
    ({"role": "benchmark"}, r"datasets.mine\S*.role: Input should be 'public' or 'own'"),
    ({"confirmatory_metric": "F1"}, r"unknown measure 'F1'"),
    ({"mteb_results": {"path": "nowhere", "task": "SciFact", "models": {"minilm-l6": MINILM}, "tolerance": 0.001}},
     r"datasets.mine.mteb_results.path: folder .*nowhere does not exist"),
    ({"mteb_results": {"path": str(FIXTURES / "mteb_results"), "task": "SciFact", "models": {"e5": "x"}, "tolerance": 0}},
     r"datasets.mine.mteb_results.models.e5: 'e5' is not a card"),
])
def test_reference_errors_name_the_file_and_key(write_configs, entry, message):
    folder = write_configs(datasets={"mine": {"loader": "chatterbot", **entry}})
    with pytest.raises(ConfigError, match=message):
        load_config(folder)


@pytest.mark.parametrize(("entry", "message"), [
    ({"loader": "published"}, r"a published dataset needs published scores"),
    ({"loader": "published", "role": "own", "reference": [reference("minilm-l6", 0.5)]},
     r"datasets.bench\S*.role: Input should be 'public'"),
    ({"loader": "squad", "path": "missing.json"}, r"datasets.bench.path: file .*missing.json does not exist"),
])
def test_published_and_squad_entries_are_validated(write_configs, entry, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write_configs(datasets={"bench": entry}))


def test_typed_and_imported_references_form_one_list(write_configs):
    mteb = {"path": str(FIXTURES / "mteb_results"), "task": "SciFact", "models": {"minilm-l6": MINILM},
            "metrics": ["nDCG@10", "Recall@100"], "tolerance": 0.0005}
    config = load_config(write_configs(datasets={"scifact": {
        "loader": "published", "reference": [reference("use-m3", 0.5, metric="ndcg@10")], "mteb_results": mteb}}))
    references = dataset_references(config, "scifact")
    assert [(s.model, s.metric, s.value) for s in references.scores] == [
        ("use-m3", "nDCG@10", 0.5), ("minilm-l6", "nDCG@10", 0.64508), ("minilm-l6", "Recall@100", 0.925)]
    assert references.scores[0].origin.endswith("datasets.yaml")
    assert references.scores[1].origin.endswith("SciFact.json") and references.scores[1].tolerance == 0.0005
    assert references.mteb_import["unmapped"] == ["nauc_map_at_10_diff1", "nauc_ndcg_at_10_max", "nauc_ndcg_at_10_std"]
    assert references.frame().height == 3
    clashing = load_config(write_configs("clash", datasets={"scifact": {
        "loader": "published", "reference": [reference("minilm-l6", 0.6451)], "mteb_results": mteb}}))
    with pytest.raises(ConfigError, match=r"two published nDCG@10 scores for minilm-l6: 0.6451 \(.*datasets.yaml\) "
                                          r"and 0.64508 \(.*SciFact.json\); keep one"):
        dataset_references(clashing, "scifact")


def per_query(config, dataset: str, means: dict[str, list[float]], metric: str = "nDCG@10") -> pl.DataFrame:
    rows = [(dataset, config.models[card].key, "exact", f"q{i}", metric, value)
            for card, values in means.items() for i, value in enumerate(values)]
    return pl.DataFrame(rows, schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row")


def test_published_numbers_stand_in_for_a_public_dataset_not_on_disk(write_configs, two_real_models, tmp_path):
    config = load_config(write_configs(models=two_real_models, datasets={
        "mine": {"loader": "chatterbot", "categories": ["ai"]},
        "bench": {"loader": "published", "reference": [reference("minilm-l6", 0.64508), reference("use-m3", 0.61)]},
        "later": {"loader": "chatterbot", "categories": ["food"], "role": "public"},
        "sts": {"loader": "chatterbot", "categories": ["science"], "role": "public", "confirmatory_metric": "Spearman"},
    }))
    values = per_query(config, "mine", {"minilm-l6": [0.2, 0.4, 0.3], "use-m3": [0.5, 0.6, 0.4]})
    result = analyse_transfer(config, values)
    assert result.settings["skipped_datasets"] == {
        "later": "no per-query values yet (the dataset has not been evaluated)",
        "sts": "Spearman is computed over all items: pass its CorrelationScores as prepared"}
    bench = result.rankings.filter(pl.col("dataset") == "bench")
    assert bench.select("model", "score", "rank", "source").rows() == [
        (config.models["minilm-l6"].key, 0.64508, 1.0, "published"), (config.models["use-m3"].key, 0.61, 2.0, "published")]
    pair = result.pairs.row(0, named=True)
    assert (pair["public_dataset"], pair["own_dataset"], pair["n_flips"], pair["p_same_winner"]) == ("bench", "mine", 1, 0.0)
    assert [name for name, spec in config.datasets.items() if not has_data(spec)] == ["bench"]
    with pytest.raises(DataError, match="dataset 'bench' is published scores only"):
        load_configured_dataset(config, "bench")
    assert result.settings["n_resamples"] == config.protocol.comparison.n_resamples

    prepared = CorrelationScores("sts", "Spearman", "public", tuple(m.key for m in config.models.values()),
                                 ("a", "b", "c"), np.array([[0.1, 0.9], [0.5, 0.5], [0.9, 0.1]]), np.array([1.0, 2.0, 3.0]))
    with_sts = analyse_transfer(config, values, prepared={"sts": prepared})
    assert with_sts.pairs["public_dataset"].to_list() == ["bench", "sts"]

    directory = transfer_dir(ArtifactStore(tmp_path / "data"))
    write_transfer(result, directory)
    back = read_transfer(directory)
    assert back.pairs.equals(result.pairs) and back.flips.equals(result.flips) and back.rankings.equals(result.rankings)
    assert back.settings["skipped_datasets"] == result.settings["skipped_datasets"]


def test_published_dataset_with_several_measures_needs_a_confirmatory_metric(write_configs):
    scores = [reference("minilm-l6", 0.64508), reference("minilm-l6", 0.48233, metric="Recall@1")]
    config = load_config(write_configs(datasets={"mine": {"loader": "chatterbot"},
                                                 "bench": {"loader": "published", "reference": scores}}))
    with pytest.raises(ConfigError, match=r"datasets.bench: published scores for several measures \(Recall@1, nDCG@10\)"):
        analyse_transfer(config, per_query(config, "mine", {"minilm-l6": [0.1]}))
    config = load_config(write_configs("chosen", datasets={
        "mine": {"loader": "chatterbot"}, "bench": {"loader": "published", "reference": scores,
                                                    "confirmatory_metric": "recall@1"}}))
    rankings = analyse_transfer(config, per_query(config, "mine", {"minilm-l6": [0.1]})).rankings
    assert rankings.filter(pl.col("dataset") == "bench")["score"].to_list() == [0.48233]


def test_reproduce_model_reads_prompts_conventions_and_titles(write_configs, tmp_path):
    folder = write_configs(datasets={"squad-mini": {"loader": "squad", "path": str(FIXTURES / "squad" / "squad-v2-mini.json"),
                                                    "role": "public", "reference": [reference("minilm-l6", 0.79, "Recall@1", 0.01)]}})
    config = load_config(folder)
    model = config.models["minilm-l6"]
    corpus = load_squad(FIXTURES / "squad" / "squad-v2-mini.json", config.datasets["squad-mini"]).corpus
    conventions = config.protocol.conventions(config.dataset("squad-mini")).as_dict()
    values = per_query(config, "squad-mini", {"minilm-l6": [1.0, 1.0, 0.0, 1.0]}, metric="Recall@1")
    [check] = reproduce_model(config, "squad-mini", model, values, conventions=conventions, corpus=corpus)
    assert (check.status, check.measured, check.model_key) == ("fail", 0.75, model.key)
    assert 'document text (title + " " + text for 0 of 5 documents' in check.message
    assert reproduce_model(config, "squad-mini", config.models["use-m3"], values, conventions=conventions,
                           corpus=corpus) == []
    target = write_reproduction([check], tmp_path / "reproduction.parquet")
    assert pl.read_parquet(target)["status"].to_list() == ["fail"]


def test_sts_results_on_disk_rank_the_models_and_join_the_transfer(write_configs, two_real_models, tmp_path):
    """STS task results (as the L2 asset writes them) become Spearman rankings over their items;
    a dataset without results is left out with the reason; verdicts and report sections follow."""
    config = load_config(write_configs(models=two_real_models, datasets={
        "mine": {"loader": "chatterbot", "categories": ["ai"]},
        "sts": {"loader": "gensim-lee", "role": "public"},
        "sts-later": {"loader": "gensim-lee", "role": "public"}}))
    store = ArtifactStore(tmp_path / "data")
    gold = [1.0, 2.0, 3.0, 4.0]
    # minilm-l6's cosines follow the gold order exactly; use-m3's reverse two of them.
    cosines = {"minilm-l6": [0.1, 0.2, 0.3, 0.4], "use-m3": [0.1, 0.3, 0.2, 0.4]}
    for card, values in cosines.items():
        key = config.models[card].key
        result = evaluate_sts(pairs_frame(gold), merge(pair_vectors(values)), dataset="sts", model=key)
        write_task_result(result, tasks_dir(store, "sts", key))
    prepared, skipped = sts_scores(config, store, SummaryInputs())
    assert skipped == {"sts-later": "no STS results yet (the task_sts asset has not evaluated it)"}
    scores = prepared["sts"]
    assert (scores.metric, scores.role, scores.n_items) == ("Spearman", "public", 4)
    assert dict(zip(scores.models, scores.observed.round(6), strict=True)) == {
        config.models["minilm-l6"].key: 1.0, config.models["use-m3"].key: 0.8}

    freeze_dataset("mine", load_configured_dataset(config, "mine"), store.dataset_dir("mine"))
    metrics = {}
    for card, values in {"minilm-l6": [0.2, 0.4, 0.3], "use-m3": [0.5, 0.6, 0.4]}.items():
        key = config.models[card].key
        metrics[("mine", key)] = tmp_path / f"{card}.parquet"
        table = per_query(config, "mine", {card: values}).to_arrow()
        write_parquet(table.replace_schema_metadata({"embedpyramid": json.dumps({"conventions": {}})}),
                      metrics[("mine", key)])
    level = evaluate_transfer(config, store, metrics, inputs=SummaryInputs())
    assert level.transfer.settings["skipped_datasets"] == skipped and level.reproduction == []
    pair = level.transfer.pairs.row(0, named=True)
    assert (pair["public_dataset"], pair["own_dataset"], pair["n_flips"]) == ("sts", "mine", 1)
    [verdict] = transfer_verdicts(level.transfer)
    assert verdict.startswith("sts (public, Spearman) vs mine (own, nDCG@10), 2 models: the public ranking does not "
                              "hold: a different model wins on your data")
    assert "pairwise agreement 0%; 1 flipped model pair(s)" in verdict and "not informative" in verdict

    directory = write_level(level, transfer_dir(store))
    assert set(transfer_views(store)) == {"transfer_rankings", "transfer_pairs", "transfer_flips", "reproduction",
                                          "references"}
    reproduction, transfer = report_sections(directory)
    assert reproduction.title == "Reproduction" and "No dataset in datasets.yaml carries a published score" in reproduction.intro
    assert transfer.title == "Transfer" and verdict in transfer.intro and "sts-later: no STS results yet" in transfer.intro
    assert [caption for caption, _ in transfer.tables] == ["Rankings per dataset", "Public × own pairs",
                                                           "Model pairs on both sides"]


def test_check_summary_counts_every_status():
    assert check_summary([]) == (True, "no published score for this model on this dataset: nothing to reproduce")
    context = ReproductionContext("", "", None, None, {})
    score = PublishedScore("d", "m", "nDCG@10", 0.5, 0.01, "a paper", "datasets.yaml")
    checks = [check_reproduction(score, measured, model_key="m@1", n_items=3, context=context)
              for measured in (0.505, 0.6, None)]
    assert [c.status for c in checks] == ["pass", "fail", "not measured"]
    assert check_summary(checks) == (False, "1 of 3 published scores reproduced, 1 fail, 1 not measured")
    assert check_summary(checks[:1]) == (True, "1 of 1 published scores reproduced")
