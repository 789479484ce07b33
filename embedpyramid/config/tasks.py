"""Task settings of a dataset entry (``datasets.yaml``): which L2 task family evaluates it and how.

A dataset entry declares ``task:`` (``retrieval``, the default for retrieval loaders, or one of
:data:`TASK_FAMILIES`) and, optionally, a block named after that task holding its settings;
every stochastic step takes its seeds from here, and the settings travel with the numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from embedpyramid.config.base import Strict
from embedpyramid.config.measures import parse_measure

Task = Literal["retrieval", "sts", "pair_classification", "classification", "clustering", "bitext", "reranking",
               "multilabel_classification"]
TASK_FAMILIES: tuple[str, ...] = ("sts", "pair_classification", "classification", "clustering", "bitext", "reranking",
                                  "multilabel_classification")
ITEM_UNITS: dict[str, str] = {"sts": "pairs", "pair_classification": "pairs", "classification": "texts",
                              "clustering": "texts", "bitext": "pairs", "reranking": "queries",
                              "multilabel_classification": "texts"}
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
    "reranking": {"evaluate": "embedpyramid.tasks.reranking:evaluate_reranking",
                  "compare": "embedpyramid.tasks.reranking:compare_reranking"},
    "multilabel_classification": {
        "evaluate": "embedpyramid.tasks.multilabel_classification:evaluate_multilabel_classification",
        "compare": "embedpyramid.tasks.multilabel_classification:compare_multilabel_classification"},
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
    ``relevance_threshold`` and ``ties`` do not apply to an ``mteb`` dataset. ``skip_first_result``
    (MTEB's task attribute of the same name, set by tasks whose queries are in their corpus under
    another id) drops each query's best-scored document before the metrics, after the cut and the
    self-hits; only under ``protocol: mteb``."""

    protocol: Protocol = "project"
    top_k: int = Field(1000, ge=1)
    skip_first_result: bool = False

    @model_validator(mode="after")
    def _skip_first_under_mteb(self) -> RetrievalSettings:
        if self.skip_first_result and self.protocol != "mteb":
            raise ValueError("skip_first_result follows MTEB's task attribute: set protocol: mteb (the project "
                             "protocol drops a query's own document with drop_self_hits)")
        return self


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
    The defaults are MTEB's; many MTEB tasks set ``samples_per_label`` (16, 32) — use the task's.
    ``noise_seeds`` more runs of the whole protocol, at seeds ``seed + 1 …``, measure how far the
    training samples alone move the main score (:data:`NOISE_SEEDS_HELP`)."""

    samples_per_label: int = Field(8, ge=1)
    n_experiments: int = Field(10, ge=1)
    seed: int = 42
    max_iter: int = Field(100, ge=1)
    n_splits: int = Field(5, ge=2)
    train_split: str = "train"
    eval_split: str = "test"
    noise_seeds: int = Field(4, ge=0)


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
    are averaged over the draws.

    Which items an MTEB task version clusters (its ``dataset_transform``; read by ``loader: mteb``
    whatever the protocol, so both protocols see the task's items):

    * ``sets`` — how rows holding a *set* of sentences (MTEB v1 data) become items: ``flatten``
      keeps every sentence, duplicates included (``itertools.chain``: TwentyNewsgroupsClustering.v2,
      RedditClustering.v2, StackExchangeClustering.v2 and most v2 tasks); ``deduplicate`` keeps each
      sentence's first occurrence and, above ``deduplicated_max`` items, a ``random.Random(subsample_seed)``
      sample of that many (``_convert_to_fast``: BlurbsClusteringP2P.v2, TenKGnadClusteringS2S.v2 and
      TenKGnadClusteringP2P.v2);
    * ``drop_single_item_labels`` — remove the one item of each label that has only one
      (BlurbsClusteringS2S.v2, before its subsample);
    * ``stratified_subsample`` — keep this many items, stratified by label, as ``datasets``'
      ``train_test_split(test_size=n, seed=subsample_seed, stratify_by_column=labels)`` draws them
      (``AbsTask.stratified_subsampling``; RedditClustering.v2 and StackExchangeClustering.v2:
      2,048), in the order it returns them (the order the draws index).

    ``noise_seeds`` more runs of the protocol, at seeds ``seed + 1 …``, measure how far the draws and
    k-means starts alone move the main score (:data:`NOISE_SEEDS_HELP`); the items stay those above."""

    seed: int = 42
    n_draws: int = Field(10, ge=1)
    sample_size: int = Field(16_384, ge=1)
    batch_size: int = Field(512, ge=1)
    max_documents_to_embed: int | None = Field(None, ge=1)
    max_fraction_to_embed: float | None = Field(None, gt=0, le=1)
    sets: Literal["flatten", "deduplicate"] = "flatten"
    deduplicated_max: int = Field(100_000, ge=1)
    drop_single_item_labels: bool = False
    stratified_subsample: int | None = Field(None, ge=2)
    subsample_seed: int = 42
    noise_seeds: int = Field(4, ge=0)

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


MTEB_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
"""``AbsTaskRetrieval.k_values`` (mteb 2.26): the cutoffs MTEB scores every retrieval and
reranking task at."""


