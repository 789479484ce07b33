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


# Clustering per MTEB task version: the items each v2 task clusters (flattened sets and a stratified
# subsample, or deduplicated sets), read by ``loader: mteb`` from v1 sets with repeated sentences.

def _v1_sets(n_sets: int, per_set: int, pool: int, seed: int) -> tuple[list[list[str]], list[list[str]], dict[str, np.ndarray]]:
    """Rows of sets of sentences drawn from a pool with replacement (so sentences repeat within and
    across sets), each sentence with one label and a vector near its label's centre."""
    rng = np.random.default_rng(seed)
    labels = [f"topic{k % 7}" for k in range(pool)]
    centres = rng.normal(scale=1.5, size=(7, 16)).astype(np.float32)
    vectors = {f"sentence {k:04d}": (rng.normal(size=16) + centres[k % 7]).astype(np.float32) for k in range(pool)}
    draws = [rng.integers(0, pool, size=per_set) for _ in range(n_sets)]
    return ([[f"sentence {k:04d}" for k in draw] for draw in draws], [[labels[k] for k in draw] for draw in draws],
            vectors)


def _clustering_through_the_loader(tmp_path, sentences, labels, vectors, mteb_settings: dict) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from embedpyramid.config import MtebDataset
    from embedpyramid.data import load_mteb_task

    folder = tmp_path / "clustering"
    folder.mkdir()
    pq.write_table(pa.table({"sentences": sentences, "labels": labels}), folder / "test.parquet")
    settings = {"protocol": "mteb", "mteb": {"noise_seeds": 0, **mteb_settings}}
    spec = MtebDataset(loader="mteb", task="clustering", path=str(folder), clustering=settings)
    tables = load_mteb_task(folder, spec)
    texts = pl.from_arrow(tables.texts)
    text_vectors = TextVectors(texts["text_id"].to_list(), np.stack([vectors[t] for t in texts["text"]]))
    result = evaluate_clustering(texts.select("text_id", "label"), text_vectors, spec.task_settings, dataset="d",
                                 model="m")
    return tables, result


def test_clustering_v2_that_flattens_and_subsamples_equals_mteb_reddit_v2(tmp_path):
    from mteb.tasks.clustering.eng.reddit_clustering import RedditFastClusteringS2S

    sentences, labels, vectors = _v1_sets(n_sets=12, per_set=230, pool=1500, seed=31)  # 2,760 items, repeats
    assert len({s for row in sentences for s in row}) < sum(map(len, sentences))
    tables, ours = _clustering_through_the_loader(tmp_path, sentences, labels, vectors, {
        "sets": "flatten", "stratified_subsample": 2048, "n_draws": 3, "sample_size": 1024})

    class Task(RedditFastClusteringS2S):
        n_clusters = 3
        max_documents_per_cluster = 1024

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": sentences, "labels": labels})})
            self.dataset_transform()
            self.data_loaded = True

    task = Task()
    task.load_data()
    # The same 2,048 items in the same order as mteb's stratified subsample of the flattened sets.
    assert pl.from_arrow(tables.texts)["text"].to_list() == task.dataset["test"]["sentences"]
    assert tables.source["items"]["stratified_subsample"] == {"size": 2048, "seed": 42, "from": 2760}
    theirs = _run(task, _encoder(list(vectors), np.stack(list(vectors.values()))))["default"]
    assert abs(_value(ours.summary, "minibatch_kmeans", "v_measure") - theirs["v_measure"]) < TOLERANCE
    assert abs(_value(ours.summary, "minibatch_kmeans", "ami") - theirs["ami"]) < TOLERANCE
    assert ours.settings["mteb"]["stratified_subsample"] == 2048 and ours.settings["mteb"]["subsample_seed"] == 42


