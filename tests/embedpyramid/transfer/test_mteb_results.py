import json
import shutil
from pathlib import Path

import pytest

from embedpyramid.config import MtebResultsImport
from embedpyramid.transfer import METRIC_TABLE, MtebImportError, project_metric, read_mteb_results, select_scores

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "mteb_results"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
USE = "vprelovac/universal-sentence-encoder-multilingual-3"


def spec(**fields) -> MtebResultsImport:
    return MtebResultsImport(**{"path": str(FIXTURE), "task": "SciFact", "models": {"minilm-l6": MINILM},
                                "tolerance": 0.0005, **fields})


@pytest.mark.parametrize(("key", "metric"), [
    ("ndcg_at_10", "nDCG@10"), ("recall_at_1", "Recall@1"), ("mrr_at_10", "MRR@10"), ("map_at_100", "MAP@100"),
    ("precision_at_5", "P@5"), ("cosine_spearman", "Spearman"), ("cos_sim_spearman", "Spearman"),
    ("cosine_pearson", "Pearson"), ("cos_sim_pearson", "Pearson"),
    ("nauc_ndcg_at_10_max", None), ("euclidean_spearman", None), ("ndcg_at_0", None), ("main_score", None),
    ("accuracy", "Accuracy"), ("f1", "F1"), ("v_measure", "V-measure"), ("ami", "AMI"), ("max_ap", "MaxAP"),
    ("max_f1", "MaxF1"), ("max_accuracy", "MaxAccuracy"), ("f1_weighted", None), ("cosine_ap", None),
    ("lrap", "LRAP"), ("hamming", "Hamming"), ("hit_rate_at_10", "Hit@10"),
])
def test_metric_names_map_onto_project_measures(key, metric):
    assert project_metric(key) == metric
    assert len(METRIC_TABLE) == 17


