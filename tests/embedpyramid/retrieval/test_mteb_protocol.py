"""Retrieval's ``mteb`` protocol against mteb 2.26's own search and ``AbsTaskRetrieval``
evaluation (a test dependency) on the same vectors and data: the same top-k sets, and the same
per-query pytrec_eval values and MRR, and main scores, to 1e-6.

mteb runs offline: a mock retrieval task whose ``load_data`` puts this test's in-memory corpus,
queries and qrels in place, and an encoder that returns fixed vectors. The vectors hold small
integers, so every dot product is exact in float32 whatever the summation order: ties are ties
on both sides. The data hold score ties at a cutoff (rank 10) and at MTEB's top_k cut, a query
whose qrels are all grade 0, a query without qrels and a query that retrieves itself."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest

mteb = pytest.importorskip("mteb")

from datasets import Dataset  # noqa: E402
from mteb._evaluators.retrieval_evaluator import RetrievalEvaluator  # noqa: E402
from mteb._evaluators.retrieval_metrics import mrr  # noqa: E402
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask  # noqa: E402
from mteb.models.abs_encoder import AbsEncoder  # noqa: E402
from mteb.models.search_wrappers import SearchEncoderWrapper  # noqa: E402

from embedpyramid.config import parse_measure
from embedpyramid.config.conventions import MetricConventions  # noqa: E402
from embedpyramid.config.tasks import MTEB_VERSION  # noqa: E402
from embedpyramid.retrieval.metrics import evaluate_run  # noqa: E402
from embedpyramid.retrieval.search import exact_topk, run_table  # noqa: E402

TOLERANCE = 1e-6
K_VALUES = (1, 3, 5, 10, 20)
TOP_K = max(K_VALUES)
DEPTH = 25  # the project's run is deeper than MTEB's top_k: the protocol cuts it
ENCODE = {"batch_size": 8, "show_progress_bar": False}
# pytrec_eval measure of mteb's all_scores -> the project's measure name
PYTREC = {"ndcg_cut": "nDCG", "map_cut": "MAP", "recall": "Recall", "P": "P", "success": "Hit"}


class LookupEncoder(AbsEncoder):
    """An mteb encoder that returns the given vector of each text; its similarity is the dot product."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.mteb_model_meta = None

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str, prompt_type: Any = None,
               **kwargs: Any) -> np.ndarray:
        return np.stack([self.vectors[text] for batch in inputs for text in batch["text"]]).astype(np.float32)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        return np.asarray(embeddings1, np.float32) @ np.asarray(embeddings2, np.float32).T

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        return (np.asarray(embeddings1, np.float32) * np.asarray(embeddings2, np.float32)).sum(axis=1)


def _data() -> tuple[list[str], np.ndarray, list[str], np.ndarray, dict[str, dict[str, int]]]:
    rng = np.random.default_rng(7)
    doc_ids = [f"d{i:02d}" for i in range(40)]
    docs = rng.integers(-20, 21, size=(40, 6)).astype(np.float32)
    query_ids = [f"q{i:02d}" for i in range(10)] + ["d07"]
    queries = rng.integers(-20, 21, size=(11, 6)).astype(np.float32)
    docs[7] *= 3
    queries[-1] = docs[7]  # query "d07" retrieves document "d07" first: no other has its norm

    def order(q: int) -> np.ndarray:  # MTEB's order: score descending, doc id descending
        return np.lexsort((-np.arange(40), -(docs @ queries[q])))

    # q00: a duplicate of its 20th document at rank 21: tied at MTEB's top_k cut
    ranked = order(0)
    docs[max(ranked[19], ranked[20])] = docs[min(ranked[19], ranked[20])]
    # q01: a duplicate of its 10th document at rank 11, the smaller doc id relevant
    ranked = order(1)
    low, high = sorted((int(ranked[9]), int(ranked[10])))
    docs[high] = docs[low]
    qrels: dict[str, dict[str, int]] = {}
    for q in range(9):
        ranked = order(q)
        picks = rng.choice(40, size=4, replace=False)
        qrels[query_ids[q]] = {doc_ids[int(d)]: int(g) for d, g in zip(picks, rng.integers(0, 3, size=4), strict=True)}
        qrels[query_ids[q]][doc_ids[int(ranked[rng.integers(0, 8)])]] = 2
    qrels["q01"] = {doc_ids[low]: 1, doc_ids[int(order(1)[30])]: 2}
    qrels["q02"] = {doc_ids[3]: 0, doc_ids[4]: 0}  # all grade 0: MTEB averages its zeros
    qrels["d07"] = {"d07": 1, doc_ids[int(order(10)[1])]: 1}  # relevant self-hit
    # q09 has no qrels: both sides leave it out
    return doc_ids, docs, query_ids, queries, qrels


