import polars as pl
import pytest

from embedpyramid.transfer import PublishedScore, ReproductionContext, check_reproduction, reproduce, reproduction_frame

CONTEXT = ReproductionContext(query_prompt="", document_prompt="", titled_documents=3, n_documents=5,
                              conventions={"gain": "linear", "relevance_threshold": 1, "drop_self_hits": False})
KEY = "minilm-l6@2935d10"


def published(value: float, tolerance: float, metric: str = "nDCG@10") -> PublishedScore:
    return PublishedScore("scifact", "minilm-l6", metric, value, tolerance, "MTEB results, SciFact test", "datasets.yaml")


def per_query(values: list[float], metric: str = "nDCG@10") -> pl.DataFrame:
    return pl.DataFrame(
        [("scifact", KEY, "exact", f"q{i}", metric, v) for i, v in enumerate(values)],
        schema=["dataset", "model", "system", "query_id", "metric", "value"], orient="row",
    )


def test_reproduction_passes_within_the_tolerance():
    # mean(0.6, 0.7, 0.64) = 0.6466...; published 0.6451: difference +0.0016 <= 0.002.
    [check] = reproduce([published(0.6451, 0.002)], per_query([0.6, 0.7, 0.64]), model="minilm-l6", model_key=KEY,
                        context=CONTEXT)
    assert check.status == "pass" and check.passed
    assert check.measured == pytest.approx(0.646666666, abs=1e-8)
    assert check.difference == pytest.approx(0.0015666667, abs=1e-9)
    assert check.n_items == 3
    assert check.message == ("minilm-l6 on scifact, nDCG@10: measured 0.6467 over 3 queries, published 0.6451 "
                             "(MTEB results, SciFact test), difference +0.0016 within ±0.002: reproduced")


def test_reproduction_fails_on_purpose_and_names_the_usual_causes():
    [check] = reproduce([published(0.6451, 0.0005)], per_query([0.6, 0.7, 0.64]), model="minilm-l6", model_key=KEY,
                        context=CONTEXT)
    assert check.status == "fail" and not check.passed
    assert "difference +0.0016 outside ±0.0005: not reproduced" in check.message
    for cause in ('document text (title + " " + text for 3 of 5 documents', "query prompt '' and document prompt ''",
                  "relevance threshold 1", "self-hits kept (drop_self_hits: false)", "ties in score: broken by doc_id, ascending"):
        assert cause in check.message


def test_a_difference_equal_to_the_tolerance_passes():
    check = check_reproduction(published(0.6451, 0.0005), 0.6446, model_key=KEY, n_items=300, context=CONTEXT)
    assert check.status == "pass"


def test_unmeasured_metric_and_other_cards_are_not_passes():
    checks = reproduce([published(0.67665, 0.0005, metric="nDCG@20"),
                        PublishedScore("scifact", "use-m3", "nDCG@10", 0.6, 0.01, "x", "datasets.yaml")],
                       per_query([0.5]), model="minilm-l6", model_key=KEY, context=CONTEXT)
    [check] = checks
    assert (check.status, check.measured, check.difference) == ("not measured", None, None)
    assert "not measured by this run" in check.message
    frame = reproduction_frame(checks)
    assert frame.columns[:5] == ["dataset", "model", "model_key", "metric", "published"]
    assert frame["status"].to_list() == ["not measured"]


def test_context_states_the_tie_rule_the_metric_table_recorded():
    context = ReproductionContext("query: ", "passage: ", None, None,
                                  {"relevance_threshold": 2, "drop_self_hits": True, "ties": "expected"})
    causes = context.causes()
    assert "document text (unknown for this dataset)" in causes
    assert "query prompt 'query: ' and document prompt 'passage: '" in causes
    assert "relevance threshold 2; self-hits dropped; ties in score: expected" in causes
