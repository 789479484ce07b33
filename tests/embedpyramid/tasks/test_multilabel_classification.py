"""Multi-label classification's pieces on hand-computed cases; the whole protocol is checked
against mteb's own task in test_mteb_protocol.py."""

import json

import numpy as np
import polars as pl
import pytest

from embedpyramid.config.tasks import MtebMultilabelClassification, MultilabelClassificationSettings
from embedpyramid.data import TaskError
from embedpyramid.tasks.multilabel_classification import (
    evaluate_multilabel_classification,
    hamming_score,
    mteb_multilabel_undersample,
)
from embedpyramid.vectors import TextVectors


def test_hamming_score_is_intersection_over_union_per_item_and_one_for_two_empty_sets():
    gold = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0]])
    predicted = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]])
    assert hamming_score(gold, predicted) == pytest.approx((1 / 2 + 1 + 0) / 3)


def test_undersampling_keeps_an_item_while_one_of_its_labels_is_short():
    labels = [["a"], ["a", "b"], ["b"], ["a"], ["c"]]
    rng = np.random.default_rng(0)
    order = list(np.arange(5))
    np.random.default_rng(0).shuffle(order)
    kept, counts = [], {"a": 0, "b": 0, "c": 0}
    for row in order:  # one item per label: the first item of each label in the shuffled order
        if any(counts[label] < 1 for label in labels[row]):
            kept.append(int(row))
            for label in labels[row]:
                counts[label] += 1
    assert mteb_multilabel_undersample(labels, 1, rng) == kept
    assert {label for row in kept for label in labels[row]} == {"a", "b", "c"}


def test_an_eval_split_mteb_would_cut_is_refused_rather_than_scored_otherwise():
    ids = [f"t{i}" for i in range(12)]
    texts = pl.DataFrame({"text_id": ids, "label": [json.dumps([i % 2]) for i in range(12)],
                          "split": ["train"] * 6 + ["test"] * 6})
    vectors = TextVectors(ids, np.eye(12, dtype=np.float32))
    settings = MultilabelClassificationSettings(mteb=MtebMultilabelClassification(max_eval_samples=5, noise_seeds=0))
    with pytest.raises(TaskError, match=r"d: the eval split has 6 items, above max_eval_samples \(5\): MTEB cuts it "
                                        r"by iterative stratification, which is not reproduced here; set "
                                        "multilabel_classification.mteb.max_eval_samples: null"):
        evaluate_multilabel_classification(texts, vectors, settings, dataset="d", model="m")
    with pytest.raises(TaskError, match=r"trains on split 'train' and scores split 'test'; the dataset has train"):
        evaluate_multilabel_classification(texts.filter(pl.col("split") == "train"), vectors, settings, dataset="d",
                                           model="m")