def _mteb_task(doc_ids, docs, query_ids, queries, qrels, ignore_identical_ids: bool) -> Any:
    shuffled = np.random.default_rng(1).permutation(len(doc_ids))

    class Task(MockRetrievalTask):
        k_values = K_VALUES

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": {
                "corpus": Dataset.from_dict({"id": [doc_ids[i] for i in shuffled],
                                             "text": [f"text {doc_ids[i]}" for i in shuffled]}),
                "queries": Dataset.from_dict({"id": query_ids, "text": [f"query {q}" for q in query_ids]}),
                "relevant_docs": copy.deepcopy(qrels),
                "top_ranked": None,
            }}}
            self.data_loaded = True

    Task.ignore_identical_ids = ignore_identical_ids
    return Task()


def _encoder(doc_ids, docs, query_ids, queries) -> LookupEncoder:
    return LookupEncoder({**{f"text {d}": v for d, v in zip(doc_ids, docs, strict=True)},
                          **{f"query {q}": v for q, v in zip(query_ids, queries, strict=True)}})


def _ours(doc_ids, docs, query_ids, queries, qrels, drop_self_hits: bool):
    scores, indices = exact_topk(queries, docs, DEPTH, doc_block_size=6, query_block_size=4, ties_at_cut="last")
    run = pl.from_arrow(run_table(query_ids, doc_ids, scores, indices))
    qrel_frame = pl.DataFrame([(q, d, g) for q, docs_ in qrels.items() for d, g in docs_.items()],
                              schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64}, orient="row")
    measures = [parse_measure(f"{name}@{k}") for name in ("nDCG", "MAP", "Recall", "P", "Hit", "MRR") for k in K_VALUES]
    conventions = MetricConventions.mteb(drop_self_hits=drop_self_hits, top_k=TOP_K, mteb_version=MTEB_VERSION)
    return run, evaluate_run(run, qrel_frame, measures, conventions, query_ids=query_ids)


@pytest.mark.parametrize("ignore_identical_ids", [False, True])
def test_retrieval_mteb_protocol_equals_mteb(ignore_identical_ids):
    doc_ids, docs, query_ids, queries, qrels = _data()
    model = _encoder(doc_ids, docs, query_ids, queries)
    task = _mteb_task(doc_ids, docs, query_ids, queries, qrels, ignore_identical_ids)
    run, ours = _ours(doc_ids, docs, query_ids, queries, qrels, ignore_identical_ids)

    # MTEB's search (chunks of 7 documents: its per-chunk topk and heap merge) keeps the same
    # top-k set, with the same scores, as the project's search to depth top_k (blocks of 6).
    task.load_data()
    split = task.dataset["default"]["test"]
    search = SearchEncoderWrapper(model, corpus_chunk_size=7)
    search.index(split["corpus"], task_metadata=task.metadata, hf_split="test", hf_subset="default", encode_kwargs=ENCODE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = search.search(split["queries"], task_metadata=task.metadata, hf_split="test", hf_subset="default",
                                 top_k=TOP_K, encode_kwargs=ENCODE)
    ours_top = pl.from_arrow(run_table(query_ids, doc_ids, *exact_topk(
        queries, docs, TOP_K, doc_block_size=6, query_block_size=4, ties_at_cut="last")))
    for query_id in query_ids:
        mine = ours_top.filter(pl.col("query_id") == query_id)
        assert dict(zip(mine["doc_id"], mine["score"], strict=True)) == pytest.approx(results[query_id], abs=0), query_id

    # The tie at q00's top_k cut: MTEB keeps the larger doc id, the project's default search the smaller.
    default_run = pl.from_arrow(run_table(query_ids, doc_ids, *exact_topk(queries, docs, TOP_K)))
    assert set(default_run.filter(pl.col("query_id") == "q00")["doc_id"]) != set(results["q00"])
    assert next(iter(sorted(results["d07"].items(), key=lambda item: -item[1])))[0] == "d07"  # the self-hit

    # Per query: mteb's RetrievalEvaluator.evaluate (identical ids, then calculate_retrieval_scores)
    # and its mrr, on the queries it keeps (those with qrels), against the project's per-query table.
    kept = {q: docs_ for q, docs_ in qrels.items() if docs_}
    evaluated = RetrievalEvaluator.evaluate(None, kept, {q: dict(r) for q, r in results.items() if q in kept},
                                            K_VALUES, ignore_identical_ids=ignore_identical_ids)
    assert sorted(ours.evaluated_query_ids) == sorted(evaluated.all_scores) == sorted(kept)
    assert "q02" in ours.evaluated_query_ids and ours.excluded_query_ids == ["q09"]
    values = {(row["query_id"], row["metric"]): row["value"] for row in ours.per_query.iter_rows(named=True)}
    differences = []
    for query_id, measured in evaluated.all_scores.items():
        for key, value in measured.items():
            name, k = key.rsplit("_", 1)
            differences.append(abs(values[(query_id, f"{PYTREC[name]}@{k}")] - value))
    stripped = {q: {d: s for d, s in r.items() if not (ignore_identical_ids and d == q)}
                for q, r in results.items() if q in kept}
    for metric, per_query in mrr(kept, stripped, K_VALUES).items():
        for query_id, value in zip(stripped, per_query, strict=True):
            differences.append(abs(values[(query_id, metric)] - value))
    assert max(differences) <= TOLERANCE

    # The whole task, as MTEB runs it: main score nDCG@10 and the shared measures (mteb rounds
    # nDCG, MAP, Recall, P and HitRate to 5 decimals, not MRR).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = task.evaluate(model, "test", encode_kwargs=ENCODE)["default"]
    means = {row["metric"]: row["value"] for row in ours.per_query.group_by("metric").agg(pl.col("value").mean())
             .iter_rows(named=True)}
    assert scores["main_score"] == scores["ndcg_at_10"]
    for name, prefix in (("nDCG", "ndcg"), ("MAP", "map"), ("Recall", "recall"), ("P", "precision"), ("Hit", "hit_rate")):
        for k in K_VALUES:
            assert round(means[f"{name}@{k}"], 5) == pytest.approx(scores[f"{prefix}_at_{k}"], abs=TOLERANCE), (name, k)
    for k in K_VALUES:
        assert means[f"MRR@{k}"] == pytest.approx(scores[f"mrr_at_{k}"], abs=TOLERANCE)
    assert ours.tied_queries  # the ties at rank 10 and at top_k are in the data


def test_project_protocol_differs_where_mteb_does():
    """The project's default excludes the all-zero query and keeps self-hits' neighbours past
    top_k: the two protocols disagree on these data, so the test above tests something."""
    doc_ids, docs, query_ids, queries, qrels = _data()
    run, mteb_side = _ours(doc_ids, docs, query_ids, queries, qrels, True)
    qrel_frame = pl.DataFrame([(q, d, g) for q, docs_ in qrels.items() for d, g in docs_.items()],
                              schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64}, orient="row")
    project = evaluate_run(run, qrel_frame, [parse_measure("nDCG@10")], MetricConventions(drop_self_hits=True),
                           query_ids=query_ids)
    assert "q02" in project.excluded_query_ids and "q02" in mteb_side.evaluated_query_ids


