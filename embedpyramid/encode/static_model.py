"""The model2vec backend: static (token-embedding) models, pure numpy, from an installed package, a
local path or a hub repository at the card's commit (:func:`embedpyramid.encode.base.model_folder`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from embedpyramid.config import ResolvedModel
from embedpyramid.encode.base import EncodeError, Encoder, Kind, model_folder


class Model2VecEncoder:
    def __init__(self, model: ResolvedModel):
        from model2vec import StaticModel

        card = model.card
        location, named = model_folder(model)
        try:
            self.model = StaticModel.from_pretrained(str(location), normalize=False)
        except Exception as error:
            raise EncodeError(f"model card {model.name!r}: cannot load model2vec model from {named}: {error}") from error
        self.max_tokens = card.max_tokens
        self.prompts = {"query": card.query_prompt, "document": card.document_prompt}
        self.batch_size = card.run.batch_size
        self.description = {"modules": ["StaticModel"], "normalize_layer": False, "pooling": "mean (static)",
                            "max_tokens": card.max_tokens, "native_dimension": int(self.model.dim)}

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        prompt = self.prompts[kind]
        vectors = self.model.encode(
            [prompt + text for text in texts], max_length=self.max_tokens, batch_size=self.batch_size,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.model.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return np.array([min(len(item.ids), self.max_tokens or len(item.ids)) for item in encoded], dtype=np.int64)

    def without_normalize_layer(self) -> Encoder:
        return self
