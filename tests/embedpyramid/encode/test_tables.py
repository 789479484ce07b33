import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from sentence_transformers import SentenceTransformer

from embedpyramid.config import load_config
from embedpyramid.data import EncodingInputs
from embedpyramid.encode import (
    EncodeError,
    embed_table,
    encode_batches,
    encode_shard,
    iter_embedding_blocks,
    load_encoder,
    postprocess,
    read_embeddings,
    read_token_counts,
    shard_directory,
    table_path,
    table_problems,
    unfinished_shards,
    vector_problems,
)
from embedpyramid.encode.tables import STRIPPED_NOTE
from embedpyramid.hashing import sha256_table
from embedpyramid.store import ArtifactStore, read_table

TEXTS = ["What is AI?", "A much longer sentence about machines that think, learn and talk.", "Hi", "Are you sentient?"]
IDS = ["a", "b", "c", "d"]


def toy_card(**fields):
    return {"backend": "entry-point", "entry_point": "toy_encoders:CharacterNgrams", "options": {"dim": 32},
            "run": {"batch_size": 2}, **fields}


class Counting:
    """A real encoder that counts the texts each of its forms (shipped, stripped) encodes."""

    def __init__(self, encoder, counts, form="shipped", fail_after=None):
        self.encoder, self.counts, self.form, self.fail_after = encoder, counts, form, fail_after
        self.description = encoder.description

    def encode(self, texts, kind):
        if self.fail_after is not None and self.counts.get(self.form, 0) >= self.fail_after:
            raise KeyboardInterrupt("killed mid-encode")
        self.counts[self.form] = self.counts.get(self.form, 0) + len(texts)
        return self.encoder.encode(texts, kind)

    def token_counts(self, texts):
        return self.encoder.token_counts(texts)

    def without_normalize_layer(self):
        stripped = self.encoder.without_normalize_layer()
        if stripped is self.encoder:
            return self
        return Counting(stripped, self.counts, "stripped", self.fail_after)

    def measure_directions(self):
        return self.encoder.measure_directions()


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
    inputs = EncodingInputs(ids=IDS, texts=TEXTS, table_sha="f" * 64)
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
    assert second.metadata["similarity"] == "cosine" and second.metadata["problems"] == []


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