def test_skip_first_result_drops_each_querys_best_document_as_mteb_does():
    """A task that sets ``skip_first_result`` (its queries are documents under other ids): MTEB
    drops each query's best result after the cut; so does the ``mteb`` protocol with the setting."""
    doc_ids, docs, query_ids, queries, qrels = _data()
    model = _encoder(doc_ids, docs, query_ids, queries)
    task = _mteb_task(doc_ids, docs, query_ids, queries, qrels, ignore_identical_ids=False)
    task.skip_first_result = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = task.evaluate(model, "test", encode_kwargs=ENCODE)["default"]
    run = pl.from_arrow(run_table(query_ids, doc_ids, *exact_topk(queries, docs, DEPTH, ties_at_cut="last")))
    qrel_frame = pl.DataFrame([(q, d, g) for q, docs_ in qrels.items() for d, g in docs_.items()],
                              schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64}, orient="row")
    measures = [parse_measure(f"{name}@{k}") for name in ("nDCG", "MAP", "MRR") for k in K_VALUES]
    skipping = MetricConventions.mteb(drop_self_hits=False, top_k=TOP_K, mteb_version=MTEB_VERSION,
                                      skip_first_result=True)
    ours = evaluate_run(run, qrel_frame, measures, skipping, query_ids=query_ids)
    means = {row["metric"]: row["value"] for row in ours.per_query.group_by("metric").agg(pl.col("value").mean())
             .iter_rows(named=True)}
    for k in K_VALUES:
        assert round(means[f"nDCG@{k}"], 5) == pytest.approx(scores[f"ndcg_at_{k}"], abs=TOLERANCE)
        assert round(means[f"MAP@{k}"], 5) == pytest.approx(scores[f"map_at_{k}"], abs=TOLERANCE)
        assert means[f"MRR@{k}"] == pytest.approx(scores[f"mrr_at_{k}"], abs=TOLERANCE)
    # Skipping changes the numbers (so the agreement above tests it): every query loses its first result.
    kept = _ours(doc_ids, docs, query_ids, queries, qrels, False)[1].per_query
    unskipped = kept.filter(pl.col("metric") == "nDCG@10")["value"].to_list()
    assert unskipped != ours.per_query.filter(pl.col("metric") == "nDCG@10")["value"].to_list()
    assert ours.conventions.as_dict()["skip_first_result"] is True
    with pytest.raises(ValueError, match="skip_first_result is MTEB's task attribute: it needs protocol 'mteb'"):
        MetricConventions(skip_first_result=True)
