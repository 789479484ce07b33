import numpy as np
import pytest

from embedpyramid.config import IndexSpec
from embedpyramid.config.systems import AnnReference
from embedpyramid.retrieval.search import exact_topk
from embedpyramid.serving import build_index
from embedpyramid.systems.first_stage import ann_first_stage
from embedpyramid.systems.rerank import bi_encoder_rerank
from embedpyramid.systems.runs import encode_run


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def vectors():
    rng = np.random.default_rng(3)
    documents = unit(rng.standard_normal((400, 16)))
    queries = unit(documents[:30] + 0.3 * rng.standard_normal((30, 16)))
    return queries, documents, [f"q{i:02d}" for i in range(30)], [f"d{i:03d}" for i in range(400)]


def spec(**fields: object) -> IndexSpec:
    return IndexSpec.model_validate({"seed": 42, **fields})


def test_a_flat_index_first_stage_is_the_exact_run(vectors):
    queries, documents, query_ids, doc_ids = vectors
    built = build_index(spec(name="flat", factory="Flat"), documents, seed=42)
    run, point = ann_first_stage(built, AnnReference("flat", None, None), queries, query_ids, doc_ids, depth=50,
                                 batch_size=16, latency_queries=5, seed=0)
    scores, indices = exact_topk(queries, documents, 50)
    coded = encode_run(run, query_ids, doc_ids, name="ann:flat")
    assert coded.doc.tolist() == indices.reshape(-1).tolist()
    assert point.p50_ms > 0 and point.latency_queries == 5


def test_hnsw_at_one_sweep_point_feeds_a_rerank(vectors):
    queries, documents, query_ids, doc_ids = vectors
    built = build_index(spec(name="hnsw", factory="HNSW8", sweep={"efSearch": [16, 64]}), documents, seed=42)
    run, point = ann_first_stage(built, AnnReference("hnsw", "efSearch", 64), queries, query_ids, doc_ids,
                                 depth=40, batch_size=16, latency_queries=5, seed=0)
    assert point.param == "efSearch" and point.value == 64
    assert run.group_by("query_id").len()["len"].max() == 40
    first_stage = encode_run(run, query_ids, doc_ids, name="ann:hnsw:efSearch=64")
    reranked = bi_encoder_rerank(first_stage, 40, queries, documents, latency_queries=5, seed=0)
    assert len(reranked.run) == len(first_stage)


def test_the_reference_must_be_a_sweep_point_of_the_index(vectors):
    queries, documents, query_ids, doc_ids = vectors
    built = build_index(spec(name="hnsw", factory="HNSW8", sweep={"efSearch": [16]}), documents, seed=42)
    with pytest.raises(ValueError, match="efSearch=32 is not one of its sweep points"):
        ann_first_stage(built, AnnReference("hnsw", "efSearch", 32), queries, query_ids, doc_ids, depth=10,
                        batch_size=16, latency_queries=5, seed=0)
    with pytest.raises(ValueError, match="does not name the index"):
        ann_first_stage(built, AnnReference("other", None, None), queries, query_ids, doc_ids, depth=10,
                        batch_size=16, latency_queries=5, seed=0)