def test_minilm_card_reproduces_sentence_transformers_from_one_pass(write_configs, default_models, tmp_path):
    model = load_config(write_configs(models={"minilm-l6": default_models["minilm-l6"]})).models["minilm-l6"]
    counts: dict[str, int] = {}
    encoder = Counting(load_encoder(model), counts)
    assert encoder.description["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert encoder.description["normalize_layer"] and encoder.description["pooling"] == "mean"
    store, inputs = ArtifactStore(tmp_path), EncodingInputs(IDS, TEXTS, "0" * 64)
    result = embed_table(store, model, "document", inputs, lambda: encoder)
    raw = embed_table(store, model, "document", inputs, lambda: pytest.fail("one pass wrote both tables"), raw=True)
    # Each text went through the model once (stripped), and that pass checked every direction.
    assert counts == {"stripped": len(TEXTS)} and raw.cache_hit
    _, vectors = read_embeddings(result.path)
    reference = SentenceTransformer(str(model.source_path), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert np.abs(vectors - reference).max() < 1e-5
    assert result.metadata["tokens"] > len(TEXTS) and result.metadata["backend"]["native_dimension"] == 384
    check = raw.metadata["direction_check"]
    assert check["sample"] == len(TEXTS) and check["max_abs_difference"] <= 1e-5


# Equal character counts, unequal token counts: which of them share a batch decides its padding.
TIED_TEXTS = ["qzv qzv zxq", "zxq day zxq kpj", "dog day kpj day", "zxq day day kpj", "day cat", "ran ran cat vbf",
              "qzv ran xkw xkw", "cat sun", "qzv ran", "kpj qzv day xkw", "xkw dog", "kpj ran xkw", "qzv cat", "kpj ran",
              "dog vbf", "dog qzv zxq", "kpj kpj", "ran sun kpj day", "qzv vbf sun", "xkw ran"]


def test_batches_are_those_of_model_encode_so_its_vectors_are_reproduced_to_the_last_bit(write_configs, default_models):
    model = load_config(write_configs(models={"minilm-l6": default_models["minilm-l6"]})).models["minilm-l6"]
    encoder = load_encoder(model)
    lengths = [-len(text) for text in TIED_TEXTS]
    # numpy's default argsort puts some tied texts elsewhere than a stable sort: other batches.
    assert not np.array_equal(np.argsort(lengths), np.argsort(lengths, kind="stable"))
    reference = encoder.model.encode(TIED_TEXTS, batch_size=8)
    assert np.array_equal(encode_batches(encoder, TIED_TEXTS, "document", 8), reference)


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
    store, inputs = ArtifactStore(tmp_path), EncodingInputs(IDS, TEXTS, "1" * 64)
    raw = embed_table(store, model, "query", inputs, lambda: encoder, raw=True)
    card = embed_table(store, model, "query", inputs, lambda: encoder)
    assert raw.path != card.path and raw.metadata["raw"] and not raw.metadata["normalized"] and card.cache_hit
    assert raw.metadata["backend"]["stripped"] == ["Normalize"] and raw.metadata["backend"]["modules"] == ["Transformer", "Pooling"]
    _, raw_vectors = read_embeddings(raw.path)
    _, card_vectors = read_embeddings(card.path)
    norms = np.linalg.norm(raw_vectors, axis=1)
    assert (np.abs(norms - 1.0) > 0.05).all()
    np.testing.assert_allclose(card_vectors, raw_vectors / norms[:, None], rtol=0, atol=1e-7)
    assert np.abs(card_vectors - shipped).max() <= 1e-5
    assert read_token_counts(raw.path).tolist() == encoder.token_counts(TEXTS).tolist()


def test_the_raw_pass_checks_every_direction_and_finds_a_normalize_module_that_turns_them(
        write_configs, default_models, tmp_path):
    import torch.nn.functional as F

    model = load_config(write_configs(models={"minilm-l6": default_models["minilm-l6"]})).models["minilm-l6"]
    encoder = load_encoder(model)
    raw_pass = encoder.without_normalize_layer()
    # The raw pass is the shipped model's own forward pass, and is measured only inside the block.
    assert raw_pass.model is encoder.model
    with raw_pass.measure_directions() as check:
        raw_vectors = raw_pass.encode(TEXTS, "query")
    assert check.texts == len(TEXTS) and check.max_abs_difference <= 1e-6
    assert (np.abs(np.linalg.norm(raw_vectors, axis=1) - 1) > 0.05).all()
    raw_pass.encode(TEXTS, "query")
    assert check.texts == len(TEXTS)
    # The hooks last one call: the shipped model still normalizes.
    assert np.allclose(np.linalg.norm(encoder.encode(TEXTS, "query"), axis=1), 1.0, atol=1e-6)

    # A final module named Normalize that does more than x / |x| (here it reverses the vector first).
    def turning(features):
        features["sentence_embedding"] = F.normalize(features["sentence_embedding"].flip(-1), p=2, dim=-1)
        return features

    encoder.model[-1].forward = turning
    table = embed_table(ArtifactStore(tmp_path), model, "query", EncodingInputs(IDS, TEXTS, "7" * 64),
                        lambda: encoder, raw=True)
    # The raw vectors are still what the module received; the check says the shipped ones differ.
    np.testing.assert_array_equal(read_embeddings(table.path)[1], raw_vectors)
    direction = table.metadata["direction_check"]
    assert direction["sample"] == len(TEXTS) and direction["max_abs_difference"] > 0.1

    # A forward pass that skips the module gives vectors nobody checked: an error naming the card.
    def skipping(features, **_kwargs):
        for module in list(encoder.model)[:-1]:
            features = module(features)
        return features

    encoder.model.forward = skipping
    with pytest.raises(EncodeError, match=r"model card 'minilm-l6': the model's final Normalize module saw 0 of 4 texts"):
        raw_pass.encode(TEXTS, "query")


def test_normalize_false_on_a_model_that_ships_normalize_strips_it_and_says_so(write_configs, default_models, tmp_path):
    card = {**default_models["minilm-l6"], "normalize": False}
    model = load_config(write_configs(models={"minilm-l6": card})).models["minilm-l6"]
    assert model.similarity == "inner_product"
    result = embed_table(ArtifactStore(tmp_path), model, "query", EncodingInputs(IDS, TEXTS, "5" * 64),
                         lambda: load_encoder(model))
    _, vectors = read_embeddings(result.path)
    norms = np.linalg.norm(vectors, axis=1)
    meta = result.metadata
    # The metadata never contradicts the vectors: not normalized, and indeed not unit.
    assert not meta["normalized"] and not meta["unit_vectors"] and (np.abs(norms - 1) > 0.05).all()
    assert meta["norms"]["min"] == pytest.approx(norms.min()) and meta["norms"]["max"] == pytest.approx(norms.max())
    assert meta["backend"]["normalize_layer_stripped"] and meta["notes"] == [
        "normalize: false on a model that ships a Normalize module: the module was stripped, so the card's "
        "vectors are the model's raw, unnormalized output"]


def test_a_dimension_or_normalization_variant_derives_from_the_stored_pass_without_encoding(
        write_configs, default_models, tmp_path):
    minilm = default_models["minilm-l6"]
    config = load_config(write_configs(models={
        "minilm-l6": minilm, "d256": {**minilm, "dimension": 256}, "unnormalized": {**minilm, "normalize": False},
        "d128": {**minilm, "dimension": 128}, "prompted": {**minilm, "query_prompt": "query: "},
    }))
    full, d256, unnormalized = (config.models[name] for name in ("minilm-l6", "d256", "unnormalized"))
    store, inputs = ArtifactStore(tmp_path / "shared"), EncodingInputs(IDS, TEXTS, "6" * 64)
    # Before the full card's pass is stored, the variant has shards to encode; after, none.
    assert unfinished_shards(store, d256, "query", inputs) == [0]
    source = embed_table(store, full, "query", inputs, lambda: load_encoder(full), raw=True)
    assert unfinished_shards(store, d256, "query", inputs) == []
    never = lambda: pytest.fail("a variant of a stored pass loads no model")  # noqa: E731
    derived = embed_table(store, d256, "query", inputs, never)
    derived_raw = embed_table(store, d256, "query", inputs, never, raw=True)
    # Both tables were written by the derivation (the raw one is then a cache hit), and they are
    # bit-identical to the tables a pass of the variant's own writes.
    assert not derived.cache_hit and derived_raw.cache_hit
    alone = ArtifactStore(tmp_path / "alone")
    embed_table(alone, d256, "query", inputs, lambda: load_encoder(d256))
    for raw in (False, True):
        mine = read_table(table_path(store, d256, "query", inputs.table_sha, raw=raw))
        theirs = read_table(table_path(alone, d256, "query", inputs.table_sha, raw=raw))
        assert mine.column("id").to_pylist() == theirs.column("id").to_pylist() == IDS
        assert mine.column("vector").combine_chunks().flatten().to_numpy().tobytes() == \
            theirs.column("vector").combine_chunks().flatten().to_numpy().tobytes()
        assert mine.column("tokens").to_pylist() == theirs.column("tokens").to_pylist()
    meta = derived.metadata
    assert meta["derived_from"] == {"model_key": full.key, "card_hash": full.card_hash}
    assert (meta["model_key"], meta["card_hash"], meta["dim"], meta["normalized"]) == (d256.key, d256.card_hash, 256, True)
    # The pass's cost and direction check are the variant's: the same forward pass made its vectors.
    assert meta["seconds"] == source.metadata["seconds"] and meta["tokens"] == source.metadata["tokens"]
    assert meta["direction_check"] == source.metadata["direction_check"]
    assert meta["unit_vectors"] and meta["problems"] == [] and meta["notes"] == []
    assert meta["backend"]["vectors"] == (f"derived from the raw pass of {full.key}: dimension cut, "
                                          "then L2 normalization")
    assert meta["backend"]["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert derived_raw.metadata["dim"] == 256 and not derived_raw.metadata["unit_vectors"]
    assert derived_raw.metadata["backend"]["stripped"] == ["Normalize"]

    # normalize: false is the stored raw vectors themselves, with the stripped module said.
    plain = embed_table(store, unnormalized, "query", inputs, never)
    _, raw_vectors = read_embeddings(source.path)
    assert np.array_equal(read_embeddings(plain.path)[1], raw_vectors)
    assert plain.metadata["backend"]["normalize_layer_stripped"] and plain.metadata["notes"] == [STRIPPED_NOTE]
    # A variant of a variant names the card whose pass it is.
    assert embed_table(store, config.models["d128"], "query", inputs, never).metadata["derived_from"]["model_key"] == full.key
    # Another prompt is another pass: the model is loaded.
    loads = []
    prompted = config.models["prompted"]
    embed_table(store, prompted, "query", inputs, lambda: loads.append(1) or load_encoder(prompted))
    assert loads == [1]


def test_a_model_without_normalize_layer_is_not_stripped(write_configs, tmp_path):
    model = load_config(write_configs(models={"toy": toy_card()})).models["toy"]
    encoder = load_encoder(model)
    assert encoder.without_normalize_layer() is encoder
    raw = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(IDS, TEXTS, "2" * 64),
                      lambda: encoder, raw=True)
    _, vectors = read_embeddings(raw.path)
    assert np.array_equal(vectors, encoder.encode(TEXTS, "document"))
    assert read_token_counts(raw.path) is None and raw.metadata["tokens"] is None
    assert raw.metadata["direction_check"]["sample"] == 0
    card = embed_table(ArtifactStore(tmp_path), model, "document", EncodingInputs(IDS, TEXTS, "2" * 64),
                       lambda: pytest.fail("the model must not be loaded again"))
    _, normalized = read_embeddings(card.path)
    assert card.cache_hit and np.allclose(normalized, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def corpus(n: int) -> EncodingInputs:
    texts = [f"text number {i} " + "word " * (i % 13) for i in range(n)]
    return EncodingInputs([f"d{i:04d}" for i in range(n)], texts, "3" * 64)


def assert_same_tables(store: ArtifactStore, other: ArtifactStore, model, inputs: EncodingInputs) -> None:
    for raw in (False, True):
        mine = read_table(table_path(store, model, "document", inputs.table_sha, raw=raw))
        theirs = read_table(table_path(other, model, "document", inputs.table_sha, raw=raw))
        assert sha256_table(mine) == sha256_table(theirs)
        assert mine.column("vector").combine_chunks().flatten().to_numpy().tobytes() == \
            theirs.column("vector").combine_chunks().flatten().to_numpy().tobytes()


def test_an_interrupted_encode_resumes_from_its_shards_bit_identically(write_configs, tmp_path):
    model = load_config(write_configs(models={"toy": toy_card(run={"batch_size": 4, "shard_size": 10})})).models["toy"]
    inputs = corpus(47)
    whole = ArtifactStore(tmp_path / "whole")
    reference = embed_table(whole, model, "document", inputs, lambda: load_encoder(model))
    assert reference.metadata["shards"] == {"size": 10, "count": 5, "resumed": 0}

    store, counts = ArtifactStore(tmp_path / "killed"), {}
    # Killed in the middle of the third shard: two shards are on disk, nothing else.
    with pytest.raises(KeyboardInterrupt):
        embed_table(store, model, "document", inputs, lambda: Counting(load_encoder(model), counts, fail_after=24))
    shards = shard_directory(store, model, "document", inputs.table_sha)
    assert sorted(p.name for p in shards.iterdir() if not p.name.startswith(".")) == ["00000.parquet", "00001.parquet"]
    assert not table_path(store, model, "document", inputs.table_sha).exists()

    counts.clear()
    resumed = embed_table(store, model, "document", inputs, lambda: Counting(load_encoder(model), counts))
    assert counts == {"shipped": 27} and resumed.metadata["shards"]["resumed"] == 2 and not shards.exists()
    assert_same_tables(store, whole, model, inputs)


def vector_chunks(path):
    """(encodings, has a dictionary page) of the vector column in each row group of ``path``."""
    metadata = pq.ParquetFile(path).metadata
    (column,) = [i for i in range(metadata.num_columns) if metadata.schema.column(i).path == "vector.list.element"]
    return [(metadata.row_group(group).column(column).encodings, metadata.row_group(group).column(column).has_dictionary_page)
            for group in range(metadata.num_row_groups)]


def test_shards_and_tables_store_the_vectors_byte_split_without_a_dictionary(write_configs, tmp_path):
    # VECTOR_PARQUET, in the shards and in both tables, one row group per shard: pyarrow's
    # default would build a dictionary of the vectors' nearly distinct floats in every row group.
    model = load_config(write_configs(models={"toy": toy_card(run={"batch_size": 4, "shard_size": 10})})).models["toy"]
    inputs, store = corpus(25), ArtifactStore(tmp_path / "store")
    with pytest.raises(KeyboardInterrupt):
        embed_table(store, model, "document", inputs, lambda: Counting(load_encoder(model), {}, fail_after=12))
    layout = (("RLE", "BYTE_STREAM_SPLIT"), False)
    (shard,) = shard_directory(store, model, "document", inputs.table_sha).glob("0*.parquet")
    assert vector_chunks(shard) == [layout]
    embed_table(store, model, "document", inputs, lambda: load_encoder(model))
    for raw in (False, True):
        assert vector_chunks(table_path(store, model, "document", inputs.table_sha, raw=raw)) == [layout] * 3


WORKER = """
import json, sys
from embedpyramid.config import load_config
from embedpyramid.data import EncodingInputs
from embedpyramid.encode import encode_shard, load_encoder
from embedpyramid.store import ArtifactStore
folder, root, table, *shards = sys.argv[1:]
model = load_config(folder).models["minilm-l6"]
inputs = EncodingInputs(**json.loads(open(table).read()))
encoder = load_encoder(model)
print(json.dumps([encode_shard(ArtifactStore.at(root), model, "document", inputs, encoder, int(i)) for i in shards]))
"""


def test_four_shards_encoded_by_two_processes_at_once_make_the_table_of_one_process(write_configs, default_models,
                                                                                    tmp_path):
    """MiniLM, 37 texts in 4 shards: two worker processes encode shards {0, 2} and {1, 3} at the
    same time; the tables written from their shards are those of one uninterrupted process
    (about 10 s)."""
    minilm = default_models["minilm-l6"]
    folder = write_configs(models={"minilm-l6": {**minilm, "run": {**minilm.get("run", {}), "shard_size": 10,
                                                                     "batch_size": 4}}})
    model = load_config(folder).models["minilm-l6"]
    inputs = corpus(37)
    one = ArtifactStore(tmp_path / "one")
    embed_table(one, model, "document", inputs, lambda: load_encoder(model))

    spread = ArtifactStore(tmp_path / "spread")
    assert unfinished_shards(spread, model, "document", inputs) == [0, 1, 2, 3]
    table = tmp_path / "inputs.json"
    table.write_text(json.dumps({"ids": inputs.ids, "texts": inputs.texts, "table_sha": inputs.table_sha}))
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(folder), str(spread.root), str(table), *shards],
                                stdout=subprocess.PIPE, text=True) for shards in (["0", "2"], ["1", "3"])]
    replies = [worker.communicate(timeout=600)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert [json.loads(reply) for reply in replies] == [[True, True], [True, True]]
    assert unfinished_shards(spread, model, "document", inputs) == []

    counts: dict[str, int] = {}
    written = embed_table(spread, model, "document", inputs, lambda: Counting(load_encoder(model), counts))
    # Every shard came from the workers, each with its direction check: this process encoded nothing.
    assert counts == {}
    assert written.metadata["direction_check"]["sample"] == 37
    assert written.metadata["direction_check"]["max_abs_difference"] <= 1e-5
    assert written.metadata["shards"] == {"size": 10, "count": 4, "resumed": 4}
    assert not shard_directory(spread, model, "document", inputs.table_sha).exists()
    assert_same_tables(spread, one, model, inputs)
    # A late worker finds the tables written and leaves no shard behind; a shard that is not one is named.
    assert not encode_shard(spread, model, "document", inputs, load_encoder(model), 3)
    assert unfinished_shards(spread, model, "document", inputs) == []
    assert not shard_directory(spread, model, "document", inputs.table_sha).exists()
    with pytest.raises(EncodeError, match="has 4 shards of 10; there is no shard 4"):
        encode_shard(ArtifactStore(tmp_path / "other"), model, "document", inputs, load_encoder(model), 4)


def test_streaming_reader_and_table_problems(write_configs, tmp_path):
    model = load_config(write_configs(models={"toy": toy_card(run={"batch_size": 8, "shard_size": 16})})).models["toy"]
    inputs = corpus(50)
    table = embed_table(ArtifactStore(tmp_path), model, "document", inputs, lambda: load_encoder(model))
    ids, vectors = read_embeddings(table.path)
    blocks = list(iter_embedding_blocks(table.path, 7))
    assert [len(block_ids) for block_ids, _ in blocks] == [7] * 7 + [1]
    assert sum((block_ids for block_ids, _ in blocks), []) == ids == inputs.ids
    np.testing.assert_array_equal(np.concatenate([block for _, block in blocks]), vectors)
    assert table_problems(table.path, inputs.ids, 32, block_rows=9) == []
    assert table_problems(table.path, inputs.ids[::-1], 32) == [f"ids in {table.path} do not match the input table from row 0"]
    assert table_problems(table.path, inputs.ids, 16) == [f"{table.path}: dimension 32 != expected 16"]


def test_a_table_with_nan_vectors_is_never_a_cache_hit(write_configs, tmp_path):
    broken = toy_card(entry_point="toy_encoders:BrokenEncoder")
    model = load_config(write_configs(models={"toy": broken})).models["toy"]
    store, inputs = ArtifactStore(tmp_path), EncodingInputs(IDS, TEXTS, "4" * 64)
    first = embed_table(store, model, "query", inputs, lambda: load_encoder(model))
    assert first.metadata["problems"] == ["2 vectors contain NaN or inf"]
    assert table_problems(first.path, IDS, 32) == ["2 vectors contain NaN or inf"]
    # The user fixes the encoder (same card): the rerun encodes again instead of serving the NaN table.
    fixed = load_config(write_configs(models={"toy": toy_card()})).models["toy"]
    second = embed_table(store, model, "query", inputs, lambda: load_encoder(fixed))
    assert not second.cache_hit and second.path == first.path and second.metadata["problems"] == []
    assert embed_table(store, model, "query", inputs, lambda: pytest.fail("valid now")).cache_hit
