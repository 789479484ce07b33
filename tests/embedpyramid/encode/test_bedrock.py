"""The bedrock backend's request and answer shaping, through botocore's Stubber (no network).

What this cannot exercise here: request signing with real credentials, the network, and
botocore's own retries of throttled or failed requests (the Stubber answers before them).
"""

import io
import json

import numpy as np
import pytest

from embedpyramid.config import load_config
from embedpyramid.data import EncodingInputs
from embedpyramid.encode import EncodeError, embed_table, read_embeddings, table_path
from embedpyramid.store import ArtifactStore

boto3 = pytest.importorskip("boto3", reason="boto3 is the optional extra embedpyramid[bedrock]")
from botocore.response import StreamingBody  # noqa: E402
from botocore.stub import Stubber  # noqa: E402

from embedpyramid.encode.bedrock import BedrockEncoder  # noqa: E402

TEXTS = ["What is AI?", "Hi"]


def titan_card(model_id: str = "amazon.titan-embed-text-v2:0", dimensions: int | None = 4) -> dict:
    return {"backend": "bedrock", "source": {"bedrock": model_id, "region": "us-east-1", "dimensions": dimensions},
            "document_prompt": "passage: ", "api": {"price_per_million_tokens": 0.02}}


def body(payload) -> StreamingBody:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def stubbed(write_configs, card):
    model = load_config(write_configs(models={"titan": card})).models["titan"]
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    return model, BedrockEncoder(model, client=client), Stubber(client)


def test_titan_requests_and_answers(write_configs, tmp_path):
    model, encoder, stubber = stubbed(write_configs, titan_card())
    vectors = [[3.0, 4.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    for text, vector, tokens in zip(TEXTS, vectors, (5, 2), strict=True):
        stubber.add_response(
            "invoke_model", {"body": body({"embedding": vector, "inputTextTokenCount": tokens}),
                             "contentType": "application/json"},
            {"modelId": "amazon.titan-embed-text-v2:0", "contentType": "application/json", "accept": "application/json",
             "body": json.dumps({"inputText": "passage: " + text, "dimensions": 4, "normalize": False})},
        )
    with stubber:
        result = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(["a", "b"], TEXTS, "9" * 64),
                             lambda: encoder)
    stubber.assert_no_pending_responses()
    _, stored = read_embeddings(result.path)
    np.testing.assert_allclose(stored, [[0.6, 0.8, 0, 0], [0, 0, 2**-0.5, 2**-0.5]], atol=1e-6)
    usage = result.metadata["api_usage"]
    assert (usage["requests"], usage["tokens_billed"], usage["tokens"]) == (2, 7, 7)
    _, raw = read_embeddings(table_path(ArtifactStore(tmp_path), model, "document", "9" * 64, raw=True))
    np.testing.assert_array_equal(raw, np.array(vectors, np.float32))  # asked for normalize: false


def test_titan_v1_gets_the_bare_request(write_configs):
    _, encoder, _ = stubbed(write_configs, titan_card("amazon.titan-embed-text-v1", dimensions=None))
    assert encoder.request_body("x") == {"inputText": "x"}


@pytest.mark.parametrize(("answer", "problem"), [
    (b"not json", "the answer is not JSON"),
    ({"inputTextTokenCount": 3}, "the answer has no 'embedding'"),
    ({"embedding": [1.0, 2.0]}, "embedding 0 has 2 dimensions, the card asks for 4"),
])
def test_malformed_titan_answers_are_errors(write_configs, answer, problem):
    _, encoder, stubber = stubbed(write_configs, titan_card())
    stubber.add_response("invoke_model", {"body": body(answer), "contentType": "application/json"})
    with stubber, pytest.raises(EncodeError, match=f"model card 'titan': request 1 \\(1 text, first 'x'\\): {problem}"):
        encoder.encode(["x"], "query")


def test_a_bedrock_error_names_its_code(write_configs):
    _, encoder, stubber = stubbed(write_configs, titan_card())
    stubber.add_client_error("invoke_model", service_error_code="ValidationException", service_message="bad dims",
                             http_status_code=400)
    with stubber, pytest.raises(EncodeError, match="Bedrock answered ValidationException: bad dims"):
        encoder.encode(["x"], "query")
