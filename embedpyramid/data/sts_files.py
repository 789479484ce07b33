"""STS pairs on disk: the STS Benchmark csv and plain ``sentence1, sentence2, score`` files.

* ``stsb`` — the STS Benchmark distribution (Cer et al. 2017, ``sts-{train,dev,test}.csv``):
  tab-separated ``genre, file, year, id, score, sentence1, sentence2``; some lines carry extra
  source columns after sentence2, which are ignored. Sentences contain unbalanced quotes, so
  fields are split on tabs with no quote handling (a csv reader would swallow lines).
* ``tsv`` — ``sentence1 <TAB> sentence2 <TAB> score``, with an optional header line
  ``sentence1 sentence2 score``.
* ``jsonl`` — one object per line with ``sentence1``, ``sentence2`` and ``score``.

Pair ids are the line numbers (``line-000042``); each distinct sentence is one text (its id a
content hash), encoded once however many pairs use it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables

STSB_FIELDS = 7
TSV_HEADER = ["sentence1", "sentence2", "score"]


def load_sts_file(path: Path, file_format: str, split: str = "test") -> TaskTables:
    """Read an STS file of ``file_format`` (``stsb``, ``tsv`` or ``jsonl``) into texts and pairs."""
    readers = {"stsb": _stsb_rows, "tsv": _tsv_rows, "jsonl": _jsonl_rows}
    if file_format not in readers:
        raise DataError(f"{path}: unknown STS format {file_format!r}; allowed: {', '.join(readers)}")
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    texts: dict[str, str] = {}
    pair_rows: list[tuple[str, str, str, float]] = []
    for number, first, second, score in readers[file_format](path):
        for sentence in (first, second):
            if not sentence:
                raise DataError(f"{path}:{number}: empty sentence; fix or remove the line")
        ids = []
        for sentence in (first, second):
            text_id = "t" + hashlib.sha1(sentence.encode("utf-8")).hexdigest()[:12]
            texts.setdefault(text_id, sentence)
            ids.append(text_id)
        pair_rows.append((f"line-{number:06d}", ids[0], ids[1], score))
    if not pair_rows:
        raise DataError(f"{path}: no sentence pairs")
    ordered = sorted(texts)
    pairs = pa.table({
        "pair_id": [row[0] for row in pair_rows],
        "text_id_1": [row[1] for row in pair_rows],
        "text_id_2": [row[2] for row in pair_rows],
        "gold": [row[3] for row in pair_rows],
        "split": [split] * len(pair_rows),
    }, schema=PAIRS_SCHEMA)
    source = {"loader": "sts-file", "path": str(path), "format": file_format, "split": split}
    return task_tables("sts", pa.table({"text_id": ordered, "text": [texts[t] for t in ordered]}), pairs, source, str(path))


def _score(path: Path, number: int, raw: Any) -> float:
    try:
        score = float(raw)
    except (TypeError, ValueError):
        raise DataError(f"{path}:{number}: score {raw!r} is not a number") from None
    if not math.isfinite(score):
        raise DataError(f"{path}:{number}: score {raw!r} is not finite")
    return score


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line


def _stsb_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) < STSB_FIELDS:
            raise DataError(
                f"{path}:{number}: expected at least {STSB_FIELDS} tab-separated fields "
                f"(genre, file, year, id, score, sentence1, sentence2), got {len(fields)}"
            )
        yield number, fields[5].strip(), fields[6].strip(), _score(path, number, fields[4])


def _tsv_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, line in _lines(path):
        fields = line.split("\t")
        if number == 1 and [f.strip().lower() for f in fields] == TSV_HEADER:
            continue
        if len(fields) != 3:
            raise DataError(f"{path}:{number}: expected 3 tab-separated fields (sentence1, sentence2, score), "
                            f"got {len(fields)}")
        yield number, fields[0].strip(), fields[1].strip(), _score(path, number, fields[2])


def _jsonl_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}:{number}: malformed JSON ({error.msg}); fix or remove the line") from None
        if not isinstance(record, dict) or any(key not in record for key in TSV_HEADER):
            raise DataError(f"{path}:{number}: expected an object with sentence1, sentence2 and score")
        yield number, str(record["sentence1"]).strip(), str(record["sentence2"]).strip(), \
            _score(path, number, record["score"])
