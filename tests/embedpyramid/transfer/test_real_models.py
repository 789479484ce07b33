"""The transfer core with the two installed models, called directly: the card's prompts, and a
public SQuAD-format dataset against the user's own (chatterbot) data end to end."""

from pathlib import Path

import numpy as np
import polars as pl

from embedpyramid.config import ProjectConfig, ResolvedModel, load_config
from embedpyramid.data import RawDataset, document_texts, load_configured_dataset
from embedpyramid.encode import Encoder, load_encoder
from embedpyramid.retrieval.metrics import evaluate_run
from embedpyramid.retrieval.search import exact_topk, run_table
from embedpyramid.transfer.level import analyse_transfer, reproduce_model

SQUAD = Path(__file__).resolve().parents[2] / "fixtures" / "squad" / "squad-v2-mini.json"
_LOADED: dict[str, Encoder] = {}


def encode(model: ResolvedModel, texts: list[str], kind: str) -> np.ndarray:
    """The card's vectors: the backend's output (prompts applied by the backend), L2-normalized;
    each card's model is loaded once per test session."""
    if model.key not in _LOADED:
        _LOADED[model.key] = load_encoder(model)
    vectors = np.asarray(_LOADED[model.key].encode(texts, kind), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_prompt_is_a_plain_prefix_of_the_text(write_configs, default_models):
    """How e5-style prompts work today: ``query_prompt``/``document_prompt`` are prepended to each
    text of that kind (sentence-transformers' ``prompt=``, which also pools the prompt's tokens;
    string concatenation in the model2vec and entry-point backends) and are part of the card's hash."""
    card = "minilm-l6"
    prompted = {**default_models, card: {**default_models[card], "query_prompt": "query: ", "document_prompt": "passage: "}}
    plain, with_prompts = (load_config(write_configs(name, models=models)).models[card]
                           for name, models in (("plain", default_models), ("prompted", prompted)))
    assert plain.card_hash != with_prompts.card_hash
    texts = ["What is a Turing machine?", "Who were the Normans?"]
    assert np.allclose(encode(with_prompts, texts, "query"), encode(plain, ["query: " + t for t in texts], "query"), atol=1e-5)
    assert np.allclose(encode(with_prompts, texts, "document"), encode(plain, ["passage: " + t for t in texts], "document"),
                       atol=1e-5)
    assert not np.allclose(encode(with_prompts, texts, "query"), encode(plain, texts, "query"), atol=1e-3)


def evaluate(config: ProjectConfig, dataset: str, raw: RawDataset) -> pl.DataFrame:
    """Exact search and per-query metrics of every card on one dataset, in the long format."""
    frames = []
    query_ids, doc_ids = raw.queries["query_id"].to_pylist(), raw.corpus["doc_id"].to_pylist()
    for model in config.models.values():
        queries = encode(model, raw.queries["text"].to_pylist(), "query")
        documents = encode(model, document_texts(raw.corpus), "document")
        scores, indices = exact_topk(queries, documents, config.protocol.depth)
        evaluation = evaluate_run(pl.from_arrow(run_table(query_ids, doc_ids, scores, indices)), pl.from_arrow(raw.qrels),
                                  config.protocol.measures(), config.protocol.conventions(config.dataset(dataset)))
        frames.append(evaluation.per_query.select(
            pl.lit(dataset).alias("dataset"), pl.lit(model.key).alias("model"), pl.lit("exact").alias("system"),
            "query_id", "metric", "value"))
    return pl.concat(frames)


def test_public_squad_against_own_chatterbot_with_both_models(write_configs, two_real_models):
    config = load_config(write_configs(models=two_real_models, datasets={
        "squad-mini": {"loader": "squad", "path": str(SQUAD), "role": "public", "confirmatory_metric": "Recall@1",
                       "reference": [{"model": "minilm-l6", "metric": "Recall@1", "value": 1.0, "tolerance": 0.0,
                                      "source": "test fixture: not a published number"}]},
        "chatterbot-ai": {"loader": "chatterbot", "categories": ["ai"]},
    }))
    raws = {name: load_configured_dataset(config, name) for name in config.datasets}
    per_query = pl.concat([evaluate(config, name, raw) for name, raw in raws.items()])
    minilm, use = config.models["minilm-l6"], config.models["use-m3"]

    recall_at_1 = per_query.filter((pl.col("dataset") == "squad-mini") & (pl.col("metric") == "Recall@1"))
    assert recall_at_1.height == 2 * 6
    conventions = config.protocol.conventions(config.dataset("squad-mini")).as_dict()
    [check] = reproduce_model(config, "squad-mini", minilm, per_query, conventions=conventions,
                              corpus=raws["squad-mini"].corpus)
    assert check.n_items == 6 and check.status == ("pass" if check.measured == 1.0 else "fail")
    assert check.measured == recall_at_1.filter(pl.col("model") == minilm.key)["value"].mean()
    assert check.measured >= 4 / 6, "MiniLM should find the paragraph of most of the fixture's plain questions"

    result = analyse_transfer(config, per_query)
    rankings = result.rankings
    assert set(rankings["model"]) == {minilm.key, use.key}
    assert rankings.filter(pl.col("dataset") == "chatterbot-ai")["metric"].unique().to_list() == ["nDCG@10"]
    assert rankings.filter(pl.col("dataset") == "squad-mini")["metric"].unique().to_list() == ["Recall@1"]
    pair = result.pairs.row(0, named=True)
    assert (pair["public_dataset"], pair["own_dataset"], pair["n_models"], pair["informative"]) == (
        "squad-mini", "chatterbot-ai", 2, False)
    assert 0.0 <= pair["p_same_winner"] <= 1.0 and pair["pairwise_agreement"] in (0.0, 1.0)
    assert result.flips.height == 1
