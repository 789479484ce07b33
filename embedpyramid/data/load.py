"""Load a configured dataset with its loader, and name the files it reads."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.compute as pc

from embedpyramid.config import (
    AnyDataset,
    BeirDataset,
    ChatterbotDataset,
    DjangoBitextDataset,
    LeeDataset,
    MtebDataset,
    NewsgroupsDataset,
    PairClassificationSettings,
    ProjectConfig,
    SquadDataset,
    StsFileDataset,
)
from embedpyramid.config.base import resolve_path
from embedpyramid.data.beir import load_beir, qrels_path
from embedpyramid.data.chatterbot import chatterbot_directory, load_chatterbot, load_chatterbot_questions
from embedpyramid.data.django_bitext import load_django_bitext
from embedpyramid.data.frozen import DataError, RawDataset, TaskTables
from embedpyramid.data.gensim_data import load_lee, load_mini_newsgroups
from embedpyramid.data.hub_layout import find_layout
from embedpyramid.data.mteb_files import hub_commit, load_mteb_task, mteb_source
from embedpyramid.data.mteb_retrieval import load_mteb_retrieval
from embedpyramid.data.question_pairs import load_chatterbot_pairs
from embedpyramid.data.squad import load_squad
from embedpyramid.data.sts_files import load_sts_file
from embedpyramid.hub import DEFAULT_REVISION


def load_configured_dataset(config: ProjectConfig, name: str) -> RawDataset:
    """Load dataset ``name`` of a config folder with its loader.

    A dataset none of whose judgements reaches the protocol's ``relevance_threshold`` is refused
    here: every query would be excluded from every metric, and nothing downstream could be priced.
    """
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        raw, judgements = load_chatterbot(spec), f"chatterbot-corpus {spec.language}"
    elif isinstance(spec, BeirDataset):
        raw, judgements = load_beir(config.beir_path(spec), spec), str(qrels_path(config.beir_path(spec), spec))
    elif isinstance(spec, SquadDataset):
        path = resolve_path(config.directory, spec.path)
        raw, judgements = load_squad(path, spec), str(path)
    elif isinstance(spec, MtebDataset):
        folder, origin = mteb_source(config.directory, spec, f"{config.directory / 'datasets.yaml'}: datasets.{name}")
        raw = load_mteb_retrieval(find_layout(folder), spec, origin)
        judgements = f"{folder}: {raw.source['configs']['qrels']}"
    else:
        raise DataError(
            f"dataset {name!r} is published scores only (loader: published): there are no tables to freeze; "
            "it stands in for a public benchmark in the transfer analysis"
        )
    threshold = config.protocol.relevance_threshold
    grades = raw.qrels.column("relevance")
    if pc.max(grades).as_py() < threshold:
        present = ", ".join(str(grade) for grade in pc.unique(grades).sort().to_pylist())
        raise DataError(
            f"{judgements}: dataset {name!r} has no judgement with grade >= {threshold} (grades present: {present}), "
            "so every query would be excluded; add relevant judgements or lower relevance_threshold in protocol.yaml"
        )
    return raw


def load_task_dataset(config: ProjectConfig, name: str) -> TaskTables:
    """Load task dataset ``name`` (an entry of ``datasets.yaml`` whose task is not retrieval) and
    check that its slice and group columns exist."""
    spec = config.task_dataset(name)
    if isinstance(spec, ChatterbotDataset):
        if spec.task == "pair_classification":
            settings = spec.task_settings
            assert isinstance(settings, PairClassificationSettings)
            tables = load_chatterbot_pairs(spec, settings)
        else:
            tables = load_chatterbot_questions(spec)
    elif isinstance(spec, LeeDataset):
        tables = load_lee()
    elif isinstance(spec, StsFileDataset):
        tables = load_sts_file(resolve_path(config.directory, spec.path), spec.format, spec.split)
    elif isinstance(spec, NewsgroupsDataset):
        tables = load_mini_newsgroups(spec)
    elif isinstance(spec, DjangoBitextDataset):
        tables = load_django_bitext(spec)
    elif isinstance(spec, MtebDataset):
        folder, origin = mteb_source(config.directory, spec, f"{config.directory / 'datasets.yaml'}: datasets.{name}")
        tables = load_mteb_task(folder, spec, origin)
    else:
        raise DataError(f"datasets.yaml: dataset {name!r} (loader {spec.loader!r}) has no task loader")
    # A reranking dataset's items are its queries, whose slice columns ride on their texts.
    items = tables.pairs if tables.pairs is not None and spec.task != "reranking" else tables.texts
    wanted = [*spec.slices, *([spec.group_column] if spec.group_column else [])]
    missing = [column for column in wanted if column not in items.column_names]
    if missing:
        reserved = ("pair_id", "text_id", "text_id_1", "text_id_2", "text", "gold", "split")
        available = [c for c in items.column_names if c not in reserved]
        raise DataError(f"datasets.yaml: datasets.{name}: slice/group columns {missing} are not columns of its "
                        f"items; available: {', '.join(available) or 'none'}")
    _check_task_settings(spec, tables, f"{config.directory / 'datasets.yaml'}: datasets.{name}")
    return tables


def _check_task_settings(spec: AnyDataset, tables: TaskTables, where: str) -> None:
    """Refuse task settings the items cannot honour (a classification ``k`` above a training
    fold, a bitext neighbourhood above a language pair's targets), naming ``where`` and the
    allowed range: when the dataset is loaded to be frozen, before any encode."""
    # Imported here: the task families build on this package (and only these two read sizes).
    if spec.task == "classification":
        from embedpyramid.data.task_sizes import check_classification

        check_classification(pl.from_arrow(tables.texts).select("text_id", "label"), spec.task_settings, where)
    elif spec.task == "bitext" and tables.pairs is not None:
        from embedpyramid.data.task_sizes import check_bitext

        check_bitext(pl.from_arrow(tables.pairs), spec.task_settings, where)


def source_files(config: ProjectConfig, name: str) -> list[Path]:
    """The files retrieval dataset ``name`` is read from (those that exist): its installed
    chatterbot-corpus language folder, a BEIR folder's corpus, queries and qrels of the split, a
    SQuAD file, or every file under an MTEB entry's path; none for published scores or an MTEB
    entry on the hub (its commit stands for its files: :func:`mteb_hub_identity`)."""
    spec = config.dataset(name)
    if isinstance(spec, ChatterbotDataset):
        return sorted(chatterbot_directory(spec.language).glob("*.yml"))
    if isinstance(spec, BeirDataset):
        folder = config.beir_path(spec)
        candidates = [folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path(folder, spec)]
    elif isinstance(spec, SquadDataset):
        candidates = [resolve_path(config.directory, spec.path)]
    elif isinstance(spec, MtebDataset) and spec.path is not None:
        source = resolve_path(config.directory, spec.path)
        candidates = sorted(path for path in source.rglob("*")) if source.is_dir() else [source]
    else:
        candidates = []
    return [path for path in candidates if path.is_file()]


def mteb_hub_identity(config: ProjectConfig, spec: MtebDataset, name: str) -> dict[str, str] | None:
    """``{"hub", "revision", "commit"}`` of an MTEB entry on the hub (the commit its revision
    names now, or why it cannot be resolved), None for one on disk: what its config facet
    records, so a branch that moves makes the dataset stale."""
    if spec.hub is None:
        return None
    try:
        commit = hub_commit(spec, f"{config.directory / 'datasets.yaml'}: datasets.{name}")
    except DataError as error:
        commit = f"unresolved: {error}"
    return {"hub": spec.hub, "revision": spec.revision or DEFAULT_REVISION, "commit": commit}
