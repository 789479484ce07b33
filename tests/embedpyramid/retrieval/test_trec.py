import numpy as np
import pytest
import pytrec_eval

from embedpyramid.retrieval.search import run_table
from embedpyramid.retrieval.trec import write_trec_run


def test_trec_export_writes_six_columns_with_exact_scores(tmp_path):
    scores = np.array([[0.9, 0.5], [0.7, 0.7]], np.float32)
    run = run_table(["q1", "q2"], ["d1", "d2"], scores, np.array([[1, 0], [0, 1]]))
    lines = write_trec_run(run, tmp_path / "run.trec", tag="m@1").read_text().splitlines()
    assert lines[0] == "q1 Q0 d2 1 0.899999976 m@1"
    assert lines[3] == "q2 Q0 d2 2 0.699999988 m@1"
    assert all(len(line.split()) == 6 for line in lines)
    parsed: dict[str, dict[str, float]] = {}
    for line in lines:
        query_id, _, doc_id, _, score, _ = line.split()
        parsed.setdefault(query_id, {})[doc_id] = float(score)
    assert parsed == {"q1": {"d2": pytest.approx(0.9), "d1": pytest.approx(0.5)},
                      "q2": {"d1": pytest.approx(0.7), "d2": pytest.approx(0.7)}}
    # The tie in q2 stays a tie: trec_eval orders it by doc id descending, d2 first.
    evaluator = pytrec_eval.RelevanceEvaluator({"q1": {"d2": 1}, "q2": {"d2": 1}}, {"P_1"})
    assert {q: m["P_1"] for q, m in evaluator.evaluate(parsed).items()} == {"q1": 1.0, "q2": 1.0}


@pytest.mark.parametrize(
    ("query_ids", "doc_ids", "tag", "message"),
    [
        (["q 1"], ["d1"], "m", r"run\.trec: cannot write query_id 'q 1' to a TREC run: it contains whitespace"),
        (["q1"], ["d\t1"], "m", r"cannot write doc_id 'd\\t1' to a TREC run: it contains whitespace"),
        (["q1"], ["d\x001"], "m", r"cannot write doc_id 'd\\x001'.*control character"),
        (["q1"], ["d1"], "my run", r"cannot write tag 'my run'"),
    ],
)
def test_ids_that_would_split_into_more_columns_are_refused(tmp_path, query_ids, doc_ids, tag, message):
    run = run_table(query_ids, doc_ids, np.array([[0.5]], np.float32), np.array([[0]]))
    with pytest.raises(ValueError, match=message):
        write_trec_run(run, tmp_path / "run.trec", tag=tag)
    assert list(tmp_path.iterdir()) == []
