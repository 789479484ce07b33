"""Code versions follow the source: editing a core file in a copy of the project changes the code
version of exactly the assets whose computation imports it."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from embedpyramid.code_version import SourceTree
from pipelines.graph import build_definitions

REPO = Path(__file__).resolve().parents[2]
COPIED = ("embedpyramid", "graphbase", "assets", "pipelines", "resources", "configs")
PRINT_VERSIONS = """
import json, sys
from pathlib import Path
import embedpyramid
from pipelines.graph import build_definitions

assert Path(embedpyramid.__file__).resolve().is_relative_to(Path.cwd().resolve()), embedpyramid.__file__
graph = build_definitions("configs", sys.argv[1]).resolve_asset_graph()
print(json.dumps({key.to_user_string(): graph.get(key).code_version for key in graph.get_all_asset_keys()
                  if graph.get(key).is_materializable}))
"""


@pytest.fixture
def project_copy(tmp_path) -> Path:
    copy = tmp_path / "project"
    for name in COPIED:
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "workspace.yaml", copy / "workspace.yaml")
    return copy


def code_versions(project: Path) -> dict[str, str]:
    """``{asset key: code version}`` of the graph that ``project`` defines, built in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(project), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", PRINT_VERSIONS, str(project.parent / "data")], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def append_comment(path: Path) -> None:
    with path.open("a") as file:
        file.write("# an edit\n")


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    assert before.keys() == after.keys()
    return {key for key in before if before[key] != after[key]}


def downstream(graph, key: str) -> set[str]:
    found, stack = set(), [dg.AssetKey(key)]
    while stack:
        for child in graph.get(stack.pop()).child_keys:
            if child.to_user_string() not in found:
                found.add(child.to_user_string())
                stack.append(child)
    return found


TASK_STS_CALLERS = {"task_sts", "task_comparisons"}
"""task_sts evaluates with tasks/sts.py; task_comparisons compares the STS models with its
compare_sts (the paired bootstrap of Spearman's rho). Nothing else runs that file."""
ANN = {"ann_binary", "ann_flat", "ann_flat_d64", "ann_flat_d128", "ann_flat_d256", "ann_hnsw32", "ann_int8",
       "ann_ivf_flat", "ann_ivf_pq", "ann_sq8", "serving_frontier"}
SYSTEMS = {"system_bm25", "system_hnsw_rerank_by_use_m3", "system_rerank_by_minilm_l6", "system_rerank_by_use_m3",
           "system_rrf", "system_weighted_minmax", "system_weighted_zscore"}
SUMMARIES = {"comparisons", "results_db", "comparison_report", "benchmark_transfer", "downstream_answers",
             "grade_analysis"}
BOOTSTRAP_IMPORTERS = {
    # L1: the normalization price's delta CI (geometry.normalization, through geometry.level).
    "norm_geometry", "normalization_price",
    # L2: retrieval metrics check the published scores (transfer.level's bootstrap intervals); each
    # task family compares models with the statistic bootstrap (stats.statistic).
    "retrieval_metrics", "task_sts", "task_pair_classification", "task_classification", "task_clustering",
    "task_bitext",
    # L4: the paired delta vs exact (serving.evaluate); L5 evaluates ANN first stages through it;
    # L6 and the summaries compare models (stats.comparisons).
    *ANN, *SYSTEMS, *SUMMARIES, "task_comparisons",
}
NDCG_IMPORTERS = {
    # retrieval.level scores runs (and also holds the exact search); geometry.level prices the
    # normalization with the metrics; L4, L5 and L6 (the qrels judge) score their runs; the reranking
    # family scores each query's candidates with them, and task_comparisons runs every family's module.
    "exact_topk", "retrieval_metrics", "norm_geometry", "normalization_price", *ANN, *SYSTEMS, *SUMMARIES,
    "task_reranking", "task_comparisons",
}
UNTOUCHED_BY_BOOTSTRAP = {
    # The data, the encodes, the exact search, efficiency and pair sanity never reach it; nor do the
    # families whose every measure is a per-item mean (reranking, multi-label classification: the
    # task summary's paired comparisons compare them).
    "frozen_dataset", "frozen_sts_dataset", "frozen_pair_classification_dataset", "frozen_classification_dataset",
    "frozen_clustering_dataset", "frozen_bitext_dataset", "frozen_reranking_dataset",
    "frozen_multilabel_classification_dataset", "query_embeddings", "document_embeddings",
    "raw_query_embeddings", "raw_document_embeddings", "exact_topk", "efficiency", "pair_sanity", "pair_sanity_sts",
    "pair_sanity_pair_classification", "pair_sanity_bitext", "task_reranking", "task_multilabel_classification",
    *(f"{family}_embeddings" for family in ("sts", "pair_classification", "classification", "clustering", "bitext",
                                            "reranking", "multilabel_classification")),
}


@pytest.mark.heavy
def test_a_core_edit_changes_the_code_version_of_exactly_its_importers(project_copy):
    before = code_versions(project_copy)
    assert all(before.values()), "every asset has a derived code version"

    append_comment(project_copy / "embedpyramid" / "tasks" / "sts.py")
    after_sts = code_versions(project_copy)
    assert changed(before, after_sts) == TASK_STS_CALLERS
    graph = build_definitions(REPO / "configs", project_copy.parent / "data").resolve_asset_graph()
    assert TASK_STS_CALLERS - {"task_sts"} <= downstream(graph, "task_sts"), "nothing outside task_sts's lineage"

    append_comment(project_copy / "embedpyramid" / "stats" / "bootstrap.py")
    after_bootstrap = code_versions(project_copy)
    assert changed(after_sts, after_bootstrap) == BOOTSTRAP_IMPORTERS
    assert set(before) - BOOTSTRAP_IMPORTERS == UNTOUCHED_BY_BOOTSTRAP

    append_comment(project_copy / "embedpyramid" / "retrieval" / "metrics" / "ndcg.py")
    after_ndcg = code_versions(project_copy)
    assert changed(after_bootstrap, after_ndcg) == NDCG_IMPORTERS

    append_comment(project_copy / "assets" / "tasks.py")
    after_assets = code_versions(project_copy)
    assert changed(after_ndcg, after_assets) == {key for key in before if key.startswith(
        ("frozen_sts", "frozen_pair", "frozen_classification", "frozen_clustering", "frozen_bitext", "frozen_reranking",
         "frozen_multilabel", "task_"))
    }, "an asset module's own source is part of its assets' versions"


def test_the_versions_are_cheap_to_derive():
    """A warm ``embedpyramid run`` builds the definitions each time: reading the imports of the
    whole package takes milliseconds (about 15 on an idle core; the bound leaves room for a busy
    machine) and imports nothing."""
    modules_before = set(sys.modules)
    every = [".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for path in (REPO / "embedpyramid").rglob("*.py")]
    started = time.perf_counter()
    closure = SourceTree(REPO).closure(*every)
    assert time.perf_counter() - started < 0.25
    assert len(closure) == len(every)
    assert set(sys.modules) == modules_before
