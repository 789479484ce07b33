"""The verdict: per dataset, which model wins on the confirmatory metric, by how much and how
surely — or which models form the top group, or that no difference was detected, with what this
many queries could detect.

A model is *the winner* only when it is significantly better than every other model after
adjustment:

* with two models, the confirmatory family decides: the report metric over all queries, the
  model B against the baseline A, the sign-flip p-value Holm-adjusted across the family (every
  system of the dataset). ``better`` makes B the winner, ``worse`` makes A the winner; the
  interval quoted is the *unadjusted* interval of that comparison (its `interval` method), and says so.
* with three or more models, the randomized Tukey HSD decides
  (:func:`embedpyramid.stats.hsd_tables.tukey_hsd_tables`, every pair at once): the winner is the
  model whose HSD rank interval is [1, 1]. Otherwise the verdict names the *top group*, the
  models no other model is significantly better than (rank interval starting at 1; with the
  HSD's single critical range no two of them differ), and quotes the leader's margin over the
  closest contender (the next model by mean) with the HSD's simultaneous interval and p-value.
  The models the confirmatory family found better than the baseline are listed beside it: both
  may beat the baseline without one beating the other.

The margin is always over the closest contender, never over the baseline unless the baseline
is it. Without a winner the verdict adds the minimum detectable effect at this n and the number
of queries needed to detect ``detectable_delta``, from the quoted pair's deltas' standard
deviation (two-sided paired t-test at ``alpha`` divided by the family's size — Holm's strictest
level, or Bonferroni over the HSD's pairs, at least as strict as the HSD — and ``power``;
:mod:`embedpyramid.stats.power`). With three or more models the verdict ends with the HSD's
letter groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import polars as pl

from embedpyramid.stats.families import CONFIRMATORY
from embedpyramid.stats.power import minimum_detectable_effect, queries_needed

HOLM, HSD = "holm", "tukey-hsd"
"""``Verdict.adjustment``: the confirmatory family's Holm test (two models) or the Tukey HSD."""


