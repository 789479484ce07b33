"""Dataset entries (``datasets.yaml``): which loader reads which data, with its slices, which L2 task
evaluates it (``task:``, with the task's settings in a block of the same name), its role in the
transfer analysis (``public`` benchmark or the user's ``own`` data) and its published scores."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from embedpyramid.config.base import ConfigError, Strict, format_validation, named_section, read_yaml, resolve_path
from embedpyramid.config.references import (
    CORRELATION_METRICS,
    TASK_METRICS,
    MtebResultsImport,
    ReferenceScore,
    canonical_metric,
    reference_split,
    reproduction_rule,
    rule_problem,
    task_reference_problem,
)
from embedpyramid.config.tasks import (
    SETTINGS_BY_TASK,
    BitextSettings,
    ClassificationSettings,
    ClusteringSettings,
    MultilabelClassificationSettings,
    PairClassificationSettings,
    RerankingSettings,
    RetrievalSettings,
    StsSettings,
    Task,
    TaskSettings,
)


class DatasetEntry(Strict):
    """What every dataset entry declares, whatever its loader: query (or item) fields to slice
    by, whether queries are also documents (self-hits are dropped), the resampling group column,
    what to do with empty texts (``keep``: encoded as the empty string and listed in the
    manifest; ``drop``: removed with the qrels that name them, all listed; ``error``), the L2 task
    that evaluates it with, optionally, that task's settings block (``retrieval:`` holds the
    retrieval protocol, :class:`~embedpyramid.config.tasks.RetrievalSettings`), its role in
    the transfer analysis, the measure models are ranked by there (default: the protocol's
    ``report_metric``), published scores (typed under ``reference`` or imported from MTEB result
    files under ``mteb_results``), and where the gold answers of L6 come from
    (``relevant-documents``: the documents are answers, so each relevant document's text is a gold
    answer; ``null``: the dataset has none)."""

    slices: list[str] = Field(default_factory=list)
    drop_self_hits: bool = False
    group_column: str | None = None
    empty_texts: Literal["keep", "drop", "error"] = "keep"
    task: Task = "retrieval"
    sts: StsSettings | None = None
    pair_classification: PairClassificationSettings | None = None
    classification: ClassificationSettings | None = None
    clustering: ClusteringSettings | None = None
    bitext: BitextSettings | None = None
    reranking: RerankingSettings | None = None
    multilabel_classification: MultilabelClassificationSettings | None = None
    retrieval: RetrievalSettings | None = None
    role: Literal["public", "own"] = "own"
    confirmatory_metric: str | None = None
    reference: list[ReferenceScore] = Field(default_factory=list)
    mteb_results: MtebResultsImport | None = None
    gold_answers: Literal["relevant-documents"] | None = None

    @field_validator("confirmatory_metric")
    @classmethod
    def _known_metric(cls, value: str | None) -> str | None:
        if value is None:
            return None
        metric = canonical_metric(value)
        if metric in TASK_METRICS:
            raise ValueError(f"unknown measure {value!r} for confirmatory_metric: task statistics ({', '.join(TASK_METRICS)}) "
                             "do not rank models in the transfer analysis; use a retrieval measure, Spearman or Pearson")
        return metric

    @field_validator("reference")
    @classmethod
    def _one_reference_per_model_metric_split_and_subset(cls, value: list[ReferenceScore]) -> list[ReferenceScore]:
        seen: set[tuple[str, str, str, str | None]] = set()
        for reference in value:
            key = (reference.model, reference.metric, reference_split(reference.split), reference.subset)
            if key in seen:
                where = "".join(f", {name} {part!r}" for name, part in (("split", key[2]), ("subset", key[3]))
                                if part and part != "test")
                raise ValueError(f"two references for model {reference.model!r} and {reference.metric}{where}; "
                                 "keep one")
            seen.add(key)
        return value

    @model_validator(mode="after")
    def _settings_match_task(self) -> DatasetEntry:
        for task in SETTINGS_BY_TASK:
            if task != self.task and getattr(self, task) is not None:
                raise ValueError(
                    f"settings block '{task}' belongs to task {task!r}, but this entry's task is {self.task!r}; "
                    f"set task: {task} or rename the block to '{self.task}'"
                )
        if self.retrieval is not None and self.task != "retrieval":
            raise ValueError(f"settings block 'retrieval' belongs to task 'retrieval', but this entry's task is "
                             f"{self.task!r}; set the protocol in the '{self.task}' block")
        if self.drop_self_hits and self.task != "retrieval":
            raise ValueError(f"drop_self_hits applies to retrieval only, not to task {self.task!r}")
        self._check_references()
        return self

    def _check_references(self) -> None:
        """Refuse every published score this entry could not check (never ignore one): a measure,
        protocol or split its task family does not report. A ``published`` entry's scores are not
        checked (there is no data) and stand in for their benchmark as they are."""
        if isinstance(self, PublishedDataset):
            return
        protocol = self.task_settings.protocol if self.task_settings is not None else None
        for index, reference in enumerate(self.reference):
            where = f"reference[{index}] ({reference.model}, {reference.metric})"
            problem = (rule_problem(self.task, protocol, reference.tolerance, reference.spread_multiple)
                       or self._subset_problem(reference.subset))
            if problem is not None:
                raise ValueError(f"{where}: {problem}")
            if self.task == "retrieval":
                if reference.metric in (*CORRELATION_METRICS, *TASK_METRICS):
                    raise ValueError(f"{where}: {reference.metric} is not a retrieval measure; a retrieval dataset "
                                     "checks retrieval measures (nDCG@10, Recall@k, MRR@k, …)")
                split = getattr(self, "split", None)
                if reference.split is not None and split is not None and reference.split != split:
                    raise ValueError(f"{where}: published on split {reference.split!r} but the dataset reads split "
                                     f"{split!r}; point the dataset at that split")
                continue
            assert protocol is not None
            problem = task_reference_problem(self.task, protocol, reference.metric, reference.protocol, reference.split)
            if problem is not None:
                raise ValueError(f"{where}: {problem}")
        if self.mteb_results is not None:
            problem = (rule_problem(self.task, "mteb" if self.task != "retrieval" else None,
                                    self.mteb_results.tolerance, self.mteb_results.spread_multiple)
                       or self._subset_problem(None if self.mteb_results.subset == "default" else self.mteb_results.subset))
            if problem is not None:
                raise ValueError(f"mteb_results: {problem}")
        if self.mteb_results is not None and self.task != "retrieval":
            assert protocol is not None
            for metric in self.mteb_results.metrics or []:
                problem = task_reference_problem(self.task, protocol, metric, "mteb", None)
                if problem is not None:
                    raise ValueError(f"mteb_results.metrics {metric}: {problem}")
            if protocol != "mteb":
                raise ValueError(f"mteb_results: MTEB scores follow MTEB's protocol but the dataset is evaluated under "
                                 f"{protocol!r}; set {self.task}.protocol: mteb on the dataset")
        checked = bool(self.reference) or self.mteb_results is not None
        if checked and reproduction_rule(self.task, protocol) == "noise" and not self._noise_runs():
            noise = (f"{self.task}.seeds needs at least two seeds" if protocol == "project" else
                     f"set {self.task}.mteb.noise_seeds to 1 or more")
            raise ValueError(f"a published {self.task} score is judged against the spread of the protocol over its "
                             f"seeds, and this entry measures none: {noise}")

    def _subset_problem(self, subset: str | None) -> str | None:
        """Why a published score of ``subset`` cannot be checked on this entry: only a bitext
        dataset holds several subsets (its language pairs); any other family reads one, so the
        score's subset must be the one an MTEB entry reads (when it names one)."""
        if subset is None or self.task == "bitext":
            return None
        if not isinstance(self, MtebDataset):
            return (f"subset {subset!r}: this entry has no subsets (a bitext language pair, or the subset an MTEB "
                    "entry reads); remove subset")
        if self.subset is not None and self.subset != subset:
            return (f"published for subset {subset!r} but the entry reads subset {self.subset!r}; add an entry for "
                    f"subset {subset!r} and give the score there")
        return None

    def _noise_runs(self) -> bool:
        """Whether a stochastic protocol measures its spread: two seeds or more (project), one noise
        seed or more (mteb)."""
        settings = self.task_settings
        if settings is None:
            return False
        if settings.protocol == "project":
            return len(getattr(settings, "seeds", [])) >= 2
        return getattr(getattr(settings, "mteb", None), "noise_seeds", 0) >= 1

    @property
    def retrieval_protocol(self) -> str:
        """``project`` or ``mteb``: the protocol this retrieval dataset is scored under."""
        return self.retrieval.protocol if self.retrieval is not None else "project"

    @property
    def task_settings(self) -> TaskSettings | None:
        """The settings of the entry's task family (its defaults when no block is given);
        ``None`` for retrieval, whose settings are the protocol's."""
        if self.task == "retrieval":
            return None
        return getattr(self, self.task) or SETTINGS_BY_TASK[self.task]()


