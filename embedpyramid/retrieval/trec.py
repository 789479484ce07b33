"""TREC run files: ``query_id Q0 doc_id rank score tag``, one line per retrieved document.

The format is whitespace-separated, so an id holding a space, a tab or a line break would add
columns and trec_eval would read the wrong fields. Such ids are refused rather than rewritten:
any reversible escape (``a b`` → ``a%20b``) would also have to rewrite ids that hold the escape
character, and those would then silently stop matching the user's own TREC qrels. The loaders
refuse them at load time (:func:`embedpyramid.data.frozen.trec_id_problem`), before anything is computed,
and the export refuses them again for runs from elsewhere.

Reference: the run format read by trec_eval (https://github.com/usnistgov/trec_eval, README).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from embedpyramid.data.frozen import trec_id_problem
from embedpyramid.store import atomic_path


def write_trec_run(run: pa.Table, target: Path, tag: str) -> Path:
    """Export a run (``query_id, rank, doc_id, score``) as a TREC run file, atomically.

    trec_eval re-sorts by score and breaks ties by doc id descending; scores here are exact
    float32 values printed with 9 significant digits, so tied documents stay tied there. An id
    or tag that would not read back as one field is refused, naming it (nothing is written).
    """
    checks = [("tag", [tag]), *((column, run.column(column).unique().to_pylist()) for column in ("query_id", "doc_id"))]
    for what, values in checks:
        for value in values:
            problem = trec_id_problem(value)
            if problem is not None:
                raise ValueError(f"{target}: cannot write {what} {value!r} to a TREC run: {problem}; rename it")
    columns = [run.column(name).to_pylist() for name in ("query_id", "doc_id", "rank", "score")]
    with atomic_path(target) as temporary, temporary.open("w", encoding="utf-8") as handle:
        for query_id, doc_id, rank, score in zip(*columns, strict=True):
            handle.write(f"{query_id} Q0 {doc_id} {rank} {score:.9g} {tag}\n")
    return target
