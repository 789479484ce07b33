import numpy as np
import pytest

from embedpyramid.systems.fusion import (
    candidates,
    choose_weight,
    normalized_scores,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)
from embedpyramid.systems.runs import CodedRun, ranked


def one_query(docs: list[int], scores: list[float], query: int = 0) -> CodedRun:
    return ranked(np.full(len(docs), query), np.array(docs), np.array(scores))


# Run A ranks d0 (3.0), d1 (2.0), d2 (1.0). Run B ranks d2 (0.9), then d0 and d3 tie at 0.5 at
# positions 2 and 3: for RRF both have the mid rank 2.5.
RUN_A = one_query([0, 1, 2], [3.0, 2.0, 1.0])
RUN_B = one_query([3, 2, 0], [0.5, 0.9, 0.5])


def test_rrf_by_hand():
    fused = reciprocal_rank_fusion([RUN_A, RUN_B], k=60, depth=100, output_depth=100)
    expected = {0: 1 / 61 + 1 / 62.5, 1: 1 / 62, 2: 1 / 63 + 1 / 61, 3: 1 / 62.5}
    assert fused.doc.tolist() == [0, 2, 1, 3]
    assert fused.score.tolist() == pytest.approx([expected[d] for d in (0, 2, 1, 3)], rel=1e-6)


def test_rrf_candidate_depth_and_output_depth_cut():
    fused = reciprocal_rank_fusion([RUN_A, RUN_B], k=60, depth=2, output_depth=2)
    # With 2 candidates each: A = (d0, d1); B = (d2, d0, d3): d3 ties d0, the 2nd, so the cut
    # keeps both, at mid rank 2.5. d0 = 1/61 + 1/62.5, d2 = 1/61, d1 = 1/62, d3 = 1/62.5; the
    # output keeps the best two (no tie at the output cut).
    assert fused.doc.tolist() == [0, 2]
    assert fused.score.tolist() == pytest.approx([1 / 61 + 1 / 62.5, 1 / 61], rel=1e-6)
    # The output cut keeps a tie group whole too:
    tied = reciprocal_rank_fusion([one_query([5, 6, 7], [1.0, 1.0, 0.5]), one_query([8], [2.0])], k=0, depth=10,
                                  output_depth=1)
    # d5 and d6 share ranks 1 and 2 (mid rank 1.5), d8 is first of the other input: 1, 1/1.5,
    # 1/1.5, 1/3. Output depth 2 would split the d5/d6 tie; depth 1 does not.
    assert tied.doc.tolist() == [8] and tied.score.tolist() == [1.0]
    split = reciprocal_rank_fusion([one_query([5, 6, 7], [1.0, 1.0, 0.5]), one_query([8], [2.0])], k=0, depth=10,
                                   output_depth=2)
    assert split.doc.tolist() == [8, 5, 6] and split.score.tolist() == pytest.approx([1.0, 1 / 1.5, 1 / 1.5])


def test_rrf_ties_go_to_the_smaller_doc_id_and_k_is_used():
    fused = reciprocal_rank_fusion([one_query([5], [1.0]), one_query([4], [7.0])], k=0, depth=10, output_depth=10)
    # Each document is first in one run and absent from the other: 1/(0 + 1) each, a tie.
    assert fused.doc.tolist() == [4, 5]
    assert fused.score.tolist() == [1.0, 1.0]


def test_rrf_keeps_queries_apart_and_tolerates_an_input_without_the_query():
    a = ranked(np.array([0, 1]), np.array([0, 0]), np.array([1.0, 1.0]))
    b = one_query([1], [1.0], query=1)
    fused = reciprocal_rank_fusion([a, b], k=60, depth=10, output_depth=10)
    assert fused.query.tolist() == [0, 1, 1]
    assert fused.doc.tolist() == [0, 0, 1]
    assert fused.score.tolist() == pytest.approx([1 / 61, 1 / 61, 1 / 61])


def test_minmax_weighted_fusion_by_hand():
    fused = weighted_score_fusion([RUN_A, RUN_B], (0.5, 0.5), normalization="minmax", depth=100, output_depth=100)
    # A: (s - 1) / (3 - 1) -> d0 1, d1 0.5, d2 0.  B: (s - 0.5) / 0.4 -> d2 1, d0 0, d3 0.
    # Missing documents get 0: d1 is not in B, d3 not in A.
    # d0 = 0.5 * 1 + 0.5 * 0 = 0.5, d2 = 0.5 * 0 + 0.5 * 1 = 0.5 (a tie: d0 first), d1 = 0.25, d3 = 0.
    assert fused.doc.tolist() == [0, 2, 1, 3]
    assert fused.score.tolist() == pytest.approx([0.5, 0.5, 0.25, 0.0])


def test_zscore_weighted_fusion_by_hand():
    fused = weighted_score_fusion([RUN_A, RUN_B], (0.7, 0.3), normalization="zscore", depth=100, output_depth=100)
    # A: mean 2, population sd sqrt(2/3): z = +1.2247, 0, -1.2247 for d0, d1, d2.
    # B: mean 0.6333, sd 0.18856: z = +1.4142 for d2, -0.7071 for d0 and d3.
    # Missing: A's lowest z (-1.2247) for d3, B's lowest z (-0.7071) for d1.
    za, zb = np.sqrt(1.5), np.sqrt(2.0)
    expected = {0: 0.7 * za - 0.3 * zb / 2, 1: 0.0 - 0.3 * zb / 2, 2: -0.7 * za + 0.3 * zb, 3: -0.7 * za - 0.3 * zb / 2}
    assert fused.doc.tolist() == [0, 1, 2, 3]
    assert fused.score.tolist() == pytest.approx([expected[d] for d in range(4)], rel=1e-6)


