"""Task settings of a dataset entry (``datasets.yaml``): which L2 task family evaluates it and how.

A dataset entry declares ``task:`` (``retrieval``, the default for retrieval loaders, or one of
:data:`TASK_FAMILIES`) and, optionally, a block named after that task holding its settings;
every stochastic step takes its seeds from here, and the settings travel with the numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from embedpyramid.config.base import Strict

Task = Literal["retrieval", "sts", "pair_classification", "classification", "clustering", "bitext"]
TASK_FAMILIES: tuple[str, ...] = ("sts", "pair_classification", "classification", "clustering", "bitext")
ITEM_UNITS: dict[str, str] = {"sts": "pairs", "pair_classification": "pairs", "classification": "texts",
                              "clustering": "texts", "bitext": "pairs"}
"""What one compared item of each family is, as numbers are reported: ``accuracy over 30 pairs``."""
FAMILY_FUNCTIONS: dict[str, dict[str, str]] = {
    "sts": {"evaluate": "embedpyramid.tasks.sts:evaluate_sts", "compare": "embedpyramid.tasks.sts:compare_sts"},
    "pair_classification": {"evaluate": "embedpyramid.tasks.pair_classification:evaluate_pair_classification",
                            "compare": "embedpyramid.tasks.pair_classification:compare_pair_classification"},
    "classification": {"evaluate": "embedpyramid.tasks.classification:evaluate_classification",
                       "compare": "embedpyramid.tasks.classification:compare_classification"},
    "clustering": {"evaluate": "embedpyramid.tasks.clustering:evaluate_clustering",
                   "compare": "embedpyramid.tasks.clustering:compare_clustering"},
    "bitext": {"evaluate": "embedpyramid.tasks.bitext:evaluate_bitext", "compare": "embedpyramid.tasks.bitext:compare_bitext"},
}
"""Each L2 task family's evaluation and statistic comparison, as ``module:function``. The module is
imported when its family is evaluated (:func:`embedpyramid.tasks.level.evaluate_task`,
``compare_task``), so each family's asset runs (and its code version names) its own family's
source only."""


def task_family_module(task: str) -> str:
    """The module of an L2 task family (``embedpyramid.tasks.<task>``): the code version of an
    asset that evaluates a family names it, since the versions read import statements, not
    :data:`FAMILY_FUNCTIONS` (:mod:`embedpyramid.code_version`)."""
    if task not in FAMILY_FUNCTIONS:
        raise ValueError(f"task {task!r} is not an L2 task family; allowed: {', '.join(FAMILY_FUNCTIONS)}")
    return FAMILY_FUNCTIONS[task]["evaluate"].partition(":")[0]


BitextScoring = Literal["nearest", "margin", "csls"]
Protocol = Literal["project", "mteb"]
MTEB_VERSION = "2.26"
"""The mteb release whose evaluators the ``mteb`` protocols follow (checked against mteb 2.26.24's
``AbsTask*`` classes and ``_evaluators`` in the tests)."""


class TaskSettings(Strict):
    """What every task family shares: the card prompt its texts are encoded with and the protocol.

    ``text_kind: query`` encodes every text with the card's query prompt (the usual choice for
    symmetric tasks, e.g. e5's ``query:``), ``document`` with its document prompt.
    ``protocol: project`` (the default) is the project's own protocol; ``protocol: mteb`` follows
    MTEB's evaluator of the family exactly (:data:`MTEB_VERSION`), so that a published MTEB score
    can be reproduced — see each family's module for what differs.
    """

    text_kind: Literal["query", "document"] = "query"
    protocol: Protocol = "project"


class RetrievalSettings(Strict):
    """The ``retrieval:`` block of a retrieval dataset. ``protocol: project`` (the default) scores
    the run under protocol.yaml's conventions; ``protocol: mteb`` follows mteb 2.26's
    ``AbsTaskRetrieval`` exactly (:data:`MTEB_VERSION`): the search keeps the larger doc ids
    among documents tied at its cut, as MTEB's heap does, and the metrics follow
    :meth:`embedpyramid.config.conventions.MetricConventions.mteb` — pytrec_eval's
    order and measures over every query with qrels (one whose qrels are all grade 0 scores 0),
    the run cut at ``top_k`` before the dataset's ``drop_self_hits`` (the task's
    ``ignore_identical_ids``) drops self-hits. ``top_k`` is MTEB's search depth, the largest of
    the task's ``k_values`` (1000 by default in ``AbsTaskRetrieval``). protocol.yaml's ``gain``,
    ``relevance_threshold`` and ``ties`` do not apply to an ``mteb`` dataset."""

    protocol: Protocol = "project"
    top_k: int = Field(1000, ge=1)


class StsSettings(TaskSettings):
    """STS: cosine of the two texts against the human score (Spearman primary, Pearson)."""


class PairClassificationSettings(TaskSettings):
    """Pair classification: ``cosine >= threshold`` is positive; the threshold maximizes
    ``threshold_metric`` on the dev split and is applied unchanged to test. ``seed`` draws the
    negatives and the dev/test split of the embedded chatterbot pairs; ``dev_share`` is the share
    of positive pairs (by whole answer group) that goes to dev."""

    threshold_metric: Literal["f1", "accuracy"] = "f1"
    seed: int = 42
    dev_share: float = Field(0.5, gt=0, lt=1)


class MtebClassification(Strict):
    """MTEB's classification protocol (``AbsTaskClassification``): ``n_experiments`` times, a
    training set of at most ``samples_per_label`` items per label drawn by shuffling the training
    indices with ``numpy.random.RandomState(seed)`` (re-created each experiment, shuffling the
    previous order again), ``LogisticRegression(max_iter=max_iter, random_state=seed)`` fitted on
    the vectors as the card produced them, accuracy on the test split averaged over experiments.
    Without a ``split`` column (train/test) on the texts, MTEB's cross-validation variant:
    ``KFold(n_splits, shuffle=True, random_state=seed)``, one undersampled experiment per fold.
    The defaults are MTEB's; many MTEB tasks set ``samples_per_label`` (16, 32) — use the task's."""

    samples_per_label: int = Field(8, ge=1)
    n_experiments: int = Field(10, ge=1)
    seed: int = 42
    max_iter: int = Field(100, ge=1)
    n_splits: int = Field(5, ge=2)
    train_split: str = "train"
    eval_split: str = "test"


class ClassificationSettings(TaskSettings):
    """Classification on frozen embeddings, by repeated stratified k-fold cross-validation.

    For each seed the items are split into ``folds`` stratified folds (shuffled with the seed);
    every item is predicted once per seed by a kNN classifier (``k`` neighbours, cosine) and by a
    logistic-regression probe whose C is chosen from ``c_grid`` by ``inner_folds``-fold
    cross-validation on the training folds only; when the chosen C sits on an edge of the grid
    the grid is widened by a decade on that side, at most ``c_widenings`` times, and a C still on
    the edge is reported. Classes with fewer than ``folds`` items cannot
    be stratified and are dropped (and listed). ``mteb`` holds MTEB's protocol (``protocol: mteb``). ``threads`` caps the BLAS threads of the fits:
    1 keeps them reproducible bit for bit and, on a shared machine, avoids oversubscribing the
    cores (many small fits, each asking for every core, spend their time waiting for one another).
    """

    k: int = Field(5, ge=1)
    c_grid: list[float] = Field(default_factory=lambda: [0.1, 1.0, 10.0, 100.0, 1000.0])
    folds: int = Field(5, ge=2)
    inner_folds: int = Field(3, ge=2)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    max_iter: int = Field(1000, ge=1)
    threads: int = Field(1, ge=1)
    c_widenings: int = Field(2, ge=0)
    mteb: MtebClassification = Field(default_factory=MtebClassification)

    @field_validator("c_grid")
    @classmethod
    def _positive_grid(cls, grid: list[float]) -> list[float]:
        if not grid or any(c <= 0 for c in grid):
            raise ValueError("c_grid must be a non-empty list of positive inverse regularization strengths")
        return grid

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        return _checked_seeds(seeds)

    @model_validator(mode="after")
    def _inner_fits_outer(self) -> ClassificationSettings:
        if self.inner_folds >= self.folds:
            raise ValueError(
                f"inner_folds ({self.inner_folds}) must be below folds ({self.folds}): a class of `folds` "
                "items leaves folds - 1 of them for the inner cross-validation"
            )
        return self


class MtebClustering(Strict):
    """MTEB v2's clustering protocol (``AbsTaskClustering``): ``random.Random(seed)`` first keeps
    ``max_documents_to_embed`` items (or ``max_fraction_to_embed`` of them; neither: all — what
    most MTEB v2 tasks set, the abstract class's default being a fraction of 0.04), then draws
    ``n_draws`` samples of ``sample_size`` items *with replacement*; each is clustered by
    ``MiniBatchKMeans(n_clusters=<labels>, batch_size=batch_size, init="k-means++", n_init=1,
    random_state=seed)`` on the vectors as the card produced them, and V-measure (main) and AMI
    are averaged over the draws."""

    seed: int = 42
    n_draws: int = Field(10, ge=1)
    sample_size: int = Field(16_384, ge=1)
    batch_size: int = Field(512, ge=1)
    max_documents_to_embed: int | None = Field(None, ge=1)
    max_fraction_to_embed: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _one_limit(self) -> MtebClustering:
        if self.max_documents_to_embed is not None and self.max_fraction_to_embed is not None:
            raise ValueError("set max_documents_to_embed or max_fraction_to_embed, not both (MTEB refuses both)")
        return self


class ClusteringSettings(TaskSettings):
    """k-means on unit vectors with k = the number of gold classes, once per seed (``n_init``
    initializations each); V-measure, ARI and AMI as mean ± sd over the seeds. ``threads`` caps
    k-means' OpenMP threads (1: reproducible on any machine). ``mteb`` holds MTEB's protocol
    (``protocol: mteb``)."""

    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4])
    n_init: int = Field(1, ge=1)
    threads: int = Field(1, ge=1)
    mteb: MtebClustering = Field(default_factory=MtebClustering)

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        return _checked_seeds(seeds)


class BitextSettings(TaskSettings):
    """Bitext mining: each source sentence's best target among all targets of its language pair.

    ``scorings``: ``nearest`` (cosine), ``margin`` (ratio margin, Artetxe & Schwenk 2019) and
    ``csls`` (Conneau et al. 2018), the last two over ``k`` neighbours; the hubness of each
    scoring is the skew of the k-occurrence over its top ``hubness_k`` targets per source.
    """

    scorings: list[BitextScoring] = Field(default_factory=lambda: ["nearest", "margin", "csls"])
    k: int = Field(4, ge=1)
    hubness_k: int = Field(10, ge=1)

    @field_validator("scorings")
    @classmethod
    def _distinct_scorings(cls, scorings: list[str]) -> list[str]:
        if not scorings or len(set(scorings)) != len(scorings):
            raise ValueError("scorings must list distinct scorings: nearest, margin, csls")
        return scorings


SETTINGS_BY_TASK: dict[str, type[TaskSettings]] = {
    "sts": StsSettings,
    "pair_classification": PairClassificationSettings,
    "classification": ClassificationSettings,
    "clustering": ClusteringSettings,
    "bitext": BitextSettings,
}


def _checked_seeds(seeds: list[int]) -> list[int]:
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a non-empty list of distinct integers")
    return seeds
