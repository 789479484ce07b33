"""L6 end to end on real chatterbot-corpus data with both real installed models, called directly:
the offline generator and judge over each model's exact top-k, then the grade analysis."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from embedpyramid.config import (
    AnalysisConfig,
    ChatterbotDataset,
    GeneratorConfig,
    JudgeConfig,
    MetricConventions,
    load_config,
    parse_measure,
)
from embedpyramid.data import dataset_gold_answers, load_chatterbot
from embedpyramid.downstream import analyse_grades, build_generator, build_judge, evaluate_downstream, score_to_grade
from embedpyramid.encode import load_encoder
from embedpyramid.retrieval.metrics import evaluate_run

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SMALL_CATEGORIES = ["ai", "computers", "emotion", "science"]
K = 5
TWO_REAL_MODELS = ("minilm-l6", "use-m3")  # the two different real models of the defaults


@pytest.fixture(scope="module")
def dataset():
    spec = ChatterbotDataset(loader="chatterbot", categories=SMALL_CATEGORIES)
    raw = load_chatterbot(spec)
    return {"corpus": pl.from_arrow(raw.corpus), "queries": pl.from_arrow(raw.queries), "qrels": pl.from_arrow(raw.qrels),
            "gold": pl.from_arrow(dataset_gold_answers(spec, raw.corpus, raw.qrels, 1))}


def exact_run(model, dataset, depth=10):
    """Top-``depth`` by inner product, ties by doc_id, from the model's own vectors."""
    encoder = load_encoder(model)
    queries = encoder.encode(dataset["queries"]["text"].to_list(), "query")
    documents = encoder.encode(dataset["corpus"]["text"].to_list(), "document")
    scores = queries @ documents.T
    doc_ids = np.array(dataset["corpus"]["doc_id"].to_list())
    rows = []
    for row, query_id in enumerate(dataset["queries"]["query_id"].to_list()):
        order = np.lexsort((doc_ids, -scores[row]))[:depth]
        rows += [(query_id, rank, doc_ids[i], float(scores[row, i])) for rank, i in enumerate(order, start=1)]
    return pl.DataFrame(rows, schema=["query_id", "rank", "doc_id", "score"], orient="row")


@pytest.fixture(scope="module")
def downstream(dataset):
    config = load_config(CONFIGS)
    conventions = MetricConventions()
    results = {}
    for model in (config.models[name] for name in TWO_REAL_MODELS):
        run = exact_run(model, dataset)
        generator = build_generator(GeneratorConfig(), dataset["corpus"])
        judge = build_judge(JudgeConfig(), dataset["qrels"], K, conventions)
        result = evaluate_downstream(run, dataset["queries"], dataset["corpus"], dataset["qrels"], dataset["gold"],
                                     generator=generator, judge=judge, dataset="chatterbot-small", model=model.key,
                                     system="exact", k=K, conventions=conventions)
        results[model.key] = (run, result)
    return results


def test_each_model_answers_every_query_and_context_recall_is_the_l2_recall(dataset, downstream):
    n_queries = dataset["queries"].height
    for run, result in downstream.values():
        assert result.manifest["counts"]["judged_queries"] == n_queries == result.answers.height
        table = result.per_query.pivot("metric", index="query_id", values="value")
        recall = evaluate_run(run, dataset["qrels"], [parse_measure(f"Recall@{K}")], conventions=MetricConventions(),
                              query_ids=dataset["queries"]["query_id"].to_list()).per_query
        joined = table.join(recall.select("query_id", pl.col("value").alias("recall")), on="query_id")
        assert joined.height == n_queries
        assert np.allclose(joined["context:recall"], joined["recall"])
        # Binary qrels: relevance is 5 exactly when the cited passage is relevant; coverage maps recall.
        assert ((joined["judge:relevance"] == 5) == (joined["answer:citation_precision"] == 1)).all()
        assert joined["judge:coverage"].to_list() == [score_to_grade(r) for r in joined["recall"]]
        # Every chatterbot query has gold answers (its replies); a cited gold reply is usually contained.
        assert joined["answer:contains_gold"].is_not_null().all()
        contained = joined.filter(pl.col("answer:citation_precision") == 1)["answer:contains_gold"].mean()
        assert contained > 0.5
        assert joined["context:recall"].mean() > 0.2  # random top-5 of ~200 replies would give ~0.025


def test_the_grade_analysis_runs_across_the_two_models(dataset, downstream):
    per_query = pl.concat([result.per_query for _, result in downstream.values()])
    settings = AnalysisConfig(power={"n_simulations": 300}, seed=3)
    analysis = analyse_grades(per_query, settings, dataset="chatterbot-small", system="exact")
    assert analysis.manifest["modelled_queries"] == dataset["queries"].height
    assert analysis.manifest["incomplete_queries"] == 0
    assert analysis.fits.filter(pl.col("group") == "gaussian")["converged"].all()
    assert analysis.fits["selected"].sum() == 1 and analysis.pairwise.height == 1
    assert analysis.omnibus.height == 3 and analysis.omnibus["p_value"].is_finite().all()
    assert set(analysis.letters["letters"].to_list()) <= {"a", "b"}
    assert analysis.power["n_required"].is_not_null().all()