@dataclass(frozen=True)
class Verdict:
    """One dataset's verdict. ``winner`` is None when no model is significantly better than
    every other; ``top_group`` holds the winner alone, or the models the test could not separate
    from the leader (leader first); ``delta`` and its interval are ``first`` minus ``second``
    (the winner or leader and the closest contender). ``adjustment`` names the test that decided
    (:data:`HOLM` or :data:`HSD`), ``family_size`` its number of tests (pairs for the HSD) and
    ``interval`` the kind of interval quoted (``unadjusted`` bootstrap or HSD ``simultaneous``).
    ``better_than_baseline`` lists the models the confirmatory family found better than
    ``baseline``; ``groups`` the HSD letter groups ("" below three models)."""

    dataset: str
    system: str
    metric: str
    n: int
    first: str
    second: str
    winner: str | None
    top_group: tuple[str, ...]
    delta: float
    ci_low: float
    ci_high: float
    interval: str
    p_adjusted: float
    adjustment: str
    family_size: int
    d_z: float
    confidence: float
    alpha: float
    mde: float
    power: float
    detectable_delta: float
    queries_needed: int | None
    baseline: str
    better_than_baseline: tuple[str, ...]
    groups: str
    unit: str = "queries"

    def text(self) -> str:
        """The verdict as one plain-text paragraph."""
        tests = "1 test" if self.family_size == 1 else f"{self.family_size} tests"
        test = f"p (Holm, {tests})" if self.adjustment == HOLM else f"p (Tukey HSD, {self.family_size} pairs)"
        evidence = (
            f"Δ = {self.delta:+.4f}, {self.interval} {self.confidence:.0%} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], "
            f"{test} {_p_text(self.p_adjusted)}, d_z = {_number(self.d_z)}"
        )
        where = f"{self.dataset} · {self.metric} over {self.n:,} {self.unit}"
        if self.adjustment == HOLM and self.winner is not None:
            text = f"{where}: {self.first} wins over {self.second} ({evidence})."
        elif self.winner is not None:
            text = (f"{where}: {self.first} wins, better than every other model (Tukey HSD, all pairs at once); "
                    f"over the closest contender {self.second}: {evidence}.")
        else:
            if self.adjustment == HOLM:
                text = f"{where}: no detectable difference between {self.first} and {self.second} ({evidence})"
            else:
                text = (f"{where}: top group {_listed(self.top_group)}: not distinguishable ({self.first} over the "
                        f"closest contender {self.second}: {evidence})")
            needed = (
                f"detecting Δ = {self.detectable_delta:g} would take about {self.queries_needed:,} {self.unit}"
                if self.queries_needed is not None
                else f"no number of {self.unit} detects Δ = {self.detectable_delta:g} at this variance"
            )
            text += (f"; at this n the smallest detectable effect is {self.mde:.4f} (power {self.power:g}, "
                     f"α {self.alpha:.3g}); {needed}.")
        if self.adjustment == HSD and self.better_than_baseline:
            text += (f" Better than the baseline {self.baseline} (Holm, confirmatory family): "
                     f"{_listed(self.better_than_baseline)}.")
        return f"{text} Tukey HSD groups: {self.groups}." if self.groups else text

    def line(self) -> str:
        """The verdict on one line, for a terminal: who wins or which models are not
        distinguishable, with the margin over the closest contender and the adjusted p."""
        evidence = (f"Δ {self.delta:+.4f}, {self.interval} {self.confidence:.0%} CI [{self.ci_low:+.4f}, "
                    f"{self.ci_high:+.4f}], p {_p_text(self.p_adjusted)} "
                    f"({'Holm' if self.adjustment == HOLM else 'Tukey HSD'})")
        where = f"{self.dataset} · {self.metric} over {self.n:,} {self.unit}"
        if self.winner is not None:
            return f"{where}: {self.first} wins over {self.second}: {evidence}"
        return (f"{where}: {_listed(self.top_group)} not distinguishable ({self.first} over {self.second}: "
                f"{evidence}; detectable ≥ {self.mde:.4f})")

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "text": self.text(), "line": self.line()}


