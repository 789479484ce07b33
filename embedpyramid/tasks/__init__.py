"""Pyramid L2, the exact-task families beside retrieval — one module per family: ``sts``
(sentence similarity), ``pair_classification`` (duplicates), ``classification`` (kNN and linear
probe on frozen embeddings), ``clustering`` (k-means), ``bitext`` (translation mining),
``reranking`` (each query's given candidates, scored like retrieval) and
``multilabel_classification`` (MTEB's kNN on label sets); what they share (``common``), the level's
store-backed entry points (``level``) and the comparison across models (``comparison``)."""

from embedpyramid.tasks.common import (
    PER_SEED_SCHEMA,
    STATISTIC_COMPARISON_SCHEMA,
    SUMMARY_SCHEMA,
    TaskResult,
)
from embedpyramid.tasks.level import (
    compare_task,
    evaluate_task,
    read_task_result,
    task_groups,
    task_items,
    tasks_dir,
    write_task_result,
)

__all__ = [
    "PER_SEED_SCHEMA",
    "STATISTIC_COMPARISON_SCHEMA",
    "SUMMARY_SCHEMA",
    "TaskResult",
    "compare_task",
    "evaluate_task",
    "read_task_result",
    "task_groups",
    "task_items",
    "tasks_dir",
    "write_task_result",
]
