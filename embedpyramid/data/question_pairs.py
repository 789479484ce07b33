"""Pair classification from chatterbot-corpus: questions that share an answer, against negatives.

Two distinct questions are a *positive* pair when some reply was given to both (the duplicate
questions of the corpus: "Will you die?" / "Will you die"). Questions linked through shared
replies form an *answer group* (a connected component of the question–reply graph; a question
whose replies nobody else got is a group of its own). The split is by whole groups, so no group
— and no question — appears in both splits: groups holding positives are shuffled with the seed
and go to dev until dev holds ``dev_share`` of the positives, the rest to test; the other groups
are shuffled and split in the same proportion. Each split then gets as many *negatives* as it
has positives, with the same category mix: for each positive pair of categories (c1, c2) a
seeded draw of a question of c1 and one of c2 from that split, in different answer groups (so
they share no reply, even transitively), each negative pair drawn once. When a split has no such
pair for a category mix, the second question is drawn from any category of the split; the count
of those is recorded in the manifest.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa

from embedpyramid.config import ChatterbotDataset
from embedpyramid.config.tasks import PairClassificationSettings
from embedpyramid.data.chatterbot import Exchange, read_conversations
from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables

SPLITS = ("dev", "test")
_MAX_DRAWS = 10_000


def load_chatterbot_pairs(spec: ChatterbotDataset, settings: PairClassificationSettings) -> TaskTables:
    """Positive question pairs sharing a reply and seeded negatives, split dev/test by answer group."""
    conversations = read_conversations(spec)
    questions = conversations.question_categories()
    group_of = answer_groups(conversations.exchanges)
    positives = shared_answer_pairs(conversations.exchanges)
    if not positives:
        raise DataError(f"chatterbot {spec.language} {', '.join(p.name for p in conversations.files)}: "
                        "no two questions share a reply, so there are no positive pairs; select more categories")
    rng = np.random.default_rng(settings.seed)
    split_of_group = _split_groups(group_of, positives, settings.dev_share, rng)
    split_of = {question: split_of_group[group] for question, group in group_of.items()}
    rows: list[tuple[str, str, float, str]] = []
    fallbacks = {split: 0 for split in SPLITS}
    for split in SPLITS:
        split_positives = [pair for pair in positives if split_of[pair[0]] == split]
        if not split_positives:
            raise DataError(f"chatterbot {spec.language}: the {split} split has no positive pairs "
                            f"({len(positives)} in all); select more categories or change dev_share")
        members = sorted(q for q, s in split_of.items() if s == split)
        negatives, fallbacks[split] = _draw_negatives(split_positives, members, questions, group_of, rng)
        rows += [(a, b, 1.0, split) for a, b in split_positives] + [(a, b, 0.0, split) for a, b in negatives]
    used = sorted({q for a, b, _, _ in rows for q in (a, b)})
    texts = pa.table({"text_id": used, "text": [questions[q][0] for q in used],
                      "category": [questions[q][1] for q in used]})
    pairs = pa.table({
        "pair_id": [f"{a}~{b}" for a, b, _, _ in rows],
        "text_id_1": [a for a, _, _, _ in rows],
        "text_id_2": [b for _, b, _, _ in rows],
        "gold": [gold for _, _, gold, _ in rows],
        "split": [split for _, _, _, split in rows],
    }, schema=PAIRS_SCHEMA)
    pairs = pairs.append_column("category", pa.array([_pair_category(questions, a, b) for a, b, _, _ in rows]))
    pairs = pairs.append_column("answer_group", pa.array([group_of[a] for a, _, _, _ in rows]))
    source: dict[str, Any] = {
        **conversations.source(spec),
        "pairs": "questions sharing a reply (positives) vs seeded negatives from other answer groups",
        "seed": settings.seed, "dev_share": settings.dev_share,
        "positives": {split: sum(1 for *_, g, s in rows if g == 1.0 and s == split) for split in SPLITS},
        "answer_groups": {split: len({g for q, g in group_of.items() if split_of[q] == split}) for split in SPLITS},
        "negatives_without_category_match": fallbacks,
    }
    return task_tables("pair_classification", texts, pairs, source, f"chatterbot {spec.language}")


def shared_answer_pairs(exchanges: list[Exchange]) -> list[tuple[str, str]]:
    """Sorted (question id, question id) pairs, smaller id first, of distinct questions given a
    common reply."""
    askers: dict[str, set[str]] = defaultdict(set)
    for exchange in exchanges:
        askers[exchange.answer_id].add(exchange.question_id)
    pairs = {(a, b) for group in askers.values() for a in group for b in group if a < b}
    return sorted(pairs)


def answer_groups(exchanges: list[Exchange]) -> dict[str, str]:
    """Each question id → its answer group: the smallest question id of its connected component
    in the question–reply graph (union–find)."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for exchange in exchanges:
        for node in (exchange.question_id, "reply:" + exchange.answer_id):
            parent.setdefault(node, node)
        a, b = root(exchange.question_id), root("reply:" + exchange.answer_id)
        if a != b:
            parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = defaultdict(list)
    for exchange in exchanges:
        members[root(exchange.question_id)].append(exchange.question_id)
    return {question: min(group) for group in members.values() for question in group}


