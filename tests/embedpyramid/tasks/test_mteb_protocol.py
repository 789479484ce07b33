"""The ``mteb`` protocol of every L2 family against mteb's own evaluators (mteb 2.26, a test
dependency) on the same vectors and data: their main scores agree to 1e-6.

mteb runs offline here: each task is one of mteb's mock tasks whose ``load_data`` puts these
tests' in-memory data in place, and the "model" is an encoder that returns the vectors of the
texts it is given (no download, no network)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest

mteb = pytest.importorskip("mteb")

from datasets import Dataset, DatasetDict  # noqa: E402
from mteb.mocks.mock_tasks.bitext_mining import MockBitextMiningTask  # noqa: E402
from mteb.mocks.mock_tasks.classification import MockClassificationTask  # noqa: E402
from mteb.mocks.mock_tasks.clustering import LegacyMockClusteringFastTask  # noqa: E402
from mteb.mocks.mock_tasks.pair_classification import MockPairClassificationTask  # noqa: E402
from mteb.mocks.mock_tasks.sts import MockSTSTask  # noqa: E402
from mteb.models.abs_encoder import AbsEncoder  # noqa: E402

from embedpyramid.config.tasks import (  # noqa: E402
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    MtebClassification,
    MtebClustering,
    PairClassificationSettings,
    StsSettings,
)
from embedpyramid.tasks.bitext import evaluate_bitext  # noqa: E402
from embedpyramid.tasks.classification import evaluate_classification  # noqa: E402
from embedpyramid.tasks.clustering import evaluate_clustering  # noqa: E402
from embedpyramid.tasks.pair_classification import evaluate_pair_classification  # noqa: E402
from embedpyramid.tasks.sts import evaluate_sts  # noqa: E402
from embedpyramid.vectors import TextVectors  # noqa: E402

TOLERANCE = 1e-6
ENCODE = {"batch_size": 64}


class LookupEncoder(AbsEncoder):
    """An mteb encoder that returns the given vector of each text (its similarity: cosine or dot)."""

    def __init__(self, vectors: dict[str, np.ndarray], similarity: str = "cosine") -> None:
        self.vectors = vectors
        self.similarity_name = similarity
        self.mteb_model_meta = None

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str, prompt_type: Any = None,
               **kwargs: Any) -> np.ndarray:
        return np.stack([self.vectors[text] for batch in inputs for text in batch["text"]]).astype(np.float32)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        a, b = np.asarray(embeddings1, np.float32), np.asarray(embeddings2, np.float32)
        if self.similarity_name == "cosine":
            a = a / np.linalg.norm(a, axis=1, keepdims=True)
            b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return a @ b.T

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        a, b = np.asarray(embeddings1, np.float32), np.asarray(embeddings2, np.float32)
        if self.similarity_name == "cosine":
            a = a / np.linalg.norm(a, axis=1, keepdims=True)
            b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return (a * b).sum(axis=1)


def _texts(n: int, dim: int = 16, seed: int = 0, centres: np.ndarray | None = None,
           labels: np.ndarray | None = None) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    if centres is not None and labels is not None:
        vectors += centres[labels]
    return [f"text {i:05d}" for i in range(n)], vectors


def _encoder(texts: list[str], vectors: np.ndarray, similarity: str = "cosine") -> LookupEncoder:
    return LookupEncoder(dict(zip(texts, vectors, strict=True)), similarity)


def _run(task: Any, model: LookupEncoder, split: str = "test") -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return task.evaluate(model, split, encode_kwargs=ENCODE)


def _value(summary: pl.DataFrame, system: str, metric: str, split: str | None = None, subset: str = "all") -> float:
    rows = summary.filter((pl.col("system") == system) & (pl.col("metric") == metric) & (pl.col("subset") == subset))
    if split is not None:
        rows = rows.filter(pl.col("split") == split)
    assert rows.height == 1, rows
    return float(rows["value"][0])


def _pairs_setup(n: int, seed: int, gold: np.ndarray, split: str = "test") -> tuple[pl.DataFrame, TextVectors,
                                                                                    list[str], list[str]]:
    texts, vectors = _texts(2 * n, seed=seed)
    # The second text of a pair leans towards the first in proportion to its gold score.
    vectors[n:] = vectors[n:] * 0.8 + vectors[:n] * (np.asarray(gold, np.float32)[:, None] + 0.2)
    pairs = pl.DataFrame({"pair_id": [f"p{i:05d}" for i in range(n)], "text_id_1": texts[:n], "text_id_2": texts[n:],
                          "gold": gold, "split": [split] * n})
    return pairs, TextVectors(texts, vectors), texts[:n], texts[n:]


@pytest.mark.parametrize("similarity", ["cosine", "inner_product"])
def test_sts_main_score_equals_mteb(similarity):
    gold = np.random.default_rng(3).uniform(0, 5, size=120).round(1)
    pairs, vectors, first, second = _pairs_setup(120, 1, gold / 5)
    pairs = pairs.with_columns(pl.Series("gold", gold))
    ours = evaluate_sts(pairs, vectors, StsSettings(protocol="mteb"), dataset="d", model="m", similarity=similarity)

    class Task(MockSTSTask):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": first, "sentence2": second,
                                                                   "score": gold.tolist()})})
            self.data_loaded = True

    model = _encoder(vectors.ids, vectors.vectors, "cosine" if similarity == "cosine" else "dot")
    theirs = _run(Task(), model)["default"]
    assert abs(_value(ours.summary, "cosine", "spearman") - theirs["cosine_spearman"]) < TOLERANCE
    assert abs(_value(ours.summary, "cosine", "pearson") - theirs["cosine_pearson"]) < TOLERANCE
    assert abs(_value(ours.summary, "euclidean", "spearman") - theirs["euclidean_spearman"]) < TOLERANCE
    assert abs(_value(ours.summary, "similarity", "spearman") - theirs["spearman"]) < TOLERANCE
    assert ours.settings["main_score"]["mteb_key"] == "cosine_spearman"


def test_pair_classification_max_ap_equals_mteb():
    gold = (np.random.default_rng(5).uniform(size=150) < 0.4).astype(np.int64)
    pairs, vectors, first, second = _pairs_setup(150, 2, gold)
    # Ties: a few pairs share their texts' vectors, so several scores repeat exactly.
    vectors.vectors[[10, 11, 12]] = vectors.vectors[9]
    vectors.vectors[[160, 161, 162]] = vectors.vectors[159]
    ours = evaluate_pair_classification(pairs, vectors, PairClassificationSettings(protocol="mteb"), dataset="d",
                                        model="m")

    class Task(MockPairClassificationTask):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": first, "sentence2": second,
                                                                   "labels": gold.tolist()})})
            self.data_loaded = True

    theirs = _run(Task(), _encoder(vectors.ids, vectors.vectors))["default"]
    assert abs(_value(ours.summary, "max", "ap") - theirs["max_ap"]) < TOLERANCE
    for scoring in ("cosine", "manhattan", "euclidean", "dot"):
        for metric in ("accuracy", "f1", "precision", "recall", "ap"):
            assert abs(_value(ours.summary, scoring, metric) - theirs[f"{scoring}_{metric}"]) < TOLERANCE, (scoring,
                                                                                                           metric)
    assert abs(_value(ours.summary, "max", "f1") - theirs["max_f1"]) < TOLERANCE
    assert abs(_value(ours.summary, "max", "accuracy") - theirs["max_accuracy"]) < TOLERANCE


def _labelled(n_train: int, n_test: int, n_labels: int, seed: int) -> tuple[pl.DataFrame, TextVectors, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, size=n_train + n_test)
    centres = rng.normal(scale=1.5, size=(n_labels, 16)).astype(np.float32)
    texts, vectors = _texts(n_train + n_test, seed=seed + 1, centres=centres, labels=labels)
    splits = ["train"] * n_train + ["test"] * n_test
    frame = pl.DataFrame({"text_id": texts, "label": [str(label) for label in labels], "split": splits})
    return frame, TextVectors(texts, vectors), labels


def test_classification_accuracy_equals_mteb_undersampled_experiments():
    texts, vectors, labels = _labelled(160, 60, 4, 7)
    settings = ClassificationSettings(protocol="mteb", mteb=MtebClassification(samples_per_label=8, n_experiments=4))
    ours = evaluate_classification(texts, vectors, settings, dataset="d", model="m")
    names = vectors.ids

    class Task(MockClassificationTask):
        samples_per_label = 8
        n_experiments = 4

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({
                "train": Dataset.from_dict({"text": names[:160], "label": labels[:160].tolist()}),
                "test": Dataset.from_dict({"text": names[160:], "label": labels[160:].tolist()}),
            })
            self.data_loaded = True

    theirs = _run(Task(), _encoder(vectors.ids, vectors.vectors))["default"]
    assert abs(_value(ours.summary, "logreg", "accuracy", "test") - theirs["accuracy"]) < TOLERANCE
    assert abs(_value(ours.summary, "logreg", "f1", "test") - theirs["f1"]) < TOLERANCE
    per_experiment = ours.per_seed.filter(pl.col("metric") == "accuracy")["value"].to_list()
    assert per_experiment == pytest.approx([s["accuracy"] for s in theirs["scores_per_experiment"]], abs=TOLERANCE)


def test_classification_accuracy_equals_mteb_cross_validation():
    texts, vectors, labels = _labelled(103, 0, 3, 11)
    settings = ClassificationSettings(protocol="mteb", mteb=MtebClassification(samples_per_label=6))
    ours = evaluate_classification(texts.drop("split"), vectors, settings, dataset="d", model="m")
    names = vectors.ids

    class Task(MockClassificationTask):
        samples_per_label = 6
        is_cross_validation = True

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"train": Dataset.from_dict({"text": names, "label": labels.tolist()})})
            self.data_loaded = True

    theirs = _run(Task(), _encoder(vectors.ids, vectors.vectors), split="train")["default"]
    assert abs(_value(ours.summary, "logreg", "accuracy", "cv") - theirs["accuracy"]) < TOLERANCE


def test_clustering_v_measure_equals_mteb_bootstrap():
    rng = np.random.default_rng(13)
    labels = rng.integers(0, 4, size=90)
    centres = rng.normal(scale=2.0, size=(4, 16)).astype(np.float32)
    names, raw = _texts(90, seed=14, centres=centres, labels=labels)
    texts = pl.DataFrame({"text_id": names, "label": [f"c{label}" for label in labels]})
    settings = ClusteringSettings(protocol="mteb", mteb=MtebClustering(n_draws=3, sample_size=120,
                                                                       max_documents_to_embed=70))
    ours = evaluate_clustering(texts, TextVectors(names, raw), settings, dataset="d", model="m")

    class Task(LegacyMockClusteringFastTask):
        max_document_to_embed = 70
        max_fraction_of_documents_to_embed = None
        n_clusters = 3
        max_documents_per_cluster = 120

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": names,
                                                                   "labels": [f"c{label}" for label in labels]})})
            self.data_loaded = True

    theirs = _run(Task(), _encoder(names, raw))["default"]
    assert abs(_value(ours.summary, "minibatch_kmeans", "v_measure") - theirs["v_measure"]) < TOLERANCE
    assert abs(_value(ours.summary, "minibatch_kmeans", "ami") - theirs["ami"]) < TOLERANCE


@pytest.mark.parametrize("similarity", ["cosine", "inner_product"])
def test_bitext_f1_equals_mteb_with_duplicate_targets(similarity):
    n = 80
    names, raw = _texts(2 * n, seed=21)
    raw[n:] = raw[:n] * 0.6 + raw[n:] * 0.8
    # Duplicate target texts: rows 5-7 translate to the same text as row 4 (MTEB keeps the rows).
    sources, targets = names[:n], names[n:]
    targets = [*targets[:5], targets[4], targets[4], targets[4], *targets[8:]]
    pairs = pl.DataFrame({"pair_id": [f"p{i:04d}" for i in range(n)], "text_id_1": sources, "text_id_2": targets,
                          "language_pair": ["en-xx"] * n})
    vectors = TextVectors(names, raw)
    ours = evaluate_bitext(pairs, vectors, BitextSettings(protocol="mteb"), dataset="d", model="m",
                           similarity=similarity)
    lookup = dict(zip(names, raw, strict=True))

    class Task(MockBitextMiningTask):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": sources, "sentence2": targets})})
            self.data_loaded = True

    model = LookupEncoder(lookup, "cosine" if similarity == "cosine" else "dot")
    theirs = _run(Task(), model)["default"]
    assert abs(_value(ours.summary, "nearest", "f1", subset="en-xx") - theirs["f1"]) < TOLERANCE
    assert abs(_value(ours.summary, "nearest", "accuracy", subset="en-xx") - theirs["accuracy"]) < TOLERANCE
    assert abs(_value(ours.summary, "nearest", "precision", subset="en-xx") - theirs["precision"]) < TOLERANCE


def test_sts_task_saved_to_disk_loads_and_scores_as_mteb_does_on_the_saved_task(tmp_path):
    """The same saved task twice: through ``loader: mteb`` into a frozen dataset evaluated under
    ``protocol: mteb``, and through ``datasets.load_from_disk`` into mteb's own STS evaluator."""
    from datasets import load_from_disk

    from embedpyramid.config import MtebDataset
    from embedpyramid.data import freeze_task_dataset, load_mteb_task
    from embedpyramid.tasks.level import evaluate_task

    gold = np.random.default_rng(8).uniform(0, 5, size=90).round(1)
    names, raw = _texts(180, seed=4)
    raw[90:] = raw[90:] * 0.8 + raw[:90] * (gold[:, None] / 5 + 0.2).astype(np.float32)
    first, second = names[:90], [*names[90:100], names[0], *names[101:]]  # a sentence in two pairs
    DatasetDict({"test": Dataset.from_dict({"sentence1": first, "sentence2": second, "score": gold.tolist()})}
                ).save_to_disk(tmp_path / "task")
    spec = MtebDataset(loader="mteb", task="sts", path=str(tmp_path / "task"), sts={"protocol": "mteb"})
    frozen = freeze_task_dataset("saved", load_mteb_task(tmp_path / "task", spec), tmp_path / "frozen")
    texts = frozen.read("texts")
    lookup = dict(zip(names, raw, strict=True))
    vectors = TextVectors(texts["text_id"].to_pylist(), np.stack([lookup[t] for t in texts["text"].to_pylist()]))
    ours = evaluate_task(spec, frozen, vectors, dataset="saved", model="m")

    class Task(MockSTSTask):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = load_from_disk(str(tmp_path / "task"))
            self.data_loaded = True

    theirs = _run(Task(), LookupEncoder(lookup))["default"]
    assert ours.settings["protocol"] == "mteb" and _value(ours.summary, "cosine", "spearman", "test") == pytest.approx(
        theirs["cosine_spearman"], abs=TOLERANCE)
    assert abs(_value(ours.summary, "cosine", "pearson", "test") - theirs["cosine_pearson"]) < TOLERANCE
    assert abs(_value(ours.summary, "manhattan", "spearman", "test") - theirs["manhattan_spearman"]) < TOLERANCE