class ChatterbotDataset(DatasetEntry):
    """The embedded default: chatterbot-corpus questions as queries, distinct answers as documents
    (retrieval); the distinct questions labelled by category (classification, clustering); or
    question pairs that share an answer against seeded negatives (pair classification)."""

    loader: Literal["chatterbot"]
    task: Literal["retrieval", "classification", "clustering", "pair_classification"] = "retrieval"
    language: str = "english"
    categories: list[str] | None = None
    slices: list[str] = Field(default_factory=lambda: ["category"])
    gold_answers: Literal["relevant-documents"] | None = "relevant-documents"

    QUERY_FIELDS: ClassVar[tuple[str, ...]] = ("category",)
    """The query fields this loader produces besides ``query_id`` and ``text`` (retrieval, and the
    labelled questions of classification and clustering)."""
    PAIR_FIELDS: ClassVar[tuple[str, ...]] = ("category", "answer_group")
    """The fields of each question pair (pair classification)."""

    @model_validator(mode="after")
    def _fields_exist(self) -> ChatterbotDataset:
        fields = self.PAIR_FIELDS if self.task == "pair_classification" else self.QUERY_FIELDS
        wanted = [*self.slices, *([self.group_column] if self.group_column else [])]
        missing = [column for column in wanted if column not in fields]
        if missing:
            raise ValueError(
                f"slice/group columns {missing} are not fields of the chatterbot loader's {self.task} items; "
                f"fields that exist: {', '.join(fields)}"
            )
        return self


