"""What a task dataset's settings ask of its size, checked when the dataset is loaded to be
frozen — before anything is encoded — and again where a family evaluates. Kept apart from the
families' evaluators so that loading a dataset reaches no evaluator code (its code version, and
what it imports, stay those of the loader)."""

from __future__ import annotations

import polars as pl

from embedpyramid.config.tasks import BitextSettings, ClassificationSettings
from embedpyramid.data.frozen import TaskError


def check_classification(texts: pl.DataFrame, settings: ClassificationSettings, where: str) -> None:
    """Refuse, before anything is encoded, settings that ``texts`` (``text_id, label``) cannot
    honour: see :func:`stratified_items` (the project protocol's folds; MTEB's protocol needs two
    labels)."""
    if settings.protocol == "mteb":
        if texts["label"].n_unique() < 2:
            raise TaskError(f"{where}: classification needs at least two labels; got {texts['label'].n_unique()}")
        return
    stratified_items(texts, settings, where)


def stratified_items(texts: pl.DataFrame, settings: ClassificationSettings, where: str) -> tuple[pl.DataFrame, list[str]]:
    """The items that can be stratified (classes of at least ``folds`` items, sorted by text id)
    and the labels dropped; settings these items cannot honour raise :class:`TaskError` naming
    ``where`` and the allowed range.

    A neighbour count ``k`` above the smallest training fold is refused: ``StratifiedKFold``
    deals the items (sorted by class) round-robin over the folds, so a test fold holds at most
    ⌈n / folds⌉ of the n items and every training fold at least n − ⌈n / folds⌉.
    """
    sizes = texts.group_by("label").len()
    dropped = sorted(sizes.filter(pl.col("len") < settings.folds)["label"].to_list())
    kept = texts.filter(~pl.col("label").is_in(dropped)).sort("text_id")
    classes = kept["label"].n_unique()
    if classes < 2:
        raise TaskError(f"{where}: classification needs at least two classes of >= {settings.folds} items "
                        f"(folds); got {classes} after dropping {dropped}")
    training = kept.height - -(-kept.height // settings.folds)
    if settings.k > training:
        raise TaskError(
            f"{where}.classification.k: {settings.k} neighbours, but a training fold holds {training} items "
            f"({kept.height} items in {classes} classes, folds {settings.folds}); allowed: 1 to {training}")
    return kept, dropped


def check_bitext(pairs: pl.DataFrame, settings: BitextSettings, where: str) -> None:
    """Refuse, before anything is encoded, a neighbourhood (``k``, ``hubness_k``) larger than the
    targets of a language pair: margin and CSLS would average over every target, and the
    hubness would count every target as a neighbour of every source. MTEB's protocol has no
    neighbourhood: nothing to refuse."""
    if settings.protocol == "mteb":
        return
    targets = pairs.group_by("language_pair").agg(pl.col("text_id_2").n_unique().alias("targets")).sort("targets")
    fewest, language_pair = targets["targets"][0], targets["language_pair"][0]
    for key in ("k", "hubness_k"):
        value = getattr(settings, key)
        if value > fewest:
            raise TaskError(f"{where}.bitext.{key}: {value} neighbours, but {language_pair} has {fewest} "
                            f"targets; allowed: 1 to {fewest}")
