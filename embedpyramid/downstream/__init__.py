"""Pyramid L6, downstream utility: answers built on each model's retrieval, graded by a judge.

Per (model, dataset, system): :func:`evaluate_downstream` builds top-k contexts, answers with a
generator (offline extractive or an OpenAI-compatible chat model), computes answer and citation
metrics, grades each answer 1-5 on the configured criteria (offline from the qrels, or an
OpenAI-compatible judge) and returns long per-query rows. Per (dataset, system), across models:
:func:`analyse_grades` fits GLMs and an ordinal model, chooses by AIC among comparable ones,
tests whether the model matters (likelihood ratio, Wald), compares pairs with Holm and letter
groups, estimates power by simulation and draws the three plots.
"""

from embedpyramid.downstream.agreement import judge_agreement, weighted_kappa
from embedpyramid.downstream.analysis import GradeAnalysis, analyse_grades, model_order, write_grade_analysis
from embedpyramid.downstream.answer_metrics import (
    CITATION_PRECISION,
    CITATION_RECALL,
    CONTAINS_GOLD,
    CONTEXT_RECALL,
    TOKEN_F1,
    answer_metrics,
)
from embedpyramid.downstream.answers import Answer, Generator
from embedpyramid.downstream.chat import ChatEndpoint, ChatReply
from embedpyramid.downstream.context import Context, Passage, build_contexts
from embedpyramid.downstream.extractive import ExtractiveGenerator
from embedpyramid.downstream.http_generator import HttpGenerator
from embedpyramid.downstream.http_judge import HttpJudge
from embedpyramid.downstream.judge import Judge, Judgement, MalformedGrades, judge_metric, parse_grades
from embedpyramid.downstream.level import (
    DownstreamResult,
    build_generator,
    build_judge,
    downstream_directory,
    evaluate_downstream,
    paired_coverage,
    read_downstream,
    write_downstream,
)
from embedpyramid.downstream.qrels_judge import QrelsJudge, score_to_grade

__all__ = [
    "CITATION_PRECISION",
    "CITATION_RECALL",
    "CONTAINS_GOLD",
    "CONTEXT_RECALL",
    "TOKEN_F1",
    "Answer",
    "ChatEndpoint",
    "ChatReply",
    "Context",
    "DownstreamResult",
    "ExtractiveGenerator",
    "Generator",
    "GradeAnalysis",
    "HttpGenerator",
    "HttpJudge",
    "Judge",
    "Judgement",
    "MalformedGrades",
    "Passage",
    "QrelsJudge",
    "analyse_grades",
    "answer_metrics",
    "build_contexts",
    "build_generator",
    "build_judge",
    "downstream_directory",
    "evaluate_downstream",
    "judge_agreement",
    "judge_metric",
    "model_order",
    "paired_coverage",
    "parse_grades",
    "read_downstream",
    "score_to_grade",
    "weighted_kappa",
    "write_downstream",
    "write_grade_analysis",
]
