from pathlib import Path

import numpy as np
import pytest

from embedpyramid.config.systems import ModelLocation
from embedpyramid.retrieval.search import exact_topk
from embedpyramid.systems.rerank import (
    CrossEncoderScorer,
    KeyedVectors,
    bi_encoder_rerank,
    cross_encoder_rerank,
)
from embedpyramid.systems.runs import ranked

# Query 0's first stage: d0, d1, d2 (in that order); query 1's: d2 only; query 2 has none.
FIRST_STAGE = ranked(np.array([0, 0, 0, 1]), np.array([0, 1, 2, 2]), np.array([0.9, 0.8, 0.7, 0.5]))
QUERY_VECTORS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
DOC_VECTORS = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]], dtype=np.float32)


def test_bi_encoder_rerank_by_hand():
    result = bi_encoder_rerank(FIRST_STAGE, 3, QUERY_VECTORS, DOC_VECTORS, latency_queries=10, seed=0)
    # q0 . (d0, d1, d2) = (0, 1, 0.5) -> d1, d2, d0; q1 . d2 = 0.5; q2 has no candidates.
    assert result.run.query.tolist() == [0, 0, 0, 1]
    assert result.run.doc.tolist() == [1, 2, 0, 2]
    assert result.run.score.tolist() == [1.0, 0.5, 0.0, 0.5]
    assert result.candidates_per_query == pytest.approx(4 / 3)
    assert result.latency.n_queries == 2 and "seed 0" in result.latency.scope


def test_rerank_only_sees_the_top_n():
    result = bi_encoder_rerank(FIRST_STAGE, 2, QUERY_VECTORS, DOC_VECTORS, latency_queries=10, seed=0)
    # q0's candidates are d0 and d1: d2 (0.5) is never seen.
    assert result.run.doc.tolist() == [1, 0, 2]


def test_bi_encoder_latency_can_include_query_encoding():
    calls = []

    def encode_query(text: str) -> np.ndarray:
        calls.append(text)
        return QUERY_VECTORS[int(text[1])]

    result = bi_encoder_rerank(FIRST_STAGE, 3, QUERY_VECTORS, DOC_VECTORS, latency_queries=10, seed=0,
                               query_texts=["q0", "q1", "q2"], encode_query=encode_query)
    assert sorted(calls) == ["q0", "q1"]
    assert result.latency.scope.endswith("query encoding included")


def test_cross_encoder_rerank_with_a_pair_scorer_by_hand():
    def overlap(query: str, documents: list[str]) -> np.ndarray:
        words = set(query.split())
        return np.array([len(words & set(d.split())) for d in documents], dtype=np.float32)

    docs = ["red fox", "red fox jumps", "blue sky"]
    result = cross_encoder_rerank(FIRST_STAGE, 3, ["red fox jumps", "blue sky", "nothing"], docs, overlap)
    # q0: overlaps (2, 3, 0) -> d1, d0, d2; q1: d2 overlaps 2.
    assert result.run.doc.tolist() == [1, 0, 2, 2]
    assert result.run.score.tolist() == [3.0, 2.0, 0.0, 2.0]
    assert result.latency.n_queries == 2 and result.latency.scope == "every query"


def test_keyed_vectors_align_by_id_and_name_missing_ids():
    keyed = KeyedVectors(["b", "a"], np.array([[2.0], [1.0]]))
    assert keyed.aligned(["a", "b"], "toy").tolist() == [[1.0], [2.0]]
    with pytest.raises(ValueError, match="toy: no vector for 1 ids, e.g. \\['c'\\]"):
        keyed.aligned(["a", "c"], "toy")


TOY_DOCS = [
    "Paris is the capital and largest city of France.",
    "Bananas are a yellow fruit rich in potassium.",
    "The stock market fell sharply on Monday.",
    "A cat sleeps most of the day.",
    "Berlin is the capital of Germany.",
]
TOY_QUERIES = ["What is the capital of France?", "Which fruit is yellow?", "How much do cats sleep?"]
TOY_ANSWERS = [0, 1, 3]


def test_rerank_by_another_real_model(encode):
    """MiniLM's exact top 4 over a toy corpus, reranked by USE's vectors (and the other way)."""
    for first, second in (("minilm-l6", "use-m3"), ("use-m3", "minilm-l6")):
        scores, indices = exact_topk(encode(first, TOY_QUERIES, "query"), encode(first, TOY_DOCS, "document"), 4)
        first_stage = ranked(np.repeat(np.arange(3), 4), indices.reshape(-1), scores.reshape(-1))
        queries, documents = encode(second, TOY_QUERIES, "query"), encode(second, TOY_DOCS, "document")
        result = bi_encoder_rerank(first_stage, 4, queries, documents, latency_queries=3, seed=1)
        for query in range(3):
            mine = result.run.query_slice(query)
            # The same candidates, in the order of the second model's cosine.
            assert sorted(mine.doc.tolist()) == sorted(first_stage.query_slice(query).doc.tolist())
            assert np.allclose(mine.score, documents[mine.doc] @ queries[query], atol=1e-6)
            assert (np.diff(mine.score) <= 0).all()
            assert mine.doc[0] == TOY_ANSWERS[query]


def test_cross_encoder_rerank_with_a_real_cross_encoder(seeded_cross_encoder: Path):
    from sentence_transformers import CrossEncoder

    scorer = CrossEncoderScorer(ModelLocation(str(seeded_cross_encoder)), max_length=64, batch_size=4)
    first_stage = ranked(np.repeat(np.arange(3), 5), np.tile(np.arange(5), 3), np.zeros(15))
    result = cross_encoder_rerank(first_stage, 5, TOY_QUERIES, TOY_DOCS, scorer.score)
    direct = CrossEncoder(str(seeded_cross_encoder), device="cpu", max_length=64, local_files_only=True)
    for query in range(3):
        mine = result.run.query_slice(query)
        logits = direct.predict([(TOY_QUERIES[query], TOY_DOCS[d]) for d in mine.doc],
                                activation_fn=torch_identity(), convert_to_numpy=True)
        assert np.allclose(mine.score, logits, atol=1e-5)
        assert (np.diff(mine.score) <= 0).all()
    assert scorer.describe()["activation"] == "none (raw logits)"


def torch_identity():
    import torch

    return torch.nn.Identity()


def test_a_missing_cross_encoder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(RuntimeError, match="cannot load a CrossEncoder from"):
        CrossEncoderScorer(ModelLocation(str(tmp_path / "nowhere")))