class BeirDataset(DatasetEntry):
    """A BEIR-format folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    loader: Literal["beir"]
    task: Literal["retrieval"] = "retrieval"
    path: str
    split: str = "test"


class SquadDataset(DatasetEntry):
    """A SQuAD / KorQuAD JSON file: distinct context paragraphs are the corpus, each answerable
    question is a query, and the paragraph holding its answer is relevant. ``include_title``
    stores the article title as the document title (encoded as title + " " + text)."""

    loader: Literal["squad"]
    task: Literal["retrieval"] = "retrieval"
    path: str
    include_title: bool = False


class PublishedDataset(DatasetEntry):
    """A public benchmark that is not on disk: only its published scores, which stand in for it in
    the transfer analysis. There is nothing to freeze, encode or search."""

    loader: Literal["published"]
    task: Literal["retrieval"] = "retrieval"
    role: Literal["public"] = "public"

    @model_validator(mode="after")
    def _has_scores(self) -> PublishedDataset:
        if not self.reference and self.mteb_results is None:
            raise ValueError("a published dataset needs published scores: give reference: [...] or mteb_results: {...}")
        return self


class LeeDataset(DatasetEntry):
    """gensim's Lee corpus: 50 news documents, human similarity of every pair (STS)."""

    loader: Literal["gensim-lee"]
    task: Literal["sts"] = "sts"


class StsFileDataset(DatasetEntry):
    """STS pairs from a file: the STS Benchmark csv (``stsb``, tab-separated) or a plain
    ``sentence1, sentence2, score`` file (``tsv`` or ``jsonl``); ``split`` only names it."""

    loader: Literal["sts-file"]
    task: Literal["sts"] = "sts"
    path: str
    format: Literal["stsb", "tsv", "jsonl"]
    split: str = "test"


class NewsgroupsDataset(DatasetEntry):
    """gensim's ``mini_newsgroup`` sample: 200 posts of alt.atheism and sci.space, labelled by
    newsgroup. ``remove`` strips parts of each post as scikit-learn's ``fetch_20newsgroups``
    does; the headers name the newsgroup, so keeping them leaks the label."""

    loader: Literal["gensim-newsgroups"]
    task: Literal["classification", "clustering"] = "classification"
    remove: list[Literal["headers", "footers", "quotes"]] = Field(default_factory=lambda: ["headers", "footers", "quotes"])


