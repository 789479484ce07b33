"""Real data shipped in gensim's test folder (``gensim/test/test_data``), read without importing gensim.

* The **Lee corpus** (STS): ``lee.cor`` holds 50 short news documents, one per line (Latin-1:
  one line carries a pound sign as byte 0xA3); ``similarities0-1.txt`` is the 50 × 50 matrix of
  mean human similarity judgements on a 0–1 scale, whose row ``i`` and column ``j`` are the
  documents on lines ``i`` and ``j`` of ``lee.cor``. Only the upper triangle is filled (the
  diagonal is 1, the lower triangle 0), so the ``50·49/2 = 1,225`` document pairs are the
  entries ``j > i``. This is how gensim's own reproduction reads them (``gensim/test/test_lee.py``:
  ``np.loadtxt`` then ``np.triu_indices(50, 1)``). Reference: Lee, Pincombe & Welsh (2005), *An
  empirical evaluation of models of text document similarity*, CogSci 2005.
* The **mini newsgroups** sample (classification, clustering): ``mini_newsgroup`` is a
  zlib-compressed pickle (protocol 0) of a scikit-learn ``Bunch`` with 200 posts of 20
  Newsgroups, 100 from alt.atheism and 100 from sci.space (``data``, ``target``,
  ``target_names``, ``filenames``). It is unpickled with an allow-list of the five globals
  it references (nothing else can be constructed). Posts carry their headers (including
  ``Newsgroups:``, the label itself), so headers, signature footers and quoted lines are
  removed by default with scikit-learn's own ``fetch_20newsgroups`` helpers.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import zlib
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from embedpyramid.config.datasets import NewsgroupsDataset
from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables

LEE_DOCUMENTS = 50


def gensim_test_data() -> Path:
    """The installed ``gensim/test/test_data`` folder (located, not imported)."""
    spec = find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("package gensim is not installed; install it with pip install gensim")
    folder = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data"
    if not folder.is_dir():
        raise DataError(f"{folder}: gensim's test data folder is missing from this installation; reinstall gensim")
    return folder


def load_lee(folder: Path | None = None) -> TaskTables:
    """The 50 Lee documents as texts and their 1,225 pairs with the mean human similarity as gold."""
    folder = folder or gensim_test_data()
    corpus_path, scores_path = folder / "lee.cor", folder / "similarities0-1.txt"
    for path in (corpus_path, scores_path):
        if not path.is_file():
            raise DataError(f"{path}: file not found; the Lee corpus needs lee.cor and similarities0-1.txt")
    documents = [line.strip() for line in corpus_path.read_bytes().decode("latin-1").splitlines() if line.strip()]
    if len(documents) != LEE_DOCUMENTS:
        raise DataError(f"{corpus_path}: expected {LEE_DOCUMENTS} documents, one per line; found {len(documents)}")
    try:
        matrix = np.loadtxt(scores_path)
    except ValueError as error:
        raise DataError(f"{scores_path}: not a whitespace-separated matrix of numbers ({error})") from None
    if matrix.shape != (LEE_DOCUMENTS, LEE_DOCUMENTS):
        raise DataError(f"{scores_path}: expected a {LEE_DOCUMENTS}x{LEE_DOCUMENTS} matrix; found {matrix.shape}")
    ids = [f"lee-{line:02d}" for line in range(LEE_DOCUMENTS)]
    first, second = np.triu_indices(LEE_DOCUMENTS, 1)
    texts = pa.table({"text_id": ids, "text": documents})
    pairs = pa.table({
        "pair_id": [f"{ids[i]}~{ids[j]}" for i, j in zip(first, second, strict=True)],
        "text_id_1": [ids[i] for i in first],
        "text_id_2": [ids[j] for j in second],
        "gold": matrix[first, second].astype(np.float64),
        "split": ["test"] * len(first),
    }, schema=PAIRS_SCHEMA)
    source = {"loader": "gensim-lee", "corpus": str(corpus_path), "scores": str(scores_path),
              "scale": "mean human similarity, 0-1", "pairs": "upper triangle of the 50x50 matrix (j > i)"}
    return task_tables("sts", texts, pairs, source, str(corpus_path))


class _BunchUnpickler(pickle.Unpickler):
    """Unpickles the mini_newsgroup Bunch: a plain dict and numpy arrays, nothing else."""

    class Bunch(dict):
        pass

    def find_class(self, module: str, name: str) -> Any:
        from numpy._core.multiarray import _reconstruct

        allowed = {
            ("copy_reg", "_reconstructor"): copyreg._reconstructor,
            ("sklearn.datasets.base", "Bunch"): self.Bunch,
            ("__builtin__", "dict"): dict,
            ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy", "ndarray"): np.ndarray,
            ("numpy", "dtype"): np.dtype,
        }
        if (module, name) not in allowed:
            raise pickle.UnpicklingError(f"mini_newsgroup references {module}.{name}, which is not allowed")
        return allowed[(module, name)]


def load_mini_newsgroups(spec: NewsgroupsDataset, folder: Path | None = None) -> TaskTables:
    """The 200 posts labelled by newsgroup, with ``spec.remove`` parts stripped.

    Ids are the post's newsgroup and article number (``sci.space/61316``). Posts left empty by
    the stripping are dropped and listed in the manifest.
    """
    from sklearn.datasets._twenty_newsgroups import (
        strip_newsgroup_footer,
        strip_newsgroup_header,
        strip_newsgroup_quoting,
    )

    path = (folder or gensim_test_data()) / "mini_newsgroup"
    if not path.is_file():
        raise DataError(f"{path}: file not found; reinstall gensim")
    try:
        bunch = _BunchUnpickler(io.BytesIO(zlib.decompress(path.read_bytes())), encoding="latin1").load()
        posts, targets, names, files = bunch["data"], bunch["target"], bunch["target_names"], bunch["filenames"]
    except (zlib.error, pickle.UnpicklingError, KeyError, EOFError) as error:
        raise DataError(f"{path}: not the zlib-compressed newsgroups pickle gensim ships ({error})") from None
    strip = {"headers": strip_newsgroup_header, "footers": strip_newsgroup_footer, "quotes": strip_newsgroup_quoting}
    rows: dict[str, tuple[str, str]] = {}
    dropped: list[str] = []
    for post, target, filename in zip(posts, targets, files, strict=True):
        label = str(names[int(target)])
        text_id = f"{label}/{Path(bytes(filename).decode('latin-1').rstrip(chr(0))).name}"
        for part in ("headers", "footers", "quotes"):
            if part in spec.remove:
                post = strip[part](post)
        text = post.strip()
        if not text:
            dropped.append(text_id)
            continue
        rows[text_id] = (text, label)
    ids = sorted(rows)
    texts = pa.table({"text_id": ids, "text": [rows[i][0] for i in ids], "label": [rows[i][1] for i in ids]})
    source = {"loader": "gensim-newsgroups", "path": str(path), "removed": list(spec.remove),
              "labels": [str(name) for name in names], "dropped_empty_posts": dropped}
    return task_tables(spec.task, texts, None, source, str(path))