def test_clustering_v2_that_deduplicates_equals_mteb_ten_k_gnad(tmp_path):
    from mteb.tasks.clustering.deu.ten_k_gnad_clustering_s2s import TenKGnadClusteringS2SFast

    sentences, labels, vectors = _v1_sets(n_sets=6, per_set=120, pool=400, seed=32)
    tables, ours = _clustering_through_the_loader(tmp_path, sentences, labels, vectors, {
        "sets": "deduplicate", "max_documents_to_embed": 10267, "n_draws": 3, "sample_size": 512})

    class Task(TenKGnadClusteringS2SFast):
        n_clusters = 3
        max_documents_per_cluster = 512

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": sentences, "labels": labels})})
            self.dataset_transform()
            self.data_loaded = True

    task = Task()
    task.load_data()
    assert pl.from_arrow(tables.texts)["text"].to_list() == task.dataset["test"]["sentences"]  # first occurrences
    assert tables.source["items"]["duplicates_dropped"] == 720 - len(task.dataset["test"]) > 0
    theirs = _run(task, _encoder(list(vectors), np.stack(list(vectors.values()))))["default"]
    assert abs(_value(ours.summary, "minibatch_kmeans", "v_measure") - theirs["v_measure"]) < TOLERANCE
    assert abs(_value(ours.summary, "minibatch_kmeans", "ami") - theirs["ami"]) < TOLERANCE


def test_deduplicated_cap_single_item_labels_and_the_stratified_sample_follow_mteb():
    import pyarrow as pa
    from mteb.abstasks.abstask import AbsTask
    from mteb.abstasks.clustering import _convert_to_fast

    from embedpyramid.data.mteb_files import clustering_items, stratified_subsample

    sentences, labels, _ = _v1_sets(n_sets=4, per_set=60, pool=150, seed=33)
    v1 = DatasetDict({"test": Dataset.from_dict({"sentences": sentences, "labels": labels})})
    capped = _convert_to_fast(v1, "sentences", "labels", seed=42, max_size=50)["test"]
    settings = ClusteringSettings(mteb=MtebClustering(sets="deduplicate", deduplicated_max=50))
    items, done = clustering_items(pa.table({"sentences": sentences, "labels": labels}), "sentences", "labels", [],
                                   settings, "here")
    assert items["sentences"].to_pylist() == capped["sentences"] and done["deduplicated_sample"]["size"] == 50
    flat = [label for row in labels for label in row] + ["lonely"]
    subsample = AbsTask.stratified_subsampling(
        DatasetDict({"test": Dataset.from_dict({"labels": flat[:-1], "row": list(range(len(flat) - 1))})}), 42,
        label="labels", n_samples=100)["test"]
    assert stratified_subsample(flat[:-1], 100, 42) == subsample["row"]
    with pytest.raises(ValueError, match=r"labels \['lonely'\] have a single item.* set "
                                         r"clustering.mteb.drop_single_item_labels: true"):
        stratified_subsample(flat, 100, 42)
    settings = ClusteringSettings(mteb=MtebClustering(drop_single_item_labels=True, stratified_subsample=100))
    table = pa.table({"sentences": [f"s{i}" for i in range(len(flat))], "labels": flat})
    items, done = clustering_items(table, "sentences", "labels", [], settings, "here")
    assert done["single_item_labels_dropped"] == ["lonely"] and items["sentences"].to_pylist() == [
        f"s{row}" for row in subsample["row"]]


# Reranking (mteb 2.26: an AbsTaskRetrieval with top_ranked candidates) and multi-label classification.

