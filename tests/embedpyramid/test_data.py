import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from embedpyramid.config import BeirDataset, ChatterbotDataset, load_config
from embedpyramid.data import (
    DataError,
    encoding_inputs,
    freeze_dataset,
    load_beir,
    load_chatterbot,
    load_configured_dataset,
    open_frozen,
    trec_id_problem,
    verify_frozen,
)


def chatterbot(**fields) -> ChatterbotDataset:
    return ChatterbotDataset(loader="chatterbot", **fields)


def test_chatterbot_questions_are_queries_and_distinct_answers_documents():
    raw = load_chatterbot(chatterbot())
    # 2,026 English conversations, 749 distinct opening questions; one entry of trivia.yml is
    # a bare string (no answer), and its question appears nowhere else.
    assert raw.queries.num_rows == 748
    assert raw.source["skipped_conversations"] == ["trivia.yml conversation 13: not a question followed by an answer"]
    assert raw.corpus.num_rows == 870
    assert raw.qrels.num_rows == 897
    queries = {row["text"]: row for row in raw.queries.to_pylist()}
    documents = {row["doc_id"]: row["text"] for row in raw.corpus.to_pylist()}
    relevant: dict[str, set[str]] = {}
    for row in raw.qrels.to_pylist():
        relevant.setdefault(row["query_id"], set()).add(documents[row["doc_id"]])
    # The same question asked in two conversations: both answers are relevant.
    what_is_ai = relevant[queries["What is AI?"]["query_id"]]
    assert what_is_ai == {
        "Artificial Intelligence is the branch of engineering and science devoted to constructing machines that think.",
        "AI is the field of science which concerns itself with building hardware and software that replicates "
        "the functions of the human mind.",
    }
    assert queries["What is AI?"]["category"] == "AI"
    # An answer shared by several questions is one document they all point to.
    pointing = {}
    for row in raw.qrels.to_pylist():
        pointing.setdefault(row["doc_id"], set()).add(row["query_id"])
    assert max(len(qs) for qs in pointing.values()) > 1
    assert set(relevant) == {row["query_id"] for row in raw.queries.to_pylist()}
    assert len({row["category"] for row in raw.queries.to_pylist()}) == 21


def test_chatterbot_categories_filter_and_unknown_category():
    raw = load_chatterbot(chatterbot(categories=["ai", "computers"]))
    assert {row["category"] for row in raw.queries.to_pylist()} == {"AI", "computers"}
    with pytest.raises(DataError, match="categories \\['robots'\\] are not chatterbot-corpus english files; allowed: ai, botprofile"):
        load_chatterbot(chatterbot(categories=["robots"]))


def test_refreezing_identical_data_keeps_the_version(tmp_path):
    spec = chatterbot(categories=["ai"])
    first = freeze_dataset("ai", load_chatterbot(spec), tmp_path / "ai")
    mtime = (tmp_path / "ai" / "corpus.parquet").stat().st_mtime_ns
    second = freeze_dataset("ai", load_chatterbot(spec), tmp_path / "ai")
    assert first.version == second.version == open_frozen(tmp_path / "ai").version
    assert (tmp_path / "ai" / "corpus.parquet").stat().st_mtime_ns >= mtime
    assert second.manifest["counts"]["queries"] == pq.read_table(tmp_path / "ai" / "queries.parquet").num_rows
    assert verify_frozen(second) == []


def test_verify_frozen_reports_a_tampered_table(tmp_path):
    frozen = freeze_dataset("ai", load_chatterbot(chatterbot(categories=["ai"])), tmp_path / "ai")
    table = frozen.read("qrels")
    pq.write_table(table.slice(1), frozen.path("qrels"))
    assert any("does not match the sha256" in problem for problem in verify_frozen(frozen))


def write_beir(folder: Path, corpus: list, queries: list, qrels: str) -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        (folder / name).write_text("".join(row if isinstance(row, str) else json.dumps(row) + "\n" for row in rows))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


