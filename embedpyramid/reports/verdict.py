"""The verdict: per dataset, which model wins on the confirmatory metric, by how much and how
surely — or that no difference was detected, with what this many queries could detect.

The verdict reads the confirmatory family of the comparisons table: the report metric over all
queries, each model B against the baseline A, sign-flip p-values Holm-adjusted across the
family. A model that is significantly better than the baseline wins (the best one by mean when
several are); a baseline that is significantly better than every other model wins; the margin
quoted is over the closest contender. Otherwise the verdict is "no detectable difference"
between the baseline and its strongest contender, with the minimum detectable effect at this n
and the number of queries needed to detect ``detectable_delta``, both from that pair's deltas'
standard deviation (two-sided paired t-test at Holm's strictest level, alpha divided by the
family's size, and ``power``; :mod:`embedpyramid.stats.power`). With three or more models the
verdict ends with the Tukey HSD's letter groups, which compare every pair at once.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import polars as pl

from embedpyramid.stats.compare import CONFIRMATORY
from embedpyramid.stats.power import minimum_detectable_effect, queries_needed
from embedpyramid.store import StorePath, read_json

VERDICT_FILE = "verdict.json"
"""The file, in the comparisons folder, that holds the verdicts of the last summary."""
TASK_SUMMARY_FOLDER, TASK_VERDICT_FILE = "tasks", "task_verdict.json"
"""The L2 task families' summary folder under the comparisons folder, and its verdicts file."""


def verdict_texts(directory: StorePath) -> list[str]:
    """The verdict paragraphs of the last summaries written under the comparisons folder
    ``directory``: retrieval's, then the task families' (none before a summary)."""
    paths = [directory / VERDICT_FILE, directory / TASK_SUMMARY_FOLDER / TASK_VERDICT_FILE]
    return [verdict["text"] for path in paths if path.is_file() for verdict in read_json(path)]


@dataclass(frozen=True)
class Verdict:
    """One dataset's verdict. ``winner`` is None when no difference was detected; ``delta`` and
    its interval are ``first`` minus ``second`` (the winner and the closest contender, or the
    two models the verdict could not separate); ``groups`` the HSD letter groups ("" below three
    models)."""

    dataset: str
    system: str
    metric: str
    n: int
    first: str
    second: str
    winner: str | None
    delta: float
    ci_low: float
    ci_high: float
    p_adjusted: float
    family_size: int
    d_z: float
    confidence: float
    alpha: float
    mde: float
    power: float
    detectable_delta: float
    queries_needed: int | None
    groups: str

    def text(self) -> str:
        """The verdict as one plain-text paragraph."""
        tests = "1 test" if self.family_size == 1 else f"{self.family_size} tests"
        evidence = (
            f"Δ = {self.delta:+.4f}, {self.confidence:.0%} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], "
            f"p (Holm, {tests}) {_p_text(self.p_adjusted)}, d_z = {_number(self.d_z)}"
        )
        where = f"{self.dataset} · {self.metric} over {self.n:,} queries"
        if self.winner is not None:
            text = f"{where}: {self.first} wins over {self.second} ({evidence})."
        else:
            needed = (
                f"detecting Δ = {self.detectable_delta:g} would take about {self.queries_needed:,} queries"
                if self.queries_needed is not None
                else f"no number of queries detects Δ = {self.detectable_delta:g} at this variance"
            )
            text = (
                f"{where}: no detectable difference between {self.first} and {self.second} ({evidence}); at "
                f"this n the smallest detectable effect is {self.mde:.4f} (power {self.power:g}, "
                f"α {self.alpha:.3g}); {needed}."
            )
        # The HSD compares every pair at once, so it may group models the family above separates.
        return f"{text} Tukey HSD groups (all pairs at once, more conservative): {self.groups}." if self.groups else text

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "text": self.text()}


def dataset_verdicts(
    comparisons: pl.DataFrame,
    hsd: pl.DataFrame,
    *,
    power: float,
    detectable_delta: float,
) -> list[Verdict]:
    """One verdict per (dataset, system) with a confirmatory comparison, in table order; ``hsd``
    (the model table of the Tukey HSD) may be empty."""
    verdicts = []
    confirmatory = comparisons.filter(pl.col("family") == CONFIRMATORY)
    for (dataset, system), rows in confirmatory.partition_by(["dataset", "system"], as_dict=True, maintain_order=True).items():
        models = hsd.filter((pl.col("dataset") == dataset) & (pl.col("system") == system)) if hsd.height else hsd
        verdicts.append(_verdict(rows, _groups(models), power=power, detectable_delta=detectable_delta))
    return verdicts


def _verdict(rows: pl.DataFrame, groups: str, *, power: float, detectable_delta: float) -> Verdict:
    better = rows.filter(pl.col("decision") == "better").sort("mean_b", descending=True)
    if better.height:  # a model beats the baseline: the best of those wins
        row, flip, winner = better.row(0, named=True), False, True
    elif (rows["decision"] == "worse").all():  # the baseline beats every model: quote the closest
        row, flip, winner = rows.sort("mean_b", descending=True).row(0, named=True), True, True
    else:  # the strongest model the baseline could not be told apart from
        undecided = rows.filter(pl.col("decision") != "worse").sort("mean_b", descending=True)
        row = undecided.row(0, named=True)
        flip, winner = row["mean_delta"] < 0, False
    sign = -1.0 if flip else 1.0
    low, high = sorted((sign * row["ci_low"], sign * row["ci_high"]))
    first, second = (row["model_a"], row["model_b"]) if flip else (row["model_b"], row["model_a"])
    alpha = (1.0 - row["confidence"]) / row["family_size"]
    return Verdict(
        dataset=row["dataset"], system=row["system"], metric=row["metric"], n=row["n"], first=first, second=second,
        winner=first if winner else None, delta=sign * row["mean_delta"], ci_low=low, ci_high=high,
        p_adjusted=row["p_adjusted"], family_size=row["family_size"], d_z=sign * row["d_z"],
        confidence=row["confidence"], alpha=alpha,
        mde=float(minimum_detectable_effect(row["sd_delta"], row["n"], alpha=alpha, power=power)),
        power=power, detectable_delta=detectable_delta,
        queries_needed=_needed(row["sd_delta"], detectable_delta, alpha, power), groups=groups,
    )


def _groups(models: pl.DataFrame) -> str:
    """``a: m1, m2; b: m3`` from the HSD model table (models in mean order)."""
    if not models.height:
        return ""
    ordered = models.sort("mean", descending=True)
    letters = sorted({letter for text in ordered["letters"] for letter in _split_letters(text)},
                     key=lambda letter: (len(letter), letter.islower() is False, letter))
    return "; ".join(
        f"{letter}: " + ", ".join(m for m, text in ordered.select("model", "letters").rows() if letter in _split_letters(text))
        for letter in letters
    )


def _split_letters(text: str) -> list[str]:
    """``"ab"`` -> ``["a", "b"]``; ``"a1b"`` -> ``["a1", "b"]`` (letters past 52 carry digits)."""
    letters: list[str] = []
    for character in text:
        if character.isdigit() and letters:
            letters[-1] += character
        else:
            letters.append(character)
    return letters


def _needed(sd: float, delta: float, alpha: float, power: float) -> int | None:
    if sd is None or not math.isfinite(sd):
        return None
    return queries_needed(sd, delta, alpha=alpha, power=power)


def _p_text(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"= {p:.4f}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    return f"{value:+.2f}"