def dataset_verdicts(
    comparisons: pl.DataFrame,
    hsd: pl.DataFrame,
    *,
    power: float,
    detectable_delta: float,
    hsd_pairs: pl.DataFrame | None = None,
    units: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """One verdict per (dataset, system) with a confirmatory comparison, in table order. ``hsd``
    and ``hsd_pairs`` are the model and pair tables of the Tukey HSD
    (:func:`~embedpyramid.stats.hsd_tables.tukey_hsd_tables`); they may be empty when every
    (dataset, system) has two models, and must cover those with three or more. ``units`` names
    what a dataset's compared items are (default ``queries``; a task dataset's pairs or texts)."""
    verdicts = []
    confirmatory = comparisons.filter(pl.col("family") == CONFIRMATORY)
    for (dataset, system), rows in confirmatory.partition_by(["dataset", "system"], as_dict=True, maintain_order=True).items():
        unit = (units or {}).get(dataset, "queries")
        if rows.height == 1:
            verdicts.append(replace(_holm_verdict(rows, power=power, detectable_delta=detectable_delta), unit=unit))
            continue
        models = _rows_of(hsd, dataset, system)
        pairs = _rows_of(hsd_pairs, dataset, system)
        if models.height != rows.height + 1 or pairs.height != models.height * (models.height - 1) // 2:
            raise ValueError(
                f"dataset {dataset!r}, system {system!r}: {rows.height + 1} models need the Tukey HSD model and pair "
                f"tables to name a winner (got {models.height} model and {pairs.height} pair rows); pass "
                "tukey_hsd_tables(...) of the same per-query metrics as hsd and hsd_pairs"
            )
        verdicts.append(replace(_hsd_verdict(rows, models, pairs, power=power, detectable_delta=detectable_delta),
                                unit=unit))
    return verdicts


def _rows_of(table: pl.DataFrame | None, dataset: str, system: str) -> pl.DataFrame:
    if table is None or not table.height:
        return pl.DataFrame()
    return table.filter((pl.col("dataset") == dataset) & (pl.col("system") == system))


def _holm_verdict(rows: pl.DataFrame, *, power: float, detectable_delta: float) -> Verdict:
    """Two models: the confirmatory comparison of B against the baseline A decides."""
    row = rows.row(0, named=True)
    winner = row["decision"] in ("better", "worse")
    flip = row["decision"] == "worse" or (not winner and row["mean_delta"] < 0)
    sign = -1.0 if flip else 1.0
    low, high = sorted((sign * row["ci_low"], sign * row["ci_high"]))
    first, second = (row["model_a"], row["model_b"]) if flip else (row["model_b"], row["model_a"])
    alpha = (1.0 - row["confidence"]) / row["family_size"]
    return Verdict(
        dataset=row["dataset"], system=row["system"], metric=row["metric"], n=row["n"], first=first, second=second,
        winner=first if winner else None, top_group=(first,) if winner else (first, second),
        delta=sign * row["mean_delta"], ci_low=low, ci_high=high, interval="unadjusted",
        p_adjusted=row["p_adjusted"], adjustment=HOLM, family_size=row["family_size"], d_z=sign * row["d_z"],
        confidence=row["confidence"], alpha=alpha,
        mde=float(minimum_detectable_effect(row["sd_delta"], row["n"], alpha=alpha, power=power)),
        power=power, detectable_delta=detectable_delta,
        queries_needed=_needed(row["sd_delta"], detectable_delta, alpha, power),
        baseline=row["model_a"], better_than_baseline=(row["model_b"],) if row["decision"] == "better" else (),
        groups="",
    )


def _hsd_verdict(rows: pl.DataFrame, models: pl.DataFrame, pairs: pl.DataFrame, *, power: float,
                 detectable_delta: float) -> Verdict:
    """Three or more models: the HSD's rank intervals decide, its pair table gives the margin."""
    ordered = models.sort("mean", descending=True, maintain_order=True)
    names = ordered["model"].to_list()
    winners = ordered.filter(pl.col("rank_high") == 1)["model"].to_list()
    top_group = tuple(winners or ordered.filter(pl.col("rank_low") == 1)["model"].to_list() or names[:1])
    first = top_group[0]
    second = next(name for name in names if name != first)
    pair = pairs.filter(pl.col("model_a").is_in([first, second]) & pl.col("model_b").is_in([first, second])).row(0, named=True)
    sign = 1.0 if pair["model_b"] == first else -1.0
    low, high = sorted((sign * pair["ci_low"], sign * pair["ci_high"]))
    confidence = float(ordered["confidence"][0])
    alpha = (1.0 - confidence) / pairs.height
    baseline = rows["model_a"][0]
    better = rows.filter(pl.col("decision") == "better")["model_b"].to_list()
    return Verdict(
        dataset=pair["dataset"], system=pair["system"], metric=pair["metric"], n=int(ordered["n"][0]),
        first=first, second=second, winner=first if winners else None, top_group=top_group,
        delta=sign * pair["mean_delta"], ci_low=low, ci_high=high, interval="simultaneous",
        p_adjusted=pair["p_value"], adjustment=HSD, family_size=pairs.height, d_z=sign * pair["d_z"],
        confidence=confidence, alpha=alpha,
        mde=float(minimum_detectable_effect(pair["sd_delta"], int(ordered["n"][0]), alpha=alpha, power=power)),
        power=power, detectable_delta=detectable_delta,
        queries_needed=_needed(pair["sd_delta"], detectable_delta, alpha, power),
        baseline=baseline, better_than_baseline=tuple(name for name in names if name in better),
        groups=_groups(ordered),
    )


def _listed(names: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


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
