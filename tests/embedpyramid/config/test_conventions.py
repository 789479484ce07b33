import json

import pytest

from embedpyramid.config import MetricConventions


def test_defaults_follow_trec_eval_and_serialise_to_json() -> None:
    conventions = MetricConventions()
    assert conventions.as_dict() == {
        "gain": "linear",
        "relevance_threshold": 1,
        "drop_self_hits": False,
        "ties": "expected",
    }
    assert json.loads(json.dumps(conventions.as_dict())) == conventions.as_dict()


def test_as_dict_records_every_setting() -> None:
    conventions = MetricConventions(gain="exponential", relevance_threshold=2, drop_self_hits=True, ties="trec_eval")
    assert MetricConventions(**conventions.as_dict()) == conventions  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gain": "log"}, "'log'.*linear, exponential"),
        ({"relevance_threshold": 0}, "integer >= 1.*got 0"),
        ({"relevance_threshold": 1.5}, "integer >= 1.*got 1.5"),
        ({"relevance_threshold": True}, "integer >= 1.*got True"),
        ({"drop_self_hits": "yes"}, "True or False.*'yes'"),
        ({"ties": "random"}, "'random'.*expected, trec_eval, doc_id"),
    ],
)
def test_invalid_settings_raise_with_allowed_values(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MetricConventions(**settings)


def test_mteb_conventions_are_a_fixed_bundle():
    mteb = MetricConventions.mteb(drop_self_hits=True, top_k=100, mteb_version="2.26")
    assert MetricConventions(**mteb.as_dict()) == mteb  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="protocol 'mteb' fixes"):
        MetricConventions(ties="expected", queries="with_qrels", top_k=100, protocol="mteb", mteb_version="2.26")
    with pytest.raises(ValueError, match="mteb_version"):
        MetricConventions(protocol="mteb")
    with pytest.raises(ValueError, match="top_k"):
        MetricConventions(top_k=0)
