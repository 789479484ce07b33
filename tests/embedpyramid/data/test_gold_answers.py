import pyarrow as pa

from embedpyramid.config import BeirDataset, ChatterbotDataset
from embedpyramid.data import (
    GOLD_ANSWERS_SCHEMA,
    QRELS_SCHEMA,
    dataset_gold_answers,
    gold_answers_from_relevant_documents,
)

CORPUS = pa.table({"doc_id": ["d1", "d2", "d3"], "title": ["", "", ""], "text": ["one", "two", "three"]})
QRELS = pa.table({"query_id": ["q2", "q1", "q1", "q3"], "doc_id": ["d3", "d2", "d1", "d3"], "relevance": [1, 2, 1, 0]},
                 schema=QRELS_SCHEMA)


def test_relevant_document_texts_are_the_gold_answers_above_the_threshold():
    gold = gold_answers_from_relevant_documents(CORPUS, QRELS, 1)
    assert gold.schema == GOLD_ANSWERS_SCHEMA
    assert gold.to_pylist() == [{"query_id": "q1", "answer": "one"}, {"query_id": "q1", "answer": "two"},
                                {"query_id": "q2", "answer": "three"}]
    assert gold_answers_from_relevant_documents(CORPUS, QRELS, 2).to_pylist() == [{"query_id": "q1", "answer": "two"}]


def test_chatterbot_has_gold_answers_and_a_beir_folder_has_none_unless_declared():
    assert ChatterbotDataset(loader="chatterbot").gold_answers == "relevant-documents"
    assert dataset_gold_answers(ChatterbotDataset(loader="chatterbot"), CORPUS, QRELS, 1).num_rows == 3
    assert dataset_gold_answers(BeirDataset(loader="beir", path="x"), CORPUS, QRELS, 1) is None
    declared = BeirDataset(loader="beir", path="x", gold_answers="relevant-documents")
    assert dataset_gold_answers(declared, CORPUS, QRELS, 1).num_rows == 3
