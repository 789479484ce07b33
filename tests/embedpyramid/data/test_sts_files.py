import json

import pytest

from embedpyramid.data import DataError, load_sts_file

STSB = (
    "main-captions\tMSRvid\t2012test\t0001\t5.000\tA man is playing a flute.\tA man plays the flute.\n"
    # Extra source columns after sentence2, and unbalanced quotes a csv reader would swallow.
    'main-news\theadlines\t2015\t0002\t1.400\tHe said "no to it.\tShe "quoted" him\tsrc-a.txt\tsrc-b.txt\n'
    "main-forums\tdeft-forum\t2014\t0003\t0.0\tA man plays the flute.\tThe cat sleeps.\n"
)


def test_stsb_lines_with_extra_columns_and_quotes(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text(STSB, encoding="utf-8")
    tables = load_sts_file(path, "stsb")
    pairs = tables.pairs.to_pylist()
    texts = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["text"].to_pylist(), strict=True))
    assert [p["pair_id"] for p in pairs] == ["line-000001", "line-000002", "line-000003"]
    assert [p["gold"] for p in pairs] == [5.0, 1.4, 0.0]
    assert (texts[pairs[1]["text_id_1"]], texts[pairs[1]["text_id_2"]]) == ('He said "no to it.', 'She "quoted" him')
    # "A man plays the flute." appears twice: one text, encoded once.
    assert tables.texts.num_rows == 5 and pairs[0]["text_id_2"] == pairs[2]["text_id_1"]
    assert tables.source["format"] == "stsb" and set(tables.pairs["split"].to_pylist()) == {"test"}


@pytest.mark.parametrize(("content", "message"), [
    ("genre\tfile\tyear\tid\t4.0\tonly one sentence\n", r"sts\.csv:1: expected at least 7 tab-separated fields"),
    ("a\tb\tc\td\tfive\tx\ty\n", r"sts\.csv:1: score 'five' is not a number"),
    ("a\tb\tc\td\t1\tx\ty\n\na\tb\tc\td\t2\t \ty\n", r"sts\.csv:3: empty sentence"),
])
def test_bad_stsb_lines_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "sts.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        load_sts_file(path, "stsb")


def test_plain_tsv_with_header_and_jsonl(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("sentence1\tsentence2\tscore\nA dog runs.\tA dog is running.\t0.9\nA cat.\tA car.\t0.1\n")
    tables = load_sts_file(tsv, "tsv", split="dev")
    assert tables.pairs["gold"].to_pylist() == [0.9, 0.1] and set(tables.pairs["split"].to_pylist()) == {"dev"}
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("\n".join(json.dumps({"sentence1": a, "sentence2": b, "score": s})
                               for a, b, s in [("A dog runs.", "A dog is running.", 0.9), ("A cat.", "A car.", 0.1)]))
    assert load_sts_file(jsonl, "jsonl").pairs["gold"].to_pylist() == [0.9, 0.1]
    (tmp_path / "bad.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a"\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: malformed JSON"):
        load_sts_file(tmp_path / "bad.jsonl", "jsonl")
    (tmp_path / "bad.tsv").write_text("a\tb\n")
    with pytest.raises(DataError, match=r"bad\.tsv:1: expected 3 tab-separated fields"):
        load_sts_file(tmp_path / "bad.tsv", "tsv")