def test_degenerate_lists_normalize_to_one_under_minmax_and_zero_under_zscore():
    tied = one_query([7, 3], [2.0, 2.0])
    values, queries, missing = normalized_scores(tied, "minmax")
    assert values.tolist() == [1.0, 1.0] and queries.tolist() == [0] and missing.tolist() == [0.0]
    values, _, missing = normalized_scores(tied, "zscore")
    assert values.tolist() == [0.0, 0.0] and missing.tolist() == [0.0]


def test_weights_select_one_input_entirely():
    only_a = weighted_score_fusion([RUN_A, RUN_B], (1.0, 0.0), depth=100, output_depth=100)
    assert only_a.doc.tolist()[:3] == [0, 1, 2]


def test_candidates_keeps_the_top_of_each_query():
    run = ranked(np.array([0, 0, 0, 1]), np.array([0, 1, 2, 0]), np.array([1.0, 3.0, 2.0, 1.0]))
    cut = candidates(run, 2)
    assert cut.query.tolist() == [0, 0, 1] and cut.doc.tolist() == [1, 2, 0]


def test_choose_weight_picks_the_best_dev_value_and_breaks_ties_to_the_smaller_weight():
    seen = []

    def score(run: CodedRun) -> float:
        seen.append(run.doc.tolist())
        return 1.0 if run.doc[0] == 2 else 0.0  # d2 first is "right" on this dev split

    choice = choose_weight([RUN_A, RUN_B], [0.0, 0.25, 0.75, 1.0], metric="MRR@10", score=score,
                           normalization="minmax", depth=100, output_depth=100)
    # w = 0 and w = 0.25 put d2 first (B dominates); the smaller wins the tie.
    assert choice.weight == 0.0
    assert choice.sweep["value"].to_list() == [1.0, 1.0, 0.0, 0.0]
    assert len(seen) == 4


def test_fusion_needs_two_runs_and_matching_weights():
    with pytest.raises(ValueError, match="at least two runs"):
        reciprocal_rank_fusion([RUN_A])
    with pytest.raises(ValueError, match="one non-negative weight per input"):
        weighted_score_fusion([RUN_A, RUN_B], (1.0,))


def test_candidates_keep_every_document_tied_with_the_last_one():
    run = one_query([4, 1, 3, 2, 0], [3.0, 2.0, 2.0, 2.0, 1.0])
    assert candidates(run, 2).doc.tolist() == [4, 1, 2, 3]  # d1, d2, d3 tie at 2.0: all kept
    assert candidates(run, 1).doc.tolist() == [4] and candidates(run, 4).doc.tolist() == [4, 1, 2, 3]
    assert run.mid_ranks().tolist() == [1.0, 3.0, 3.0, 3.0, 5.0]


def random_tied_run(rng: np.random.Generator, n_queries: int, n_docs: int) -> CodedRun:
    """Each query retrieves a random subset of the documents with scores from three values: many ties."""
    rows = [(q, d, float(rng.integers(0, 3))) for q in range(n_queries)
            for d in rng.choice(n_docs, size=int(rng.integers(1, n_docs)), replace=False)]
    query, doc, score = (np.array(column) for column in zip(*rows, strict=True))
    return ranked(query, doc, score)


def fused_scores(run: CodedRun, rename: np.ndarray | None = None) -> dict[tuple[int, int], float]:
    """(query, original document) -> fused score; ``rename`` maps a renamed document back."""
    docs = run.doc if rename is None else rename[run.doc]
    return dict(zip(zip(run.query.tolist(), docs.tolist(), strict=True), run.score.tolist(), strict=True))


@pytest.mark.parametrize("fusion", ["rrf", "minmax", "zscore"])
def test_permuting_document_ids_leaves_every_fused_score_unchanged(fusion):
    """Property: on runs full of ties, renaming the documents by a random permutation gives the
    same fused score to every (query, document), and the same documents past both cuts."""
    rng = np.random.default_rng(20)

    def fuse(runs):
        if fusion == "rrf":
            return reciprocal_rank_fusion(runs, k=5, depth=4, output_depth=5)
        return weighted_score_fusion(runs, (0.3, 0.7), normalization=fusion, depth=4, output_depth=5)

    straddling = 0
    for _ in range(25):
        runs = [random_tied_run(rng, 4, 12) for _ in range(2)]
        original = fused_scores(fuse(runs))
        straddling += any(np.bincount(candidates(run, 4).query).max() > 4 for run in runs)
        for _ in range(4):
            permutation = rng.permutation(12)  # document d is renamed permutation[d]
            renamed = [ranked(run.query, permutation[run.doc], run.score) for run in runs]
            assert fused_scores(fuse(renamed), rename=np.argsort(permutation)) == original
    assert straddling >= 10  # not vacuous: tie groups straddle the candidate cut in many trials
