import numpy as np

from embedpyramid.config import NewsgroupsDataset
from embedpyramid.data import load_lee, load_mini_newsgroups
from embedpyramid.data.gensim_data import gensim_test_data


def test_lee_corpus_has_fifty_documents_and_every_pair_scored():
    tables = load_lee()
    assert tables.texts.num_rows == 50 and tables.pairs.num_rows == 50 * 49 // 2
    texts = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["text"].to_pylist(), strict=True))
    assert texts["lee-00"].startswith("The national executive of the strife-torn Democrats")
    assert any("£" in text for text in texts.values())  # Latin-1 byte 0xA3, decoded
    matrix = np.loadtxt(gensim_test_data() / "similarities0-1.txt")
    pairs = {row["pair_id"]: row["gold"] for row in tables.pairs.to_pylist()}
    # Row i, column j > i of the matrix scores lines i and j of lee.cor.
    assert pairs["lee-00~lee-01"] == matrix[0, 1] == 0.3
    assert pairs["lee-03~lee-47"] == matrix[3, 47]
    assert min(pairs.values()) >= 0.2 and max(pairs.values()) <= 1.0


def test_mini_newsgroups_without_the_headers_that_name_the_label():
    tables = load_mini_newsgroups(NewsgroupsDataset(loader="gensim-newsgroups"))
    labels = tables.texts["label"].to_pylist()
    # 200 posts, 100 per group; 7 are only headers, quotes or a signature and are dropped.
    assert len(labels) + len(tables.source["dropped_empty_posts"]) == 200
    assert set(labels) == {"alt.atheism", "sci.space"} and abs(labels.count("alt.atheism") - 100) <= 7
    # scikit-learn's header stripping cuts at the first blank line; one post (sci.space/61224)
    # has a blank line inside its headers, so its second header block survives.
    leaking = [i for i, text in zip(tables.texts["text_id"].to_pylist(), tables.texts["text"].to_pylist(), strict=True)
               if "Newsgroups:" in text]
    assert leaking == ["sci.space/61224"]
    raw = load_mini_newsgroups(NewsgroupsDataset(loader="gensim-newsgroups", remove=[]))
    assert raw.texts.num_rows == 200
    # Kept, the headers name the label (a cross-post names it among others).
    assert all(label in text.split("\n\n")[0]
               for text, label in zip(raw.texts["text"].to_pylist(), raw.texts["label"].to_pylist(), strict=True))
    assert raw.texts["text_id"].to_pylist()[0] == "alt.atheism/51121"  # newsgroup/article number