class DjangoBitextDataset(DatasetEntry):
    """Human translations of Django's UI strings (its ``.mo`` catalogues): English to each of
    ``languages``; strings of at least ``min_words`` words once placeholders are stripped."""

    loader: Literal["django-bitext"]
    task: Literal["bitext"] = "bitext"
    languages: list[str] = Field(default_factory=lambda: ["de", "fr", "es", "ja", "ko"], min_length=1)
    min_words: int = Field(4, ge=1)


MTEB_COLUMNS: dict[str, tuple[str, ...]] = {
    "sts": ("sentence1", "sentence2", "score"),
    "pair_classification": ("sentence1", "sentence2", "labels"),
    "classification": ("text", "label"),
    "clustering": ("sentences", "labels"),
    "bitext": ("sentence1", "sentence2"),
    "multilabel_classification": ("text", "label"),
    "retrieval": (),
    "reranking": (),
}
"""The columns MTEB's ``AbsTask*`` classes read from a task's data, per family (mteb 2.26);
retrieval and reranking data has MTEB's retrieval layout instead (corpus, queries, qrels and
top_ranked subsets: :mod:`embedpyramid.data.mteb_retrieval`)."""


class MtebDataset(DatasetEntry):
    """An MTEB task's data (:mod:`embedpyramid.data.mteb_files`): on disk under ``path`` (a
    ``save_to_disk`` folder, a hub snapshot, or ``<split>.parquet`` / ``.jsonl(.gz)`` files), or
    on the Hugging Face hub as the dataset ``hub`` at ``revision`` (a branch, a tag or a commit;
    default ``main``): online it is resolved to its commit, downloaded into the Hugging Face cache
    and the commit recorded in the frozen dataset's manifest; offline (``HF_HUB_OFFLINE=1``) it is
    read from the cache. ``subset`` picks the HF subset (config) when there are several (bitext:
    default every subset, each a language pair); ``split`` is the evaluated split (default
    ``test``); ``dev_split`` the split pair classification chooses its threshold on (the project
    protocol needs one; it is the family's ``dev``, ``split`` its ``test``). Classification reads
    ``classification.mteb.train_split`` (when present) and ``eval_split`` instead of ``split``
    (multi-label classification: ``multilabel_classification.mteb``'s). ``columns`` maps an expected
    column (:data:`MTEB_COLUMNS`) to the file's name for it. Retrieval and reranking read MTEB's
    retrieval layout (``retrieval`` settings hold its ``skip_first_result``)."""

    loader: Literal["mteb"]
    task: Literal["retrieval", "sts", "pair_classification", "classification", "clustering", "bitext", "reranking",
                  "multilabel_classification"]
    path: str | None = None
    hub: str | None = None
    revision: str | None = None
    subset: str | None = None
    split: str | None = None
    dev_split: str | None = None
    columns: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options_fit_task(self) -> MtebDataset:
        if (self.path is None) == (self.hub is None):
            raise ValueError("give the MTEB task's data as path: (a folder or file on disk) or hub: (a dataset id on "
                             "the Hugging Face hub, with revision:), one of the two")
        if self.revision is not None and self.hub is None:
            raise ValueError("revision applies to a hub dataset: set hub: <org>/<name>, or remove revision")
        if self.hub is not None:
            from embedpyramid.config.models import HUB_ID

            if not HUB_ID.fullmatch(self.hub):
                raise ValueError(f"hub {self.hub!r} is not a dataset id: write it as 'org/name' (or 'name')")
        unknown = sorted(set(self.columns) - set(MTEB_COLUMNS[self.task]))
        if unknown:
            raise ValueError(f"columns: {unknown} are not columns of MTEB {self.task} data; "
                             + (f"rename among {', '.join(MTEB_COLUMNS[self.task])}" if MTEB_COLUMNS[self.task] else
                                "its corpus, queries and qrels columns are MTEB's retrieval layout's"))
        if self.dev_split is not None and self.task != "pair_classification":
            raise ValueError(f"dev_split applies to pair classification, not to task {self.task!r}")
        if self.split is not None and self.task in ("classification", "multilabel_classification"):
            raise ValueError(f"{self.task} reads the splits of {self.task}.mteb (train_split, eval_split); "
                             "set those instead of split")
        settings = self.task_settings
        if (self.task == "pair_classification" and self.dev_split is None and settings is not None
                and settings.protocol == "project"):
            raise ValueError("the project protocol chooses the pair-classification threshold on a dev split: set "
                             "dev_split (e.g. validation), or pair_classification.protocol: mteb")
        if self.dev_split is not None and self.dev_split == (self.split or "test"):
            raise ValueError(f"dev_split and split are both {self.dev_split!r}: the threshold must be chosen on "
                             "another split than the one it is tested on")
        return self


