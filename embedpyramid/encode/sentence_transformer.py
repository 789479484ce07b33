"""The sentence-transformers backend: an installed package, a local path, or a hub repository at
the card's commit (downloaded into the Hugging Face cache when online: :mod:`embedpyramid.hub`)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np

from embedpyramid.config import ResolvedModel
from embedpyramid.encode.base import DirectionCheck, EncodeError, Encoder, Kind, model_folder


class SentenceTransformerEncoder:
    _passes_normalize_through = False
    _directions: DirectionCheck | None = None

    def __init__(self, model: ResolvedModel):
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # Progress is reported by the pipeline at sensible intervals; a bar per model load is noise in logs.
        transformers_logging.disable_progress_bar()
        card, where = model.card, f"model card {model.name!r}"
        self.where = where
        location, named = model_folder(model)
        try:
            self.model = SentenceTransformer(str(location), device=card.run.device, local_files_only=True)
        except Exception as error:
            raise EncodeError(f"{where}: cannot load sentence-transformers model from {named}: {error}") from error
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
        """The same model (shared, not copied) with its final Normalize module passed through.

        With a Normalize module ``normalize_embeddings=False`` is a silent no-op: only the raw
        pass shows the raw norms. It runs the shipped model's own forward pass and returns what
        its Normalize module receives, so it is the shipped model up to that module, and while
        :meth:`measure_directions` is open every batch's shipped output (what the module
        returned) is compared with unit(raw) on the way: the check covers every text at no
        second forward pass. A card without a prompt gets none: not the model's default prompt.
        """
        if not self.description["normalize_layer"]:
            return self
        stripped = copy.copy(self)
        stripped._passes_normalize_through = True
        stripped.prompts = {kind: prompt or "" for kind, prompt in self.prompts.items()}
        stripped.description = {**self.description, "modules": self.description["modules"][:-1],
                                "normalize_layer": False, "stripped": ["Normalize"]}
        return stripped

    @contextmanager
    def measure_directions(self) -> Iterator[DirectionCheck]:
        """The direction check of what the raw pass encodes until the block ends."""
        self._directions = check = DirectionCheck()
        try:
            yield check
        finally:
            self._directions = None

    @contextmanager
    def _normalize_passed_through(self, texts: int) -> Iterator[None]:
        """Hooks on the final Normalize module, for one call of ``texts`` texts: its input is kept
        before it runs, and replaces its output once it has (after the comparison, when
        measured). A call in which the module did not see every text is an error: its vectors
        would not be the ones checked."""
        normalize, received, passed = self.model[-1], [], [0]

        def keep_input(_module: Any, args: tuple[dict[str, Any]]) -> None:
            received.append(dict(args[0]))

        def pass_through(_module: Any, _args: Any, shipped: dict[str, Any]) -> dict[str, Any]:
            raw = received.pop()
            passed[0] += len(raw["sentence_embedding"])
            if self._directions is not None:
                self._directions.add(*(features["sentence_embedding"].detach().float().cpu().numpy()
                                       for features in (raw, shipped)))
            return raw

        handles = [normalize.register_forward_pre_hook(keep_input), normalize.register_forward_hook(pass_through)]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
        if passed[0] != texts:
            import sentence_transformers

            raise EncodeError(
                f"{self.where}: the model's final Normalize module saw {passed[0]} of {texts} texts in one encode, so "
                f"the raw pass cannot take its input: sentence-transformers {sentence_transformers.__version__} "
                "skips it; install a version whose forward pass runs every module")

    def encode(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        with self._normalize_passed_through(len(texts)) if self._passes_normalize_through else nullcontext():
            vectors = self.model.encode(
                list(texts), prompt=self.prompts[kind], batch_size=self.batch_size,
                convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.model.tokenizer(list(texts), truncation=True, max_length=self.model.max_seq_length)
        return np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)
