"""The python entry-point backend: ``module:callable`` called once with the card's options."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from embedpyramid.config import ResolvedModel
from embedpyramid.encode.base import EncodeError, Encoder, Kind


class EntryPointEncoder:
    """``module:callable`` called once with the card's options; the result has ``encode(texts)``
    or is itself callable on a list of texts and returns an (n, dim) array."""

    def __init__(self, model: ResolvedModel):
        card = model.card
        module_name, _, attribute = (card.entry_point or "").partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as error:
            raise EncodeError(
                f"model card {model.name!r}: entry point {card.entry_point!r} cannot be imported: {error}; "
                "install the package that provides it"
            ) from error
        instance = target(**card.options)
        self._encode = instance.encode if hasattr(instance, "encode") else instance
        if not callable(self._encode):
            raise EncodeError(f"model card {model.name!r}: {card.entry_point!r}(**options) is neither callable nor has encode()")
        self.name = model.name
        self.prompts = {"query": card.query_prompt, "document": card.document_prompt}
        self.description = {"modules": [card.entry_point], "normalize_layer": None, "pooling": "backend",
                            "max_tokens": None, "native_dimension": None}

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        prompt = self.prompts[kind]
        vectors = np.asarray(self._encode([prompt + text for text in texts]), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EncodeError(
                f"model card {self.name!r}: the entry point returned shape {vectors.shape} for {len(texts)} texts; "
                "it must return one row per text"
            )
        return vectors

    def token_counts(self, texts: Sequence[str]) -> None:
        return None

    def without_normalize_layer(self) -> Encoder:
        return self