def test_every_family_reads_its_main_score_per_split_and_subset_in_percent_or_fraction(tmp_path):
    folder = tmp_path / "results" / "org__model" / "abc"
    folder.mkdir(parents=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": "org/model", "revision": "abc"}))
    scores = {
        "Banking77Classification": {"test": [{"hf_subset": "default", "languages": ["eng-Latn"], "main_score": 80.28,
                                              "accuracy": 80.28, "f1": 79.5, "f1_weighted": 79.9}]},
        "TwentyNewsgroupsClustering.v2": {"test": [{"hf_subset": "default", "main_score": 0.4622,
                                                    "v_measure": 0.4622, "v_measure_std": 0.01}]},
        "SprintDuplicateQuestions": {"test": [{"hf_subset": "default", "main_score": 0.9455, "max_ap": 0.9455,
                                               "cosine_ap": 0.9455, "max_f1": 0.9}]},
        "Tatoeba": {"test": [{"hf_subset": "deu-eng", "main_score": 0.94, "f1": 0.94, "accuracy": 0.95},
                             {"hf_subset": "fra-eng", "main_score": 0.91, "f1": 0.91, "accuracy": 0.93}]},
    }
    for task, splits in scores.items():
        (folder / f"{task}.json").write_text(json.dumps({"task_name": task, "mteb_version": "2.26.24",
                                                         "scores": splits}))
    expected = {("Banking77Classification", "default"): ("Accuracy", 0.8028, True),
                ("TwentyNewsgroupsClustering.v2", "default"): ("V-measure", 0.4622, False),
                ("SprintDuplicateQuestions", "default"): ("MaxAP", 0.9455, False),
                ("Tatoeba", "fra-eng"): ("F1", 0.91, False)}
    for (task, subset), (metric, value, percent) in expected.items():
        report = read_mteb_results(tmp_path / "results", task=task, subset=subset)
        [main] = [score for score in report.scores if score.main]
        assert (main.metric, main.percent_scale) == (metric, percent)
        assert main.value == pytest.approx(value)


def test_real_layout_gives_the_published_scifact_score_with_its_source():
    report = read_mteb_results(FIXTURE, task="SciFact")
    by_metric = {s.metric: s for s in report.scores if s.model_name == MINILM}
    assert by_metric["nDCG@10"].value == 0.64508 and by_metric["nDCG@10"].main
    assert by_metric["Recall@100"].value == 0.925 and not by_metric["Recall@100"].main
    assert by_metric["MRR@10"].value == 0.6047248677248677
    assert by_metric["nDCG@10"].revision == MINILM_REVISION
    assert by_metric["nDCG@10"].source() == (
        f"MTEB results: {MINILM}@{MINILM_REVISION}, SciFact test/default, ndcg_at_10, mteb 1.12.75 (SciFact.json)")
    # Unknown names are reported with their file, never dropped silently.
    assert sorted(report.unmapped) == ["nauc_map_at_10_diff1", "nauc_ndcg_at_10_max", "nauc_ndcg_at_10_std"]
    # The mteb < 1.11 layout is reported as skipped.
    [(skipped_file, reason)] = report.skipped.items()
    assert "example-org__legacy-layout-model" in skipped_file and "not in the current MTEB results layout" in reason


def test_main_score_is_the_default_and_other_splits_are_reachable():
    [score] = select_scores(read_mteb_results(FIXTURE, task="SciFact"), spec(), FIXTURE)["minilm-l6"]
    assert (score.metric, score.value) == ("nDCG@10", 0.64508)
    train = read_mteb_results(FIXTURE, task="SciFact", split="train")
    [score] = select_scores(train, spec(split="train"), FIXTURE)["minilm-l6"]
    assert score.value == 0.6602


def test_listed_metrics_are_imported_and_missing_ones_named():
    report = read_mteb_results(FIXTURE, task="SciFact")
    chosen = select_scores(report, spec(metrics=["recall@1", "nDCG@10"]), FIXTURE)["minilm-l6"]
    assert [(s.metric, s.value) for s in chosen] == [("Recall@1", 0.48233), ("nDCG@10", 0.64508)]
    with pytest.raises(MtebImportError, match=r"SciFact.json: no score for MRR@5 \(card minilm-l6\); mapped measures"):
        select_scores(report, spec(metrics=["MRR@5"]), FIXTURE)


def test_percent_scale_and_legacy_keys_of_an_external_submission():
    report = read_mteb_results(FIXTURE, task="STSBenchmark")
    selected = select_scores(report, spec(task="STSBenchmark", models={"minilm-l6": MINILM, "use-m3": USE}), FIXTURE)
    [minilm], [use] = selected["minilm-l6"], selected["use-m3"]
    assert (minilm.metric, minilm.value, minilm.percent_scale) == ("Spearman", 0.8203246160625794, False)
    assert (use.metric, use.key, use.percent_scale) == ("Spearman", "cosine_spearman", True)
    assert use.value == pytest.approx(0.8028214972273051, abs=1e-15)
    assert "read as percent" in use.source() and use.revision == "external"
    # List-valued pearson/spearman of mteb 1.12 are not numbers: reported as unmapped.
    assert {"pearson", "spearman", "euclidean_spearman", "manhattan_pearson"} <= set(report.unmapped)


def test_unknown_model_and_ambiguous_revisions_are_errors_naming_what_exists(tmp_path):
    report = read_mteb_results(FIXTURE, task="SciFact")
    with pytest.raises(MtebImportError, match=rf"no result for 'intfloat/e5-small' \(card e5\); found: {MINILM}@"):
        select_scores(report, spec(models={"e5": "intfloat/e5-small"}), FIXTURE)
    folder = tmp_path / "results"
    shutil.copytree(FIXTURE, folder)
    model_dir = folder / "results" / "sentence-transformers__all-MiniLM-L6-v2"
    shutil.copytree(model_dir / MINILM_REVISION, model_dir / "older")
    meta = json.loads((model_dir / "older" / "model_meta.json").read_text())
    (model_dir / "older" / "model_meta.json").write_text(json.dumps({**meta, "revision": "older"}))
    report = read_mteb_results(folder, task="SciFact")
    with pytest.raises(MtebImportError, match=r"several revisions \(8b3219a.*, older\); pin one"):
        select_scores(report, spec(path=str(folder)), folder)
    [score] = select_scores(report, spec(path=str(folder), models={"minilm-l6": f"{MINILM}@older"}), folder)["minilm-l6"]
    assert score.revision == "older"


def test_missing_subset_and_malformed_files_are_reported(tmp_path):
    report = read_mteb_results(FIXTURE, task="SciFact", subset="en")
    assert all("has no subset 'en' (subsets: default)" in r for f, r in report.skipped.items() if "MiniLM" in f)
    broken = tmp_path / "org__model" / "rev"
    broken.mkdir(parents=True)
    (broken / "SciFact.json").write_text("{not json")
    with pytest.raises(MtebImportError, match="SciFact.json: not valid JSON"):
        read_mteb_results(tmp_path, task="SciFact")