def _write_mteb_layout(folder, parts: dict[str, dict[str, list]]) -> None:
    """MTEB's retrieval layout as a hub snapshot: one parquet file per config, listed in README.md."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    configs = []
    for config, columns in parts.items():
        (folder / config).mkdir(parents=True)
        split = {"corpus": "corpus", "queries": "queries"}.get(config, "test")
        pq.write_table(pa.table(columns), folder / config / f"{split}-00000-of-00001.parquet")
        configs.append({"config_name": config, "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"}]})
    (folder / "README.md").write_text("---\n" + yaml.safe_dump({"configs": configs}) + "---\n")


def _reranking_data() -> dict[str, Any]:
    rng = np.random.default_rng(41)
    doc_ids = [f"doc{i:03d}" for i in range(60)]
    titles = ["" if i % 3 else f"Title {i}" for i in range(60)]
    bodies = [f"body of {doc}" for doc in doc_ids]
    bodies[11] = bodies[10]  # same text as doc010: the same vector, a tie broken by doc id on both sides
    query_ids = [f"q{i:02d}" for i in range(12)]
    candidates, qrels = {}, {}
    for query in query_ids:
        picks = rng.choice(60, size=int(rng.integers(6, 16)), replace=False)
        candidates[query] = [doc_ids[i] for i in picks]
        qrels[query] = {doc_ids[int(i)]: int(rng.integers(0, 3)) for i in picks[:4]}
    candidates["q00"] = [*candidates["q00"][:5], "doc010", "doc011"]
    qrels["q00"] = {"doc011": 1, candidates["q00"][0]: 2}
    qrels["q01"][next(d for d in doc_ids if d not in candidates["q01"])] = 2  # judged, never a candidate
    qrels["q02"] = {candidates["q02"][0]: 0, candidates["q02"][1]: 0}  # every judgement grade 0
    del qrels["q03"]  # candidates but no judgements: left out on both sides
    del candidates["q04"]  # judgements but no candidates: an empty run, scored 0 on both sides
    texts = {doc: (f"{title} {body}".strip() if title else body) for doc, title, body in zip(doc_ids, titles, bodies,
                                                                                          strict=True)}
    vectors = {text: rng.normal(size=12).astype(np.float32) for text in dict.fromkeys(texts.values())}
    vectors.update({f"query {q}": rng.normal(size=12).astype(np.float32) for q in query_ids})
    return {"doc_ids": doc_ids, "titles": titles, "bodies": bodies, "query_ids": query_ids, "candidates": candidates,
            "qrels": qrels, "vectors": vectors}


@pytest.mark.parametrize("similarity", ["cosine", "inner_product"])
def test_reranking_in_mtebs_layout_scores_as_mteb_does(tmp_path, similarity):
    from mteb.mocks.mock_tasks.reranking import MockRerankingTask

    from embedpyramid.config import MtebDataset
    from embedpyramid.config.tasks import reranking_mteb_measures
    from embedpyramid.data import freeze_task_dataset, load_mteb_task
    from embedpyramid.tasks.level import evaluate_task, task_items
    from embedpyramid.tasks.reranking import mteb_key

    data = _reranking_data()
    corpus = {"_id": data["doc_ids"], "title": data["titles"], "text": data["bodies"]}
    queries = {"_id": data["query_ids"], "text": [f"query {q}" for q in data["query_ids"]]}
    qrels = [(q, d, g) for q, docs in data["qrels"].items() for d, g in docs.items()]
    _write_mteb_layout(tmp_path / "task", {
        "corpus": corpus, "queries": queries,
        "default": {"query-id": [r[0] for r in qrels], "corpus-id": [r[1] for r in qrels], "score": [r[2] for r in qrels]},
        "top_ranked": {"query-id": list(data["candidates"]), "corpus-ids": list(data["candidates"].values())}})
    spec = MtebDataset(loader="mteb", task="reranking", path=str(tmp_path / "task"), reranking={"protocol": "mteb"})
    frozen = freeze_task_dataset("rerank", load_mteb_task(tmp_path / "task", spec), tmp_path / "frozen")
    texts = frozen.read("texts")
    vectors = TextVectors(texts["text_id"].to_pylist(), np.stack([data["vectors"][t] for t in texts["text"].to_pylist()]))
    ours = evaluate_task(spec, frozen, vectors, dataset="rerank", model="m", similarity=similarity)

    class Task(MockRerankingTask):
        def load_data(self, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": {
                "corpus": Dataset.from_dict({"id": data["doc_ids"], "title": data["titles"], "text": data["bodies"]}),
                "queries": Dataset.from_dict({"id": [q for q in data["query_ids"] if q in data["qrels"]],
                                              "text": [f"query {q}" for q in data["query_ids"] if q in data["qrels"]]}),
                "relevant_docs": {q: dict(docs) for q, docs in data["qrels"].items()},
                "top_ranked": {q: list(docs) for q, docs in data["candidates"].items()},
            }}}
            self.data_loaded = True

    model = LookupEncoder(data["vectors"], "cosine" if similarity == "cosine" else "dot")
    theirs = _run(Task(), model)["default"]
    assert theirs["main_score"] == theirs["map_at_1000"]
    # mteb rounds pytrec_eval's means to 5 decimals (not its own MRR).
    for measure in reranking_mteb_measures([1, 3, 5, 10, 20, 100, 1000]):
        value = _value(ours.summary, similarity, measure, "test")
        mine = value if measure.startswith("MRR") else round(value, 5)
        assert abs(mine - theirs[mteb_key(measure)]) < TOLERANCE, measure
    assert ours.settings["queries"] == 11 and ours.settings["main_score"]["mteb_key"] == "map_at_1000"
    assert _value(ours.summary, similarity, "MAP@1000", "test") > 0 and all(
        value == 0 for value in ours.per_item.filter(pl.col("query_id") == "q04")["value"])
    # Per query rows (the paired statistics' input), the queries as the comparisons read them.
    assert set(ours.per_item["query_id"]) == set(data["qrels"])
    items = task_items(frozen, spec)
    assert sorted(items["query_id"]) == sorted(data["qrels"]) and items["text"][0] == "query q00"
    # Queries are encoded with the query prompt, documents with the document prompt: two parts.
    roles = dict(zip(texts["text_id"].to_pylist(), texts["role"].to_pylist(), strict=True))
    assert {roles["q:q00"], roles["d:doc000"]} == {"query", "document"}


def test_reranking_in_mtebs_older_format_scores_as_mteb_does(tmp_path, monkeypatch):
    import mteb.abstasks.text.reranking as old_reranking
    import pyarrow as pa
    import pyarrow.parquet as pq
    from mteb.abstasks.text.reranking import AbsTaskReranking
    from mteb.mocks.mock_tasks.reranking import MockRerankingTask

    from embedpyramid.config import MtebDataset
    from embedpyramid.data import freeze_task_dataset, load_mteb_task
    from embedpyramid.tasks.level import evaluate_task

    rng = np.random.default_rng(43)
    rows = {"query": [f"question {i}" for i in range(9)],
            "positive": [[f"answer {i}.{j}" for j in range(int(rng.integers(0, 3)))] for i in range(9)],
            "negative": [[f"other {i}.{j}" for j in range(int(rng.integers(1, 8)))] for i in range(9)]}
    rows["positive"][0] = ["answer 0.0"]
    rows["negative"][1] = []  # no negative: dropped on both sides
    rows["negative"][2] = ["answer 2.0", "other 2.1"]
    rows["positive"][2] = ["answer 2.0"]  # a negative with a positive's text: tied, broken by doc id
    texts = sorted({*rows["query"], *(t for column in ("positive", "negative") for row in rows[column] for t in row)})
    lookup = {text: rng.normal(size=8).astype(np.float32) for text in texts}
    pq.write_table(pa.table(rows), tmp_path / "test.parquet")
    spec = MtebDataset(loader="mteb", task="reranking", path=str(tmp_path / "test.parquet"),
                       reranking={"protocol": "mteb"})
    frozen = freeze_task_dataset("old", load_mteb_task(tmp_path / "test.parquet", spec), tmp_path / "frozen")
    table = frozen.read("texts")
    vectors = TextVectors(table["text_id"].to_pylist(), np.stack([lookup[t] for t in table["text"].to_pylist()]))
    ours = evaluate_task(spec, frozen, vectors, dataset="old", model="m")

    class Task(AbsTaskReranking):
        metadata = MockRerankingTask.metadata

        def load_data(self, **kwargs: Any) -> None:
            self.transform_old_dataset_format(DatasetDict({"test": Dataset.from_dict(rows)}))

    monkeypatch.setattr(old_reranking, "OLD_FORMAT_RERANKING_TASKS", [Task.metadata.name])
    theirs = _run(Task(), LookupEncoder(lookup))["default"]
    assert abs(round(_value(ours.summary, "cosine", "MAP@1000", "test"), 5) - theirs["map_at_1000"]) < TOLERANCE
    assert abs(_value(ours.summary, "cosine", "MRR@10", "test") - theirs["mrr_at_10"]) < TOLERANCE
    assert abs(round(_value(ours.summary, "cosine", "nDCG@10", "test"), 5) - theirs["ndcg_at_10"]) < TOLERANCE
    assert frozen.manifest["source"]["rows_without_positive_or_negative"] == sum(
        1 for p, n in zip(rows["positive"], rows["negative"], strict=True) if not (p and n))


def test_multilabel_classification_equals_mteb():
    from mteb.mocks.mock_tasks.classification import MockMultilabelClassification

    from embedpyramid.config.tasks import MtebMultilabelClassification, MultilabelClassificationSettings
    from embedpyramid.tasks.multilabel_classification import evaluate_multilabel_classification

    rng = np.random.default_rng(51)
    n_train, n_test = 90, 40
    label_sets = [sorted({int(x) for x in rng.choice(5, size=int(rng.integers(1, 4)), replace=False)})
                  for _ in range(n_train + n_test)]
    label_sets[-1] = []  # an item without labels
    centres = rng.normal(scale=2.0, size=(5, 16)).astype(np.float32)
    names, raw = _texts(n_train + n_test, seed=52)
    for row, labels in enumerate(label_sets):
        raw[row] += centres[labels].sum(axis=0) if labels else 0
    import json

    texts = pl.DataFrame({"text_id": names, "label": [json.dumps(labels) for labels in label_sets],
                          "split": ["train"] * n_train + ["test"] * n_test})
    settings = MultilabelClassificationSettings(mteb=MtebMultilabelClassification(samples_per_label=6, n_experiments=4,
                                                                                 noise_seeds=2))
    ours = evaluate_multilabel_classification(texts, TextVectors(names, raw), settings, dataset="d", model="m")

    class Task(MockMultilabelClassification):
        samples_per_label = 6
        n_experiments = 4

        def load_data(self, **kwargs: Any) -> None:
            self.dataset = DatasetDict({
                "train": Dataset.from_dict({"text": names[:n_train], "label": label_sets[:n_train]}),
                "test": Dataset.from_dict({"text": names[n_train:], "label": label_sets[n_train:]}),
            })
            self.data_loaded = True

    theirs = _run(Task(), _encoder(names, raw))["default"]
    for metric in ("accuracy", "lrap", "f1", "hamming"):
        assert abs(_value(ours.summary, "knn", metric, "test") - theirs[metric]) < TOLERANCE, metric
    per_experiment = ours.per_seed.filter(pl.col("metric") == "accuracy")["value"].to_list()
    assert per_experiment == pytest.approx([s["accuracy"] for s in theirs["scores_per_experiment"]], abs=TOLERANCE)
    assert ours.per_item["value"].mean() == pytest.approx(theirs["accuracy"], abs=TOLERANCE)
    # The noise runs: the protocol again at seeds 43 and 44, their spread recorded.
    noise = ours.settings["noise"]
    assert noise["seeds"] == [42, 43, 44] and noise["values"]["accuracy"][0] == pytest.approx(theirs["accuracy"])
    assert noise["spread"]["accuracy"] == pytest.approx(np.std(noise["values"]["accuracy"], ddof=1))