AnyDataset = (
    ChatterbotDataset | BeirDataset | SquadDataset | PublishedDataset
    | LeeDataset | StsFileDataset | NewsgroupsDataset | DjangoBitextDataset | MtebDataset
)
LOADERS: dict[str, type[AnyDataset]] = {
    "chatterbot": ChatterbotDataset, "beir": BeirDataset, "squad": SquadDataset, "published": PublishedDataset,
    "gensim-lee": LeeDataset, "sts-file": StsFileDataset, "gensim-newsgroups": NewsgroupsDataset,
    "django-bitext": DjangoBitextDataset, "mteb": MtebDataset,
}


def load_datasets(directory: Path) -> dict[str, AnyDataset]:
    path = directory / "datasets.yaml"
    datasets: dict[str, AnyDataset] = {}
    for name, raw in named_section(path, read_yaml(path), "datasets").items():
        loader = raw.get("loader") if isinstance(raw, dict) else None
        if not isinstance(loader, str) or loader not in LOADERS:
            given = "is missing" if loader is None else f"{loader!r} is not a loader"
            raise ConfigError(
                f"{path}: datasets.{name}.loader {given}; allowed: {', '.join(map(repr, LOADERS))}"
            )
        try:
            spec = LOADERS[loader].model_validate(raw)
        except ValidationError as error:
            raise format_validation(path, f"datasets.{name}", error) from None
        if isinstance(spec, BeirDataset) and not resolve_path(directory, spec.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.path: folder {resolve_path(directory, spec.path)} does not exist; "
                "point it at a BEIR folder with corpus.jsonl, queries.jsonl and qrels/"
            )
        if isinstance(spec, SquadDataset) and not resolve_path(directory, spec.path).is_file():
            raise ConfigError(
                f"{path}: datasets.{name}.path: file {resolve_path(directory, spec.path)} does not exist; "
                "point it at a SQuAD or KorQuAD JSON file"
            )
        if spec.mteb_results is not None and not resolve_path(directory, spec.mteb_results.path).is_dir():
            raise ConfigError(
                f"{path}: datasets.{name}.mteb_results.path: folder {resolve_path(directory, spec.mteb_results.path)} "
                "does not exist; point it at a folder in the embeddings-benchmark/results layout"
            )
        if isinstance(spec, MtebDataset) and spec.path is not None and not resolve_path(directory, spec.path).exists():
            raise ConfigError(
                f"{path}: datasets.{name}.path: {resolve_path(directory, spec.path)} does not exist; point it at an "
                "MTEB task's data (a save_to_disk folder, a hub snapshot, or <split>.parquet / .jsonl(.gz) files)"
            )
        if isinstance(spec, StsFileDataset) and not resolve_path(directory, spec.path).is_file():
            raise ConfigError(
                f"{path}: datasets.{name}.path: file {resolve_path(directory, spec.path)} does not exist; "
                f"point it at a {spec.format} file of sentence pairs with scores"
            )
        datasets[name] = spec
    return datasets


def check_reference_models(path: Path, datasets: dict[str, AnyDataset], model_names: list[str]) -> None:
    """Every published score must name a card of ``models.yaml``: a typo would otherwise leave a
    reference that nothing can reproduce."""
    for name, spec in datasets.items():
        named = [(f"reference[{i}].model", r.model) for i, r in enumerate(spec.reference)]
        if spec.mteb_results is not None:
            named += [(f"mteb_results.models.{card}", card) for card in spec.mteb_results.models]
        for key, card in named:
            if card not in model_names:
                raise ConfigError(
                    f"{path}: datasets.{name}.{key}: {card!r} is not a card in models.yaml; allowed: {', '.join(model_names)}"
                )


def has_data(spec: AnyDataset) -> bool:
    """Whether a dataset has tables to freeze (a ``published`` entry has only published scores)."""
    return not isinstance(spec, PublishedDataset)
