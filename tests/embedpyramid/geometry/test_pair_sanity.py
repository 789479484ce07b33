import numpy as np
import polars as pl
import pytest
from task_vectors import pair_vectors, pairs_frame

from embedpyramid.geometry.pair_sanity import (
    PairSanitySettings,
    random_pairs,
    retrieval_pair_sanity,
    separation_auc,
    task_pair_sanity,
)
from embedpyramid.vectors import TextVectors


def test_auc_by_hand_with_ties_counting_half():
    # Similar 0.9 beats both random scores, 0.5 beats 0.1 but not 0.6: 3 of 4 comparisons.
    auc, warning = separation_auc(np.array([0.9, 0.5]), np.array([0.6, 0.1]))
    assert auc == 0.75 and warning is None
    auc, warning = separation_auc(np.array([0.5]), np.array([0.5]))
    assert auc == 0.5 and "near 0.5" in warning
    auc, warning = separation_auc(np.array([0.1]), np.array([0.9]))
    assert auc == 0.0 and "below 0.5" in warning


def test_random_pairs_are_distinct_and_avoid_known_pairs_and_self():
    rng = np.random.default_rng(0)
    known = {(0, 1), (1, 0), (2, 3), (3, 2)}
    left, right = random_pairs(np.arange(4), np.arange(4), 4, known, rng=rng, unordered=True)
    drawn = set(zip(left.tolist(), right.tolist(), strict=True))
    assert len(drawn) == 4 and not drawn & known and all(a < b for a, b in drawn)
    assert drawn == {(0, 2), (0, 3), (1, 2), (1, 3)}  # the only unordered pairs left
    with pytest.raises(ValueError, match="could draw only 4 of 5"):
        random_pairs(np.arange(4), np.arange(4), 5, known, rng=rng, unordered=True)


def test_sts_pairs_above_the_quantile_are_the_known_similar_ones():
    # Eight pairs (u_i, v_i) with u_i = e_i and v_i = c_i e_i + sqrt(1 - c_i^2) e_(8+i): any other
    # two texts are orthogonal. The top quarter by gold (scores 7 and 8) has cosine 0.95; random
    # pairs score 0 or, when a pair (u_i, v_i) of lower gold is drawn, at most 0.2: AUC = 1.
    cosines = [0.1, 0.2, 0.1, 0.15, 0.2, 0.1, 0.95, 0.95]
    eye = np.eye(16)
    rows = [row for i, c in enumerate(cosines) for row in (eye[i], c * eye[i] + np.sqrt(1 - c**2) * eye[8 + i])]
    vectors = TextVectors([name for i in range(8) for name in (f"u{i}", f"v{i}")], np.array(rows))
    result = task_pair_sanity("sts", pairs_frame([1, 2, 3, 4, 5, 6, 7, 8]), vectors, PairSanitySettings(seed=1))
    assert result.n_similar == result.n_random == 2 and result.similar_mean == pytest.approx(0.95)
    assert result.auc == 1.0 and result.warning is None
    assert "0.75 quantile" in result.definition and result.settings["seed"] == 1


def test_retrieval_pairs_separate_relevant_documents():
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    documents = np.array([[2.0, 0.1], [0.1, 3.0], [-1.0, -1.0], [-1.0, 0.5]])
    qrels = pl.DataFrame({"query_id": ["q0", "q1"], "doc_id": ["d0", "d1"], "relevance": [1, 1]})
    result = retrieval_pair_sanity(["q0", "q1"], queries, ["d0", "d1", "d2", "d3"], documents, qrels,
                                   PairSanitySettings())
    assert result.auc == 1.0 and result.warning is None and (result.n_similar, result.n_random) == (2, 2)
    recorded = result.as_dict()
    assert recorded["auc"] == 1.0 and recorded["seed"] == 42 and recorded["warning"] is None


def test_bitext_random_pairs_stay_within_the_language_pair():
    vectors = pair_vectors([0.9, 0.8, 0.7, 0.9, 0.8, 0.7])
    pairs = pairs_frame([1] * 6).with_columns(pl.Series("language_pair", ["en-de"] * 3 + ["en-ko"] * 3))
    result = task_pair_sanity("bitext", pairs, vectors, PairSanitySettings())
    # Every random pair is (u_i, v_j) with i != j of the same language pair: cosine of (1, 0)
    # with v_j is the gold cosine of pair j, so AUC compares the same values: 0.5 exactly is
    # impossible to avoid here — and flagged.
    assert result.n_random == 6 and result.warning is not None
    with pytest.raises(ValueError, match="has no pairs"):
        task_pair_sanity("clustering", pairs, vectors, PairSanitySettings())
