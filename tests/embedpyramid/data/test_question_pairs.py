from collections import Counter

import pytest

from embedpyramid.config import ChatterbotDataset, PairClassificationSettings
from embedpyramid.data import DataError, load_chatterbot, load_chatterbot_pairs, load_chatterbot_questions
from embedpyramid.data.question_pairs import answer_groups, shared_answer_pairs

SPEC = ChatterbotDataset(loader="chatterbot", task="pair_classification")


def test_positives_share_a_reply_and_splits_never_share_a_group_or_question():
    tables = load_chatterbot_pairs(SPEC, PairClassificationSettings(seed=42))
    pairs = tables.pairs.to_pylist()
    retrieval = load_chatterbot(ChatterbotDataset(loader="chatterbot"))
    replies: dict[str, set[str]] = {}
    for row in retrieval.qrels.to_pylist():
        replies.setdefault(row["query_id"], set()).add(row["doc_id"])
    for pair in pairs:
        shares = bool(replies[pair["text_id_1"]] & replies[pair["text_id_2"]])
        assert shares == (pair["gold"] == 1.0)
    split_of_question: dict[str, set[str]] = {}
    for pair in pairs:
        for question in (pair["text_id_1"], pair["text_id_2"]):
            split_of_question.setdefault(question, set()).add(pair["split"])
    assert all(len(splits) == 1 for splits in split_of_question.values())
    groups_by_split = {split: {p["answer_group"] for p in pairs if p["split"] == split and p["gold"] == 1.0}
                       for split in ("dev", "test")}
    assert not groups_by_split["dev"] & groups_by_split["test"]
    # 30 positive pairs in the installed corpus, about half in each split.
    assert sum(tables.source["positives"].values()) == 30 and min(tables.source["positives"].values()) >= 10


def test_negatives_match_the_positives_count_and_category_mix_per_split():
    tables = load_chatterbot_pairs(SPEC, PairClassificationSettings(seed=42))
    pairs = tables.pairs.to_pylist()
    assert tables.source["negatives_without_category_match"] == {"dev": 0, "test": 0}
    for split in ("dev", "test"):
        positives = Counter(p["category"] for p in pairs if p["split"] == split and p["gold"] == 1.0)
        negatives = Counter(p["category"] for p in pairs if p["split"] == split and p["gold"] == 0.0)
        assert positives == negatives


def test_the_seed_is_the_only_source_of_randomness():
    first = load_chatterbot_pairs(SPEC, PairClassificationSettings(seed=7))
    again = load_chatterbot_pairs(SPEC, PairClassificationSettings(seed=7))
    other = load_chatterbot_pairs(SPEC, PairClassificationSettings(seed=8))
    assert first.pairs.equals(again.pairs) and not first.pairs.equals(other.pairs)
    assert first.source["seed"] == 7


def test_groups_are_connected_components_of_shared_replies():
    from embedpyramid.data.chatterbot import Exchange

    exchanges = [Exchange("a?", "x", "c"), Exchange("b?", "x", "c"), Exchange("b?", "y", "c"),
                 Exchange("c?", "y", "c"), Exchange("d?", "z", "c")]
    groups = answer_groups(exchanges)
    ids = {e.question: e.question_id for e in exchanges}
    assert groups[ids["a?"]] == groups[ids["b?"]] == groups[ids["c?"]] != groups[ids["d?"]]
    # a and c share no reply directly: not a positive pair, but the same group.
    assert len(shared_answer_pairs(exchanges)) == 2


def test_too_few_positives_is_a_clear_error():
    with pytest.raises(DataError, match="no two questions share a reply"):
        load_chatterbot_pairs(ChatterbotDataset(loader="chatterbot", task="pair_classification",
                                                categories=["literature"]), PairClassificationSettings())


def test_questions_labelled_by_category_are_the_retrieval_queries():
    tables = load_chatterbot_questions(ChatterbotDataset(loader="chatterbot", task="classification"))
    queries = load_chatterbot(ChatterbotDataset(loader="chatterbot")).queries
    assert tables.texts["text_id"].to_pylist() == queries["query_id"].to_pylist()
    assert tables.texts["label"].to_pylist() == queries["category"].to_pylist()
    assert tables.texts.num_rows == 748 and tables.pairs is None