CORPUS = [
    {"_id": "d2", "title": "Cats", "text": "Cats purr."},
    {"_id": "d1", "title": "", "text": "Dogs bark."},
    {"_id": "d3", "text": "Birds sing."},
]
QUERIES = [
    {"_id": "q1", "text": "what do dogs do", "metadata": {"topic": "dogs"}},
    {"_id": "q2", "text": "purring animals", "topic": "cats"},
    {"_id": "q3", "text": "never judged"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq2\td3\t0\n"
BEIR = BeirDataset(loader="beir", path=".", slices=["topic"])


def test_beir_folder_loads_sorted_with_slices(tmp_path):
    raw = load_beir(write_beir(tmp_path, CORPUS, QUERIES, QRELS), BEIR)
    assert raw.corpus["doc_id"].to_pylist() == ["d1", "d2", "d3"]
    assert raw.queries.to_pylist() == [
        {"query_id": "q1", "text": "what do dogs do", "topic": "dogs"},
        {"query_id": "q2", "text": "purring animals", "topic": "cats"},
    ]
    assert raw.qrels.to_pylist()[0] == {"query_id": "q1", "doc_id": "d1", "relevance": 2}
    assert raw.source["unjudged_queries_dropped"] == 1


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "message"),
    [
        ([*CORPUS, '{"_id": "d4", "text": "broken\n'], QUERIES, QRELS, r"corpus\.jsonl:4: malformed JSON"),
        ([*CORPUS, {"_id": "d1", "text": "again"}], QUERIES, QRELS, r"corpus\.jsonl:4: duplicate id 'd1' \(first on line 2\)"),
        (CORPUS, QUERIES, QRELS + "q9\td1\t1\n", r"test\.tsv:5: query id 'q9' is not in queries\.jsonl"),
        (CORPUS, QUERIES, QRELS + "q1\td9\t1\n", r"test\.tsv:5: document id 'd9' is not in corpus\.jsonl"),
        (CORPUS, QUERIES, QRELS + "q1\td2\thigh\n", r"test\.tsv:5: score 'high' is not an integer grade"),
        (CORPUS, QUERIES, QRELS + "q1\td1\t1\n", r"test\.tsv:5: duplicate judgement for \('q1', 'd1'\)"),
    ],
)
def test_bad_beir_input_names_file_and_line(tmp_path, corpus, queries, qrels, message):
    with pytest.raises(DataError, match=message):
        load_beir(write_beir(tmp_path, corpus, queries, qrels), BEIR)


def test_bad_input_leaves_the_frozen_dataset_intact(tmp_path, write_configs):
    folder = write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)
    config = load_config(write_configs(datasets={"toy": {"loader": "beir", "path": str(folder)}}))
    frozen = freeze_dataset("toy", load_configured_dataset(config, "toy"), tmp_path / "frozen")
    before = {path.name: path.read_bytes() for path in (tmp_path / "frozen").iterdir()}
    (folder / "qrels" / "test.tsv").write_text(QRELS + "q1\tnope\t1\n")
    with pytest.raises(DataError, match="'nope' is not in corpus.jsonl"):
        freeze_dataset("toy", load_configured_dataset(config, "toy"), tmp_path / "frozen")
    assert {path.name: path.read_bytes() for path in (tmp_path / "frozen").iterdir()} == before
    assert verify_frozen(open_frozen(tmp_path / "frozen")) == [] and frozen.version == open_frozen(tmp_path / "frozen").version


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("corpus.jsonl", b'{"_id": "d1", "text": "Dogs bark."}\n{"_id": "d2", "text": "caf\xe9"}\n',
         r"corpus\.jsonl:2: not valid UTF-8 \(byte 0xe9 at column 27\); save the file as UTF-8$"),
        ("queries.jsonl", b'{"_id": "q1", "text": "what do dogs do"}\n\n\xff\n',
         r"queries\.jsonl:3: not valid UTF-8 \(byte 0xff at column 1\)"),
        ("qrels/test.tsv", b"query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td\x80\t1\n", r"test\.tsv:3: not valid UTF-8 \(byte 0x80"),
    ],
)
def test_invalid_utf8_names_file_and_line(tmp_path, file, content, message):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    (folder / file).write_bytes(content)
    with pytest.raises(DataError, match=message) as error:
        load_beir(folder, BEIR)
    assert str(error.value).startswith(str(folder / file))