class MtebReranking(Strict):
    """MTEB 2.26's reranking (an ``AbsTaskRetrieval`` with ``top_ranked`` candidates): each query's
    candidates scored by the card's similarity, cut at the largest of ``k_values``, scored by
    pytrec_eval (nDCG, MAP, Recall, P, success) and MTEB's MRR at every k of ``k_values``."""

    k_values: list[int] = Field(default_factory=lambda: list(MTEB_K_VALUES))

    @field_validator("k_values")
    @classmethod
    def _positive_cutoffs(cls, values: list[int]) -> list[int]:
        if not values or any(k < 1 for k in values) or len(set(values)) != len(values):
            raise ValueError("k_values must be distinct positive cutoffs (MTEB's: 1, 3, 5, 10, 20, 100, 1000)")
        return sorted(values)


class RerankingSettings(TaskSettings):
    """Reranking: each query's given candidates ranked by the card's similarity to the query
    (queries encoded with the card's query prompt, candidates with its document prompt — so
    ``text_kind`` does not apply), scored per query like retrieval.

    ``protocol: project`` computes ``measures`` under the project's conventions set here (``ties``:
    ``expected`` values over the orders of tied candidates; ``gain``; ``relevance_threshold``;
    queries without a relevant candidate excluded and counted). ``protocol: mteb`` follows mteb
    2.26 (:class:`MtebReranking`): trec_eval's tie order, every query with judgements.
    ``primary_metric`` is the per-query measure models are compared on (MTEB's main score of
    AskUbuntuDupQuestions, SciDocsRR and StackOverflowDupQuestions: ``MAP@1000``)."""

    measures: list[str] = Field(default_factory=lambda: ["MAP@1000", "MRR@10", "nDCG@10"])
    primary_metric: str = "MAP@1000"
    ties: Literal["expected", "trec_eval", "doc_id"] = "expected"
    gain: Literal["linear", "exponential"] = "linear"
    relevance_threshold: int = Field(1, ge=1)
    mteb: MtebReranking = Field(default_factory=MtebReranking)

    @field_validator("measures")
    @classmethod
    def _canonical_measures(cls, names: list[str]) -> list[str]:
        measures = list(dict.fromkeys(str(parse_measure(name)) for name in names))
        if not measures:
            raise ValueError("measures must name at least one retrieval measure (MAP@1000, MRR@10, nDCG@10, …)")
        return measures

    @field_validator("primary_metric")
    @classmethod
    def _canonical_primary(cls, name: str) -> str:
        return str(parse_measure(name))

    @model_validator(mode="after")
    def _primary_computed(self) -> RerankingSettings:
        if "text_kind" in self.model_fields_set:
            raise ValueError("reranking encodes queries with the card's query prompt and candidates with its document "
                             "prompt: text_kind does not apply, remove it")
        computed = self.measures if self.protocol == "project" else reranking_mteb_measures(self.mteb.k_values)
        if self.primary_metric not in computed:
            raise ValueError(f"primary_metric {self.primary_metric} is not computed under protocol {self.protocol!r}; "
                             f"computed: {', '.join(computed)}")
        return self


def reranking_mteb_measures(k_values: list[int] | tuple[int, ...]) -> list[str]:
    """The per-query measures MTEB's reranking reports at ``k_values``, by this project's names."""
    return [f"{name}@{k}" for name in ("nDCG", "MAP", "Recall", "P", "Hit", "MRR") for k in sorted(k_values)]


class MtebMultilabelClassification(Strict):
    """MTEB's multi-label classification (``AbsTaskMultilabelClassification``, mteb 2.26):
    ``n_experiments`` times a training set drawn from ``train_split`` by shuffling its indices
    with one ``numpy.random.default_rng(seed)`` (kept across experiments) and keeping each item
    that brings a label still below ``samples_per_label`` items; ``KNeighborsClassifier
    (n_neighbors)`` on the vectors as produced, fitted on the binarized label sets; subset
    accuracy (main), label-ranking average precision of the predictions, macro F1 and the
    Hamming score on ``eval_split``, averaged over experiments. MTEB cuts an eval split above
    ``max_eval_samples`` rows by iterative stratification, which is not reproduced here: such a
    split is refused (set ``max_eval_samples: null`` to score it whole, which is not MTEB's number).
    ``noise_seeds``: as :class:`MtebClassification`'s."""

    samples_per_label: int = Field(8, ge=1)
    n_experiments: int = Field(10, ge=1)
    seed: int = 42
    n_neighbors: int = Field(5, ge=1)
    train_split: str = "train"
    eval_split: str = "test"
    max_eval_samples: int | None = Field(3000, ge=1)
    noise_seeds: int = Field(4, ge=0)


class MultilabelClassificationSettings(TaskSettings):
    """Multi-label classification, under MTEB's protocol only (:class:`MtebMultilabelClassification`);
    ``threads`` caps the BLAS threads as classification's does."""

    protocol: Literal["mteb"] = "mteb"
    threads: int = Field(1, ge=1)
    mteb: MtebMultilabelClassification = Field(default_factory=MtebMultilabelClassification)


NOISE_SEEDS_HELP = ("a stochastic protocol runs again at seeds seed + 1 … seed + noise_seeds; the standard deviation "
                    "of its main score over all its runs is the spread a published score is judged against "
                    "(ReferenceScore.spread_multiple)")
"""What ``noise_seeds`` does, for the docstrings and messages that name it."""


SETTINGS_BY_TASK: dict[str, type[TaskSettings]] = {
    "sts": StsSettings,
    "pair_classification": PairClassificationSettings,
    "classification": ClassificationSettings,
    "clustering": ClusteringSettings,
    "bitext": BitextSettings,
    "reranking": RerankingSettings,
    "multilabel_classification": MultilabelClassificationSettings,
}


def _checked_seeds(seeds: list[int]) -> list[int]:
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a non-empty list of distinct integers")
    return seeds
