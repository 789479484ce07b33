import pytest

from embedpyramid.config import Measure, default_measures, parse_measure


@pytest.mark.parametrize(
    "text", ["Recall@1", "Hit@3", "MRR@10", "MAP@100", "nDCG@10", "P@5", "RPrec"]
)
def test_canonical_strings_round_trip(text: str) -> None:
    assert str(parse_measure(text)) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ndcg@10", Measure("nDCG", 10)),
        ("NDCG@10", Measure("nDCG", 10)),
        ("p@5", Measure("P", 5)),
        ("mrr@3", Measure("MRR", 3)),
        ("rprec", Measure("RPrec")),
        (" recall@20 ", Measure("Recall", 20)),
    ],
)
def test_names_are_case_insensitive(text: str, expected: Measure) -> None:
    assert parse_measure(text) == expected


def test_measures_are_hashable_values() -> None:
    assert {parse_measure("nDCG@10"), Measure("nDCG", 10)} == {Measure("nDCG", 10)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo@10", "'foo@10'.*allowed|'foo@10'.*one of"),
        ("nDCG", "'nDCG'.*positive integer"),
        ("nDCG@0", "'nDCG@0'.*positive integer"),
        ("nDCG@-1", "'nDCG@-1'.*positive integer"),
        ("P@1.5", "'P@1.5'.*positive integer"),
        ("RPrec@10", "'RPrec@10'.*takes no cutoff"),
        ("", "''"),
    ],
)
def test_parse_errors_name_the_string_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_measure(text)


def test_parse_error_lists_allowed_names() -> None:
    with pytest.raises(ValueError) as error:
        parse_measure("ndgc@10")
    for name in ("Recall", "Hit", "MRR", "MAP", "nDCG", "P", "RPrec"):
        assert name in str(error.value)


@pytest.mark.parametrize(
    ("name", "cutoff"), [("nDCG", None), ("nDCG", 0), ("P", True), ("MAP", 2.0), ("RPrec", 5)]
)
def test_constructor_validates_cutoff(name: str, cutoff: object) -> None:
    with pytest.raises(ValueError, match=name):
        Measure(name, cutoff)  # type: ignore[arg-type]


def test_constructor_rejects_non_canonical_name() -> None:
    with pytest.raises(ValueError, match="allowed names"):
        Measure("ndcg", 10)


def test_default_measures_cover_every_name_at_every_k_plus_rprec_and_uncut_mrr() -> None:
    measures = default_measures([10, 1, 10])
    assert [str(m) for m in measures] == [
        "Recall@1", "Recall@10", "Hit@1", "Hit@10", "MRR@1", "MRR@10",
        "MAP@1", "MAP@10", "nDCG@1", "nDCG@10", "P@1", "P@10",
        "CompleteEvidence@1", "CompleteEvidence@10", "Judged@1", "Judged@10", "RPrec", "MRR",
    ]  # fmt: skip


def test_mrr_alone_is_the_uncut_reciprocal_rank() -> None:
    assert parse_measure("MRR") == Measure("MRR") and str(Measure("MRR")) == "MRR"
    assert parse_measure("judged@5") == Measure("Judged", 5)
    assert parse_measure("completeevidence@3") == Measure("CompleteEvidence", 3)


def test_default_measures_reject_empty_and_non_positive_k() -> None:
    with pytest.raises(ValueError, match="k_values is empty"):
        default_measures([])
    with pytest.raises(ValueError, match="positive integer"):
        default_measures([0, 5])