def test_byte_order_marks_are_dropped(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (folder / name).write_bytes(b"\xef\xbb\xbf" + (folder / name).read_bytes())
    raw = load_beir(folder, BEIR)
    assert raw.qrels.num_rows == 3 and raw.corpus["doc_id"].to_pylist() == ["d1", "d2", "d3"]


def test_missing_split_lists_the_splits_that_exist(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    (folder / "qrels" / "dev.tsv").write_text(QRELS)
    with pytest.raises(DataError, match=r"qrels/train\.tsv: file not found; split 'train' does not exist in .*; "
                                        r"splits that exist: dev, test \(set split: in datasets\.yaml\)$"):
        load_beir(folder, BeirDataset(loader="beir", path=".", split="train"))


def test_dataset_without_relevant_judgements_is_refused_at_load(tmp_path, write_configs):
    folder = write_beir(tmp_path / "beir", CORPUS, QUERIES, "q1\td1\t0\nq2\td2\t0\n")
    config = load_config(write_configs(datasets={"toy": {"loader": "beir", "path": str(folder)}}))
    with pytest.raises(DataError, match=r"qrels/test\.tsv: dataset 'toy' has no judgement with grade >= 1 \(grades present: "
                                        r"0\), so every query would be excluded; add relevant judgements or lower "
                                        r"relevance_threshold in protocol\.yaml$"):
        load_configured_dataset(config, "toy")
    protocol = {"relevance_threshold": 2}
    chat = {"chat": {"loader": "chatterbot", "categories": ["ai"]}}
    config = load_config(write_configs("strict", datasets=chat, protocol=protocol))
    with pytest.raises(DataError, match=r"chatterbot-corpus english: dataset 'chat' has no judgement with grade >= 2 "
                                        r"\(grades present: 1\)"):
        load_configured_dataset(config, "chat")


def test_beir_slice_field_no_judged_query_has_is_refused(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    with pytest.raises(DataError, match=r"queries\.jsonl: slice/group field 'lang' is set on none of the 2 judged queries; "
                                        r"fields that exist \(top level or under metadata\): topic$"):
        load_beir(folder, BeirDataset(loader="beir", path=".", slices=["topic", "lang"]))
    # a field some queries lack is kept: those queries fall in the missing-value slice, counted in the manifest
    queries = [QUERIES[0], {"_id": "q2", "text": "purring animals"}]
    raw = load_beir(write_beir(tmp_path / "partial", CORPUS, queries, QRELS), BEIR)
    assert raw.queries["topic"].to_pylist() == ["dogs", None]
    assert raw.source["queries_without_slice_value"] == {"topic": 1}


@pytest.mark.parametrize("bad_id", ["d 4", "d\t4", "d4\u2028"])
def test_ids_that_cannot_be_written_to_a_trec_run_are_refused_at_load(tmp_path, bad_id):
    folder = write_beir(tmp_path, [*CORPUS, {"_id": bad_id, "text": "Fish swim."}], QUERIES, QRELS)
    with pytest.raises(DataError, match=r"corpus\.jsonl:4: id .* cannot be used: it contains whitespace, which separates "
                                        r"the columns of TREC files \(runs are exported as TREC files\); rename it here "
                                        r"and in the qrels$"):
        load_beir(folder, BEIR)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"categories:\n- tiny\nconversations:\n- - Hi\n  - caf\xe9\n", r"tiny\.yml:5: not valid UTF-8 \(byte 0xe9"),
        (b"categories: [tiny\nconversations:\n", r"tiny\.yml:\d+: not valid YAML \(.*\); reinstall chatterbot-corpus"),
        (b"- just\n- a list\n", r"tiny\.yml: expected a mapping with 'categories' and 'conversations', got list"),
    ],
)
def test_broken_chatterbot_files_name_the_file_and_line(tmp_path, monkeypatch, content, message):
    # A chatterbot_corpus folder earlier on the path is the one the loader locates (it never imports it).
    data = tmp_path / "chatterbot_corpus" / "data" / "english"
    data.mkdir(parents=True)
    (tmp_path / "chatterbot_corpus" / "__init__.py").write_text("")
    (data / "tiny.yml").write_bytes(content)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DataError, match=message):
        load_chatterbot(chatterbot())
