import json
from pathlib import Path

import pytest

from embedpyramid.config import SquadDataset, load_config
from embedpyramid.data import DataError, freeze_dataset, load_configured_dataset, load_squad, verify_frozen

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "squad" / "squad-v2-mini.json"
NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, "
           "a region in France.")


def squad(**fields) -> SquadDataset:
    return SquadDataset(**{"loader": "squad", "path": str(FIXTURE), **fields})


def relevant_texts(raw) -> dict[str, set[str]]:
    texts = {row["doc_id"]: row["text"] for row in raw.corpus.to_pylist()}
    relevant: dict[str, set[str]] = {}
    for row in raw.qrels.to_pylist():
        relevant.setdefault(row["query_id"], set()).add(texts[row["doc_id"]])
    return relevant


def test_paragraphs_become_documents_and_answerable_questions_queries():
    raw = load_squad(FIXTURE, squad())
    # 6 paragraphs, one repeated under a second article: 5 documents, the oxygen paragraph (all its
    # questions unanswerable) included as a distractor.
    assert raw.corpus.num_rows == 5
    assert raw.source["paragraphs"] == 6 and raw.source["duplicate_paragraphs_merged"] == 1
    assert raw.queries["query_id"].to_pylist() == ["c1", "c2", "d1", "n1", "n2", "n4"]
    assert raw.source["unanswerable_excluded"] == 2 and raw.source["without_answer_excluded"] == 0
    relevant = relevant_texts(raw)
    assert relevant["n1"] == relevant["n2"] == relevant["d1"] == {NORMANS}
    assert all(len(texts) == 1 for texts in relevant.values())
    assert raw.qrels["relevance"].to_pylist() == [1] * 6
    assert all(title == "" for title in raw.corpus["title"].to_pylist())


def test_titles_and_article_slices_are_opt_in():
    raw = load_squad(FIXTURE, squad(include_title=True, slices=["article"]))
    titles = {row["text"]: row["title"] for row in raw.corpus.to_pylist()}
    assert titles[NORMANS] == "Normans"  # the first article the paragraph appears under
    articles = dict(zip(raw.queries["query_id"].to_pylist(), raw.queries["article"].to_pylist(), strict=True))
    assert articles["d1"] == "Normandy" and articles["c2"] == "Computational_complexity_theory"


def test_doc_ids_are_content_hashes_stable_across_freezes(tmp_path):
    first = freeze_dataset("squad", load_squad(FIXTURE, squad()), tmp_path / "a")
    second = freeze_dataset("squad", load_squad(FIXTURE, squad()), tmp_path / "b")
    assert first.version == second.version and verify_frozen(first) == []
    assert first.manifest["source"]["unanswerable_excluded"] == 2


def test_configured_squad_dataset_loads_relative_to_the_config_folder(write_configs):
    folder = write_configs(datasets={"squad-mini": {"loader": "squad", "path": "squad.json", "role": "public"}})
    (folder / "squad.json").write_text(FIXTURE.read_text())
    config = load_config(folder)
    assert config.datasets["squad-mini"].role == "public"
    assert load_configured_dataset(config, "squad-mini").queries.num_rows == 6


def write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def article(*qas, context: str = "Some text.") -> dict:
    return {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": list(qas)}]}]}


def answered(qid: str, question: str = "What?") -> dict:
    return {"id": qid, "question": question, "answers": [{"text": "Some", "answer_start": 0}]}


@pytest.mark.parametrize(("content", "message"), [
    ('{"data": [\n  {"title": "T",\n  }]}', r"bad.json:3: malformed JSON"),
    (b'{"data": "\xff"}', r"bad.json: not valid UTF-8 at byte 10"),
    ('{"version": "1.1"}', r"bad.json: 'data' must be a list; is this a SQuAD/KorQuAD file\?"),
    (json.dumps(article(answered("a"), answered("a"))), r"data\[0\].paragraphs\[0\].qas\[1\]: duplicate question id 'a' "
                                                        r"\(first at .*qas\[0\]\)"),
    (json.dumps(article(answered("a"), context="  ")), r"data\[0\].paragraphs\[0\]: empty or missing 'context'"),
    (json.dumps(article(answered("a", question=" "))), r"qas\[0\]: question 'a' has an empty text"),
    (json.dumps(article({"id": "a", "question": "Q?", "answers": [], "is_impossible": True})),
     r"bad.json: no answerable question; nothing to evaluate"),
])
def test_bad_files_are_errors_naming_the_file_and_place(tmp_path, content, message):
    with pytest.raises(DataError, match=message):
        load_squad(write(tmp_path, content), squad())


def test_a_bom_is_accepted_and_questions_without_answers_are_counted(tmp_path):
    content = article(answered("a"), {"id": "b", "question": "Unanswered?", "answers": []})
    raw = load_squad(write(tmp_path, b"\xef\xbb\xbf" + json.dumps(content).encode()), squad())
    assert raw.queries["query_id"].to_pylist() == ["a"] and raw.source["without_answer_excluded"] == 1
