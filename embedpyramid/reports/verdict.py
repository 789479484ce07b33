"""The verdict: per dataset, which model wins on the confirmatory metric, by how much and how
surely — or that no difference was detectable, with what this many queries could detect.

With two models the verdict reads the confirmatory row of the comparisons table (the report
metric over all queries, B against the baseline A, Holm-adjusted sign-flip test). With three or
more it reads the randomized Tukey HSD: a model wins when its rank interval is [1, 1] (it is
significantly better than every other model); the margin quoted is over the runner-up, with
the simultaneous interval and the HSD p-value. Otherwise the verdict is "no detectable
difference" among the models that could rank first, with the minimum detectable effect at this
n and the number of queries needed to detect ``detectable_delta``, both from the paired deltas'
standard deviation (two-sided paired t-test at alpha, ``power``;
:mod:`embedpyramid.stats.power`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import polars as pl

from embedpyramid.stats import minimum_detectable_effect, queries_needed
from embedpyramid.stats.compare import CONFIRMATORY


@dataclass(frozen=True)
class Verdict:
    """One dataset's verdict; ``winner`` is None when no difference was detected. ``delta`` and
    its interval are winner minus ``runner_up`` (or, without a winner, the best model minus the
    runner-up); ``method`` says which test decided."""

    dataset: str
    system: str
    metric: str
    n: int
    models: tuple[str, ...]
    winner: str | None
    runner_up: str
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    d_z: float
    method: str
    confidence: float
    mde: float
    power: float
    detectable_delta: float
    queries_needed: int | None

    def text(self) -> str:
        """The verdict as one plain-text paragraph."""
        level = f"{self.confidence:.0%}"
        evidence = (
            f"Δ = {self.delta:+.4f}, {level} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], "
            f"p ({self.method}) {_p_text(self.p_value)}, d_z = {_number(self.d_z)}"
        )
        where = f"{self.dataset} · {self.metric} over {self.n:,} queries"
        if self.winner is not None:
            return f"{where}: {self.winner} wins over {self.runner_up} ({evidence})."
        alpha = 1.0 - self.confidence
        needed = (
            f"detecting Δ = {self.detectable_delta:g} would take about {self.queries_needed:,} queries"
            if self.queries_needed is not None
            else f"no number of queries detects Δ = {self.detectable_delta:g} at this variance"
        )
        among = " and ".join(self.models) if len(self.models) <= 2 else ", ".join(self.models)
        return (
            f"{where}: no detectable difference between {among} ({evidence}); at this n the "
            f"smallest detectable effect is {self.mde:.4f} (power {self.power:g}, α {alpha:g}); {needed}."
        )

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "text": self.text()}


def dataset_verdicts(
    comparisons: pl.DataFrame,
    hsd: pl.DataFrame,
    hsd_pairs: pl.DataFrame,
    *,
    power: float,
    detectable_delta: float,
) -> list[Verdict]:
    """One verdict per (dataset, system) with a confirmatory comparison, in table order; ``hsd``
    and ``hsd_pairs`` may be empty (fewer than three models)."""
    verdicts = []
    confirmatory = comparisons.filter(pl.col("family") == CONFIRMATORY)
    for (dataset, system), rows in confirmatory.partition_by(["dataset", "system"], as_dict=True, maintain_order=True).items():
        models = hsd.filter((pl.col("dataset") == dataset) & (pl.col("system") == system)) if hsd.height else hsd
        if models.height:
            pairs = hsd_pairs.filter((pl.col("dataset") == dataset) & (pl.col("system") == system))
            verdicts.append(_from_hsd(models, pairs, power=power, detectable_delta=detectable_delta))
        else:
            verdicts.append(_from_pair(rows.row(0, named=True), power=power, detectable_delta=detectable_delta))
    return verdicts


def _from_pair(row: dict, *, power: float, detectable_delta: float) -> Verdict:
    decision, a, b = row["decision"], row["model_a"], row["model_b"]
    flip = decision == "worse" or (decision != "better" and row["mean_delta"] < 0)
    best, other = (a, b) if flip else (b, a)
    sign = -1.0 if flip else 1.0
    low, high = sorted((sign * row["ci_low"], sign * row["ci_high"]))
    return Verdict(
        dataset=row["dataset"], system=row["system"], metric=row["metric"], n=row["n"], models=(best, other),
        winner=best if decision in ("better", "worse") else None, runner_up=other,
        delta=sign * row["mean_delta"], ci_low=low, ci_high=high, p_value=row["p_adjusted"],
        d_z=sign * row["d_z"], method="Holm", confidence=row["confidence"], mde=row["mde"], power=power,
        detectable_delta=detectable_delta, queries_needed=_needed(row["sd_delta"], detectable_delta, row["confidence"], power),
    )


def _from_hsd(models: pl.DataFrame, pairs: pl.DataFrame, *, power: float, detectable_delta: float) -> Verdict:
    ordered = models.sort("mean", descending=True)
    best, runner_up = ordered["model"][0], ordered["model"][1]
    first = ordered.row(0, named=True)
    pair = pairs.filter(pl.col("model_a").is_in([best, runner_up]) & pl.col("model_b").is_in([best, runner_up])).row(0, named=True)
    sign = 1.0 if pair["model_b"] == best else -1.0
    low, high = sorted((sign * pair["ci_low"], sign * pair["ci_high"]))
    alone_on_top = first["rank_low"] == first["rank_high"] == 1
    contenders = tuple(ordered.filter(pl.col("rank_low") == 1)["model"].to_list())
    alpha = 1.0 - first["confidence"]
    mde = float(minimum_detectable_effect(pair["sd_delta"], first["n"], alpha=alpha, power=power))
    return Verdict(
        dataset=first["dataset"], system=first["system"], metric=first["metric"], n=first["n"],
        models=contenders if not alone_on_top else (best, runner_up), winner=best if alone_on_top else None,
        runner_up=runner_up, delta=sign * pair["mean_delta"], ci_low=low, ci_high=high, p_value=pair["p_value"],
        d_z=sign * pair["d_z"], method="Tukey HSD", confidence=first["confidence"], mde=mde, power=power,
        detectable_delta=detectable_delta, queries_needed=_needed(pair["sd_delta"], detectable_delta, first["confidence"], power),
    )


def _needed(sd: float, delta: float, confidence: float, power: float) -> int | None:
    if sd is None or not math.isfinite(sd):
        return None
    return queries_needed(sd, delta, alpha=1.0 - confidence, power=power)


def _p_text(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"= {p:.4f}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    return f"{value:+.2f}"
