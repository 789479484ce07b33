"""The ``bedrock`` backend: Amazon Bedrock embedding models with Titan-style requests.

One text per ``InvokeModel`` request: ``{"inputText": text}``, plus ``dimensions`` when the card
asks for them; Titan Text Embeddings v2 is asked for unnormalized vectors (``normalize:
false``), so L1 sees the model's raw norms and the card's ``normalize`` decides the rest. The
answer is ``{"embedding": [...], "inputTextTokenCount": n}``. boto3 (the optional extra
``embedpyramid[bedrock]``) signs requests with its own credential chain and retries throttling
and 5xx answers itself; the card's ``requests_per_minute`` spaces the requests.
"""

from __future__ import annotations

import json
from typing import Any

from embedpyramid.config import BedrockSource, ResolvedModel
from embedpyramid.encode.base import EncodeError
from embedpyramid.encode.remote import Answer, RemoteEncoder

TITAN_V2 = "amazon.titan-embed-text-v2"


class BedrockEncoder(RemoteEncoder):
    def __init__(self, model: ResolvedModel, client: Any = None):
        super().__init__(model, request_size=1)
        source = model.card.source
        assert isinstance(source, BedrockSource)
        self.source = source
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise EncodeError(f"model card {model.name!r}: backend 'bedrock' needs boto3; "
                                  "install it with pip install 'embedpyramid[bedrock]'") from None
            config = Config(retries={"max_attempts": self.api.max_attempts, "mode": "standard"},
                            read_timeout=self.api.timeout_seconds, connect_timeout=self.api.timeout_seconds)
            client = boto3.client("bedrock-runtime", region_name=source.region, config=config)
        self.client = client

    def request_body(self, text: str) -> dict[str, Any]:
        body: dict[str, Any] = {"inputText": text}
        if self.source.dimensions is not None:
            body["dimensions"] = self.source.dimensions
        if self.source.bedrock.startswith(TITAN_V2):
            body["normalize"] = False
        return body

    def _request(self, texts: list[str], context: str) -> Answer:
        from botocore.exceptions import BotoCoreError, ClientError

        (text,) = texts
        try:
            response = self.client.invoke_model(
                modelId=self.source.bedrock, body=json.dumps(self.request_body(text)),
                contentType="application/json", accept="application/json",
            )
            raw = response["body"].read()
        except ClientError as error:
            details = error.response.get("Error", {})
            raise self.fail(context, f"Bedrock answered {details.get('Code', 'an error')}: "
                                     f"{details.get('Message', '')}".rstrip(": ")) from None
        except BotoCoreError as error:
            raise self.fail(context, f"Bedrock could not be reached ({type(error).__name__}: {error})") from None
        self.usage.retries += int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        try:
            answer = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self.fail(context, f"the answer is not JSON: {raw[:200]!r}") from None
        if not isinstance(answer, dict) or "embedding" not in answer:
            raise self.fail(context, "the answer has no 'embedding'")
        tokens = answer.get("inputTextTokenCount")
        return Answer([answer["embedding"]], [tokens if isinstance(tokens, int) else None])
