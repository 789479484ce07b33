"""The sentence-transformers backend: an installed package, a local path, or a hub id + revision
loaded from the local cache only."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

from embedpyramid.config import HubSource, ResolvedModel
from embedpyramid.encode.base import EncodeError, Encoder, Kind


class SentenceTransformerEncoder:
    def __init__(self, model: ResolvedModel):
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # Progress is reported by the pipeline at sensible intervals; a bar per model load is noise in logs.
        transformers_logging.disable_progress_bar()
        card, where = model.card, f"model card {model.name!r}"
        if isinstance(card.source, HubSource):
            location, revision = card.source.hub, card.source.revision
        else:
            location, revision = str(model.source_path), None
        try:
            self.model = SentenceTransformer(location, device=card.run.device, revision=revision, local_files_only=True)
        except Exception as error:
            raise EncodeError(
                f"{where}: cannot load sentence-transformers model from {location!r}"
                f"{' @ ' + revision if revision else ''}: {error}. Hub models load only from the local cache."
            ) from error
        modules = [type(module).__name__ for module in self.model]
        pooling = next((m for m in self.model if type(m).__name__ == "Pooling"), None)
        backend_pooling = getattr(pooling, "pooling_mode", None)
        if card.pooling != "backend" and card.pooling != backend_pooling:
            raise EncodeError(
                f"{where}: pooling is {card.pooling!r} in the card but the model pools with {backend_pooling!r}; "
                "set pooling to the model's mode (or 'backend') so the card records what produced the vectors"
            )
        if card.max_tokens is not None:
            self.model.max_seq_length = card.max_tokens
        self.model.tokenizer.truncation_side = card.truncation_side
        if card.dtype != "float32":
            import torch

            self.model.to(getattr(torch, card.dtype))
        self.prompts = {"query": card.query_prompt or None, "document": card.document_prompt or None}
        self.batch_size = card.run.batch_size
        self.description = {
            "modules": modules,
            "normalize_layer": bool(modules) and modules[-1] == "Normalize",
            "pooling": backend_pooling,
            "max_tokens": self.model.max_seq_length,
            "native_dimension": self.model.get_embedding_dimension(),
        }

    def without_normalize_layer(self) -> Encoder:
        """A copy whose module list stops before the final Normalize, sharing the weights.

        With a Normalize module ``normalize_embeddings=False`` is a silent no-op: only the
        stripped model shows the raw norms.
        """
        if not self.description["normalize_layer"]:
            return self
        from sentence_transformers import SentenceTransformer

        stripped = copy.copy(self)
        stripped.model = SentenceTransformer(modules=list(self.model)[:-1], device=str(self.model.device))
        stripped.model.max_seq_length = self.model.max_seq_length
        stripped.description = {**self.description, "modules": self.description["modules"][:-1],
                                "normalize_layer": False, "stripped": ["Normalize"]}
        return stripped

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        vectors = self.model.encode(
            list(texts), prompt=self.prompts[kind], batch_size=self.batch_size,
            convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.model.tokenizer(list(texts), truncation=True, max_length=self.model.max_seq_length)
        return np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)
