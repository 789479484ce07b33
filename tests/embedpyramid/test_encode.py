import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from embedpyramid.config import load_config
from embedpyramid.data import EncodingInputs
from embedpyramid.encode import (
    EncodeError,
    direction_difference,
    embed_table,
    load_encoder,
    postprocess,
    read_embeddings,
    read_token_counts,
    vector_problems,
)
from embedpyramid.store import ArtifactStore

TEXTS = ["What is AI?", "A much longer sentence about machines that think, learn and talk.", "Hi", "Are you sentient?"]


def toy_card(**fields):
    return {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 32},
            "run": {"batch_size": 2}, **fields}


def test_postprocess_truncates_then_normalizes_and_keeps_zero_and_nan_rows():
    vectors = np.array([[3.0, 4.0, 12.0], [0.0, 0.0, 5.0], [np.nan, 1.0, 1.0]], np.float32)
    out = postprocess(vectors, dimension=2, normalize=True, name="m")
    assert np.allclose(out[:2], [[0.6, 0.8], [0.0, 0.0]]) and np.isnan(out[2]).any()
    assert np.array_equal(postprocess(vectors, None, False, "m"), vectors, equal_nan=True)
    with pytest.raises(EncodeError, match="model card 'm': dimension 4 exceeds the model's 3"):
        postprocess(vectors, 4, True, "m")


def test_entry_point_cache_hit_never_loads_the_model(write_configs, tmp_path):
    model = load_config(write_configs(models={"toy": toy_card()})).models["toy"]
    store = ArtifactStore(tmp_path / "data")
    inputs = EncodingInputs(ids=["a", "b", "c", "d"], texts=TEXTS, table_sha="f" * 64)
    loads = []

    def factory():
        loads.append(1)
        return load_encoder(model)

    first = embed_table(store, model, "query", inputs, factory)
    second = embed_table(store, model, "query", inputs, factory)
    assert (first.cache_hit, second.cache_hit, len(loads)) == (False, True, 1)
    ids, vectors = read_embeddings(second.path)
    assert ids == inputs.ids
    # Batched longest-first, stored in input order: equal to encoding each text alone.
    direct = load_encoder(model).encode(TEXTS, "query")
    expected = direct / np.linalg.norm(direct, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)
    assert second.metadata["dim"] == 32 and second.metadata["rows"] == 4 and second.metadata["normalized"]


def test_entry_point_errors_name_the_card(write_configs):
    config = load_config(write_configs(models={
        "missing": toy_card(entry_point="toy_encoders:Nope"),
        "short": toy_card(entry_point="toy_encoders:wrong_shape", options={}),
    }))
    with pytest.raises(EncodeError, match="model card 'missing': entry point 'toy_encoders:Nope' cannot be imported"):
        load_encoder(config.models["missing"])
    with pytest.raises(EncodeError, match="model card 'short': the entry point returned shape \\(1, 8\\) for 2 texts"):
        load_encoder(config.models["short"]).encode(TEXTS[:2], "query")


def test_vector_problems_find_nan_zero_and_shape():
    vectors = np.array([[1, 0], [np.nan, 1], [0, 0]], np.float32)
    assert vector_problems(vectors, 3, 2) == ["1 vectors contain NaN or inf", "1 vectors are all zeros"]
    assert vector_problems(vectors, 4, 2) == ["shape (3, 2) != expected (4, 2)"]
    assert vector_problems(np.eye(2, dtype=np.float32), 2, 2) == []


def test_minilm_card_reproduces_sentence_transformers(write_configs, default_models, tmp_path):
    model = load_config(write_configs(models={"minilm-l6": default_models["minilm-l6"]})).models["minilm-l6"]
    encoder = load_encoder(model)
    assert encoder.description["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert encoder.description["normalize_layer"] and encoder.description["pooling"] == "mean"
    result = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(["a", "b", "c", "d"], TEXTS, "0" * 64),
                         lambda: encoder)
    _, vectors = read_embeddings(result.path)
    reference = SentenceTransformer(str(model.source_path), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert np.abs(vectors - reference).max() < 1e-5
    assert result.metadata["tokens"] > len(TEXTS) and result.metadata["backend"]["native_dimension"] == 384


def test_card_pooling_must_match_the_model(write_configs, default_models):
    card = {**default_models["minilm-l6"], "pooling": "cls"}
    model = load_config(write_configs(models={"minilm-l6": card})).models["minilm-l6"]
    with pytest.raises(EncodeError, match="pooling is 'cls' in the card but the model pools with 'mean'"):
        load_encoder(model)


def test_stripping_the_normalize_layer_shows_raw_norms_with_the_same_direction(write_configs, default_models, tmp_path):
    model = load_config(write_configs(models={"minilm-l6": default_models["minilm-l6"]})).models["minilm-l6"]
    encoder = load_encoder(model)
    # The shipped model normalizes inside: normalize_embeddings=False is a silent no-op.
    shipped = encoder.model.encode(TEXTS, normalize_embeddings=False)
    assert np.allclose(np.linalg.norm(shipped, axis=1), 1.0, atol=1e-6)
    store, inputs = ArtifactStore(tmp_path), EncodingInputs(["a", "b", "c", "d"], TEXTS, "1" * 64)
    raw = embed_table(store, model, "query", inputs, lambda: encoder, raw=True)
    card = embed_table(store, model, "query", inputs, lambda: encoder)
    assert raw.path != card.path and raw.metadata["raw"] and not raw.metadata["normalized"]
    assert raw.metadata["backend"]["stripped"] == ["Normalize"] and raw.metadata["backend"]["modules"] == ["Transformer", "Pooling"]
    _, raw_vectors = read_embeddings(raw.path)
    _, card_vectors = read_embeddings(card.path)
    norms = np.linalg.norm(raw_vectors, axis=1)
    assert (np.abs(norms - 1.0) > 0.05).all()
    assert direction_difference(raw_vectors, card_vectors) <= 1e-5
    assert read_token_counts(raw.path).tolist() == encoder.token_counts(TEXTS).tolist()


def test_a_model_without_normalize_layer_is_not_stripped(write_configs, tmp_path):
    model = load_config(write_configs(models={"toy": toy_card()})).models["toy"]
    encoder = load_encoder(model)
    assert encoder.without_normalize_layer() is encoder
    raw = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(["a", "b", "c", "d"], TEXTS, "2" * 64),
                      lambda: encoder, raw=True)
    _, vectors = read_embeddings(raw.path)
    assert np.array_equal(vectors, encoder.encode(TEXTS, "document"))
    assert read_token_counts(raw.path) is None and raw.metadata["tokens"] is None
    # Nothing to strip: the same pass stored the card's (normalized) vectors too.
    card = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(["a", "b", "c", "d"], TEXTS, "2" * 64),
                       lambda: pytest.fail("the model must not be loaded again"))
    _, normalized = read_embeddings(card.path)
    assert card.cache_hit and np.allclose(normalized, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