def _split_groups(group_of: dict[str, str], positives: list[tuple[str, str]], dev_share: float,
                  rng: np.random.Generator) -> dict[str, str]:
    positives_in: dict[str, int] = defaultdict(int)
    for a, _ in positives:
        positives_in[group_of[a]] += 1
    with_positives = sorted(positives_in)
    others = sorted(set(group_of.values()) - positives_in.keys())
    split_of: dict[str, str] = {}
    in_dev, target = 0, dev_share * len(positives)
    for index in rng.permutation(len(with_positives)):
        group = with_positives[index]
        split_of[group] = "dev" if in_dev < target else "test"
        in_dev += positives_in[group] if split_of[group] == "dev" else 0
    n_dev_others = round(dev_share * len(others))
    for rank, index in enumerate(rng.permutation(len(others))):
        split_of[others[index]] = "dev" if rank < n_dev_others else "test"
    return split_of


def _draw_negatives(positives: list[tuple[str, str]], members: list[str], questions: dict[str, tuple[str, str]],
                    group_of: dict[str, str], rng: np.random.Generator) -> tuple[list[tuple[str, str]], int]:
    by_category: dict[str, list[str]] = defaultdict(list)
    for question in members:
        by_category[questions[question][1]].append(question)
    drawn: set[tuple[str, str]] = set(positives)
    negatives: list[tuple[str, str]] = []
    fallbacks = 0
    for a, b in positives:
        first_pool, second_pool = by_category[questions[a][1]], by_category[questions[b][1]]
        pair = _draw_pair(first_pool, second_pool, group_of, drawn, rng)
        if pair is None:
            fallbacks += 1
            pair = _draw_pair(first_pool, members, group_of, drawn, rng) or _draw_pair(members, members, group_of, drawn, rng)
        if pair is None:
            raise DataError("chatterbot: too few questions in different answer groups to draw a negative for "
                            f"positive pair {a}~{b}; select more categories")
        drawn.add(pair)
        negatives.append(pair)
    return negatives, fallbacks


def _draw_pair(first: list[str], second: list[str], group_of: dict[str, str], drawn: set[tuple[str, str]],
               rng: np.random.Generator) -> tuple[str, str] | None:
    for _ in range(_MAX_DRAWS):
        q, r = first[rng.integers(len(first))], second[rng.integers(len(second))]
        pair = (min(q, r), max(q, r))
        if group_of[q] != group_of[r] and pair not in drawn:
            return pair
    return None


def _pair_category(questions: dict[str, tuple[str, str]], a: str, b: str) -> str:
    first, second = questions[a][1], questions[b][1]
    return first if first == second else "mixed"