# Like BEIR-format Cranfield: two empty documents, one of them judged relevant.
EMPTY_CORPUS = [*CORPUS, {"_id": "471", "title": "", "text": ""}, {"_id": "995", "title": " ", "text": " "}]
EMPTY_QUERIES = [*QUERIES, {"_id": "q4", "text": "  "}]
EMPTY_QRELS = QRELS + "q2\t995\t1\nq4\td1\t1\n"


def test_empty_texts_are_kept_by_default_and_listed_in_the_manifest(tmp_path):
    raw = load_beir(write_beir(tmp_path / "beir", EMPTY_CORPUS, EMPTY_QUERIES, EMPTY_QRELS), BEIR)
    assert raw.corpus["doc_id"].to_pylist() == ["471", "995", "d1", "d2", "d3"]
    assert ("q2", "995", 1) in [tuple(r.values()) for r in raw.qrels.to_pylist()]
    frozen = freeze_dataset("cran", raw, tmp_path / "frozen")
    assert frozen.manifest["empty_texts"] == {"documents": ["471", "995"], "queries": ["q4"]}
    assert frozen.manifest["source"]["empty_texts"]["policy"] == "keep"
    inputs = encoding_inputs(frozen, "document")
    assert inputs.texts[:2] == ["", ""]


def test_empty_texts_dropped_list_what_went_with_them(tmp_path):
    spec = BEIR.model_copy(update={"empty_texts": "drop"})
    raw = load_beir(write_beir(tmp_path, EMPTY_CORPUS, EMPTY_QUERIES, EMPTY_QRELS), spec)
    assert raw.corpus["doc_id"].to_pylist() == ["d1", "d2", "d3"] and "q4" not in raw.queries["query_id"].to_pylist()
    assert raw.source["empty_texts"] == {"policy": "drop", "dropped_documents": ["471", "995"],
                                         "dropped_queries": ["q4"], "dropped_qrels": [["q2", "995", 1], ["q4", "d1", 1]]}
    assert raw.qrels.num_rows == 3


def test_empty_texts_as_an_error_name_the_line_and_the_option(tmp_path):
    spec = BEIR.model_copy(update={"empty_texts": "error"})
    with pytest.raises(DataError, match=r"corpus\.jsonl:4: document '471' has an empty title and text; set empty_texts"):
        load_beir(write_beir(tmp_path, EMPTY_CORPUS, QUERIES, QRELS), spec)
    with pytest.raises(DataError, match=r"queries\.jsonl:4: query 'q4' has an empty text; set empty_texts: keep"):
        load_beir(write_beir(tmp_path, CORPUS, EMPTY_QUERIES, QRELS), spec)


def test_trec_id_problem():
    assert trec_id_problem("<dbpedia:100%_Pure_Love>") is None
    assert trec_id_problem("é-ü") is None
    assert "whitespace" in trec_id_problem("a\u00a0b")
    assert trec_id_problem("") == "it is empty"


def test_document_lengths_are_those_of_the_encoded_texts_without_python_strings():
    import pyarrow as pa

    from embedpyramid.data import document_lengths, document_texts

    corpus = pa.table({"doc_id": ["a", "b", "c", "d"], "title": ["Tïtle", "", None, "x"],
                       "text": ["héllo wörld", "plain", "no title", None]})
    assert document_lengths(corpus).tolist() == [len(text) for text in document_texts(
        pa.table({"title": ["Tïtle", "", "", "x"], "text": ["héllo wörld", "plain", "no title", ""]}))]
