"""Pyramid L6, downstream answers, for one (model, dataset, system): contexts from the run, an
answer per query, its metrics, and the judge's grades — as the project's long per-query table.

Per query of the frozen query table: the top-k context (:mod:`~embedpyramid.downstream.context`),
the generator's answer, the answer metrics (:mod:`~embedpyramid.downstream.answer_metrics`) and one
grade per criterion, stored as ``dataset, model, system, query_id, metric, value`` rows with
metrics ``answer:*``, ``context:recall`` and ``judge:<criterion>``: they join the retrieval
metrics of the same (model, system), so the paired comparisons, verdicts and slices cover them.
Queries without a relevant qrel get no rows (as for the retrieval metrics); an unreadable
generator reply or judge reply gets no rows for what it lacks, and is recorded and counted in
the answers / judgements tables and the manifest. When the judge is not the qrels judge, the
qrels judge grades the same answers too (``reference_grade``) and the manifest holds their
weighted kappa per criterion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from embedpyramid.config import CRITERION_DESCRIPTIONS, GeneratorConfig, JudgeConfig
from embedpyramid.config.conventions import MetricConventions
from embedpyramid.data import document_texts
from embedpyramid.downstream.agreement import judge_agreement
from embedpyramid.downstream.answer_metrics import answer_metrics
from embedpyramid.downstream.answers import Answer, Generator
from embedpyramid.downstream.chat import ChatEndpoint
from embedpyramid.downstream.context import build_contexts
from embedpyramid.downstream.extractive import ExtractiveGenerator
from embedpyramid.downstream.http_generator import HttpGenerator
from embedpyramid.downstream.http_judge import HttpJudge
from embedpyramid.downstream.judge import Judge, Judgement, judge_metric
from embedpyramid.downstream.qrels_judge import NO_RELEVANT, QrelsJudge
from embedpyramid.store import PER_QUERY_SCHEMA, read_frame, read_table_metadata, write_json, write_parquet

GENERATOR_MALFORMED = "the generator's reply was malformed"
ANSWERS_SCHEMA = {"query_id": pl.String, "context": pl.List(pl.String), "answer": pl.String,
                  "citations": pl.List(pl.String), "invalid_citations": pl.List(pl.String), "malformed": pl.String}
JUDGEMENTS_SCHEMA = {"query_id": pl.String, "criterion": pl.String, "grade": pl.Int32, "reference_grade": pl.Int32,
                     "rationale": pl.String, "malformed": pl.String, "skipped": pl.String, "response": pl.String}
Progress = Callable[[int, int], None]


def qrels_mapping(qrels: pl.DataFrame) -> dict[str, dict[str, int]]:
    """query id -> {doc id: grade} from a qrels table."""
    mapping: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in qrels.select("query_id", "doc_id", "relevance").iter_rows():
        mapping.setdefault(query_id, {})[doc_id] = grade
    return mapping


def build_generator(config: GeneratorConfig, corpus: pl.DataFrame, *, cache_dir: Path | None = None,
                    sleep: Callable[[float], None] = time.sleep) -> Generator:
    """The configured generator; the extractive one takes its idf from ``corpus``."""
    if config.kind == "extractive":
        return ExtractiveGenerator.from_corpus(document_texts(corpus.to_arrow()))
    endpoint = ChatEndpoint.from_environment(config.endpoint, "judge.yaml: generator.endpoint", cache_dir=cache_dir,
                                             sleep=sleep)
    return HttpGenerator(endpoint, max_tokens=config.max_tokens, prompt_version=config.prompt_version)


def build_judge(config: JudgeConfig, qrels: pl.DataFrame, k: int, conventions: MetricConventions, *,
                cache_dir: Path | None = None, sleep: Callable[[float], None] = time.sleep) -> Judge:
    """The configured judge; the qrels judge grades from ``qrels`` under ``conventions``."""
    if config.kind == "qrels":
        return QrelsJudge(qrels_mapping(qrels), config.criteria, k, conventions)
    endpoint = ChatEndpoint.from_environment(config.endpoint, "judge.yaml: judge.endpoint", cache_dir=cache_dir,
                                             sleep=sleep)
    descriptions = {criterion: config.description(criterion) for criterion in config.criteria}
    return HttpJudge(endpoint, config.criteria, descriptions, max_tokens=config.max_tokens,
                     prompt_version=config.prompt_version)


@dataclass(frozen=True)
class DownstreamResult:
    """``answers``: one row per query; ``judgements``: one row per (query, criterion), grade null
    when malformed or skipped; ``per_query``: the long metric rows; ``manifest``: settings,
    generator and judge identities, counts and judge agreement."""

    answers: pl.DataFrame
    judgements: pl.DataFrame
    per_query: pl.DataFrame
    manifest: dict[str, Any]


def evaluate_downstream(
    run: pl.DataFrame, queries: pl.DataFrame, corpus: pl.DataFrame, qrels: pl.DataFrame,
    gold_answers: pl.DataFrame | None, *, generator: Generator, judge: Judge, dataset: str, model: str,
    system: str, k: int, conventions: MetricConventions, progress: Progress | None = None,
) -> DownstreamResult:
    """Answer, measure and grade every query of ``queries`` from ``run``'s top-``k`` (see the module doc).

    ``gold_answers`` (``query_id, answer``) is None when the dataset has none; ``progress`` is
    called with (done, total) after each query.
    """
    contexts = build_contexts(run, queries, corpus, k, drop_self_hits=conventions.drop_self_hits)
    judged = qrels_mapping(qrels)
    gold: dict[str, list[str]] = {}
    if gold_answers is not None:
        for query_id, text in gold_answers.select("query_id", "answer").iter_rows():
            gold.setdefault(query_id, []).append(text)
    reference = None
    if not isinstance(judge, QrelsJudge):
        shared = [c for c in judge.criteria if c in CRITERION_DESCRIPTIONS]
        reference = QrelsJudge(judged, shared, k, conventions) if shared and judged else None
    answers, judgement_rows, metric_rows = [], [], []
    excluded = 0
    for done, context in enumerate(contexts, start=1):
        relevant = {d for d, g in judged.get(context.query_id, {}).items() if g >= conventions.relevance_threshold}
        if not relevant:
            excluded += 1
            answer = Answer(context.query_id, "")
            judgement = Judgement(context.query_id, skipped=NO_RELEVANT)
        else:
            answer = generator.answer(context)
            if answer.malformed is None:
                judgement = judge.judge(context, answer)
                values = answer_metrics(answer, context.doc_ids, relevant, gold.get(context.query_id))
                values |= {judge_metric(c): float(g) for c, g in judgement.grades.items()}
                metric_rows += [(context.query_id, metric, value) for metric, value in values.items()]
            else:
                judgement = Judgement(context.query_id, skipped=GENERATOR_MALFORMED)
        answers.append((context.query_id, list(context.doc_ids), answer.text, list(answer.citations),
                        list(answer.invalid_citations), answer.malformed))
        reference_grades = (reference.judge(context, answer).grades
                            if reference is not None and judgement.grades else {})
        judgement_rows += [(context.query_id, criterion, judgement.grades.get(criterion),
                            reference_grades.get(criterion), judgement.rationale, judgement.malformed,
                            judgement.skipped, judgement.response) for criterion in judge.criteria]
        if progress is not None:
            progress(done, len(contexts))
    answers_frame = pl.DataFrame(answers, schema=ANSWERS_SCHEMA, orient="row")
    judgements_frame = pl.DataFrame(judgement_rows, schema=JUDGEMENTS_SCHEMA, orient="row")
    per_query = pl.DataFrame(metric_rows, schema={"query_id": pl.String, "metric": pl.String, "value": pl.Float64},
                             orient="row").select(
        pl.lit(dataset).alias("dataset"), pl.lit(model).alias("model"), pl.lit(system).alias("system"),
        "query_id", "metric", "value",
    ).cast(PER_QUERY_SCHEMA)
    by_query = judgements_frame.unique("query_id", keep="first")
    manifest = {
        "dataset": dataset, "model": model, "system": system, "k": k, "conventions": conventions.as_dict(),
        "generator": generator.describe(), "judge": judge.describe(),
        "counts": {
            "queries": len(contexts),
            "excluded_queries": excluded,
            "excluded_reason": NO_RELEVANT,
            "empty_contexts": sum(not context.passages for context in contexts),
            "generator_malformed": answers_frame["malformed"].is_not_null().sum(),
            "judged_queries": by_query.filter(pl.col("grade").is_not_null()).height,
            "judge_malformed": by_query["malformed"].is_not_null().sum(),
            "judge_skipped": by_query["skipped"].is_not_null().sum(),
            "queries_with_gold_answers": sum(context.query_id in gold for context in contexts),
        },
        "agreement": judge_agreement(judgements_frame).to_dicts() if reference is not None else [],
        "traffic": {name: component.endpoint.counts() for name, component in (("generator", generator), ("judge", judge))
                    if isinstance(component, HttpGenerator | HttpJudge)},
    }
    return DownstreamResult(answers_frame, judgements_frame, per_query, manifest)


def write_downstream(result: DownstreamResult, directory: Path) -> dict[str, Path]:
    """``answers.parquet``, ``judgements.parquet``, ``per_query.parquet`` (the manifest in its
    schema metadata) and ``manifest.json`` under ``directory``, each written atomically."""
    metadata = {"embedpyramid": json.dumps(result.manifest, sort_keys=True, default=str)}
    paths = {
        "answers": write_parquet(result.answers.to_arrow(), directory / "answers.parquet"),
        "judgements": write_parquet(result.judgements.to_arrow(), directory / "judgements.parquet"),
        "per_query": write_parquet(result.per_query.to_arrow().replace_schema_metadata(metadata),
                                   directory / "per_query.parquet"),
    }
    paths["manifest"] = write_json(result.manifest, directory / "manifest.json")
    return paths


def read_downstream(directory: Path) -> DownstreamResult:
    """What :func:`write_downstream` wrote."""
    return DownstreamResult(read_frame(directory / "answers.parquet"), read_frame(directory / "judgements.parquet"),
                            read_frame(directory / "per_query.parquet"),
                            read_table_metadata(directory / "per_query.parquet"))


def paired_coverage(per_query: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows kept so that, within each (dataset, system, metric), every model has the same
    queries — what the paired comparisons require — and ``dataset, system, metric,
    dropped_queries`` for the queries some model lacks (e.g. a malformed judgement)."""
    keys = ["dataset", "system", "metric"]
    models = per_query.group_by("dataset", "system").agg(pl.col("model").n_unique().alias("models"))
    coverage = (per_query.group_by(*keys, "query_id").agg(pl.col("model").n_unique().alias("present"))
                .join(models, on=["dataset", "system"]))
    complete = coverage.filter(pl.col("present") == pl.col("models")).select(*keys, "query_id")
    dropped = (coverage.filter(pl.col("present") < pl.col("models")).group_by(keys, maintain_order=True)
               .agg(pl.len().alias("dropped_queries")).sort(keys))
    return per_query.join(complete, on=[*keys, "query_id"], how="semi", maintain_order="left"), dropped


def downstream_directory(root: Path, dataset: str, model_key: str, system: str) -> Path:
    """Where one partition's L6 artefacts live under a data folder."""
    return root / "downstream" / dataset / model_key / system

