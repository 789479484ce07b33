"""The L6 grade analysis of one (dataset, system) across models: descriptive statistics, models
of the grade chosen by AIC, the omnibus tests, Holm-corrected pairwise comparisons with letter
groups, the power analysis and the three plots — every table with the settings and seed that
produced it.

Input is the long per-query table (its ``judge:<criterion>`` rows); only queries graded under
every model and criterion are modelled (:mod:`~embedpyramid.downstream.design`), the others are
counted in the manifest. With a single model there is nothing to compare: the descriptive
table and the plots are produced, the model tables are empty and the manifest says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from embedpyramid.config import AnalysisConfig
from embedpyramid.downstream.descriptive import describe_grades, per_query_means
from embedpyramid.downstream.design import grade_design, grade_table
from embedpyramid.downstream.glm import fit_candidates, select_by_aic
from embedpyramid.downstream.likelihood_ratio import likelihood_ratio_test, wald_test
from embedpyramid.downstream.plots import bar_chart_svg, box_plot_svg, heatmap_svg
from embedpyramid.downstream.posthoc import letter_groups, pairwise_comparisons
from embedpyramid.downstream.power import power_analysis
from embedpyramid.store import write_json, write_parquet, write_text

FITS_SCHEMA = {"candidate": pl.String, "group": pl.String, "link": pl.String, "response": pl.String,
               "likelihood": pl.String, "converged": pl.Boolean, "loglik": pl.Float64, "n_params": pl.Int64,
               "aic": pl.Float64, "comparable": pl.Boolean, "selected": pl.Boolean, "note": pl.String}
OMNIBUS_SCHEMA = {"test": pl.String, "candidate": pl.String, "statistic": pl.Float64, "df": pl.Int64,
                  "p_value": pl.Float64, "covariance": pl.String, "note": pl.String}
PAIRWISE_SCHEMA = {"model_a": pl.String, "model_b": pl.String, "mean_a": pl.Float64, "mean_b": pl.Float64,
                   "estimate": pl.Float64, "se": pl.Float64, "z": pl.Float64, "p_value": pl.Float64,
                   "p_holm": pl.Float64, "significant": pl.Boolean, "scale": pl.String}
LETTERS_SCHEMA = {"model": pl.String, "mean": pl.Float64, "letters": pl.String}
POWER_SCHEMA = {"criterion": pl.String, "difference": pl.Float64, "alpha": pl.Float64, "target": pl.Float64,
                "sd_difference": pl.Float64, "n_required": pl.Int64, "normal_approximation": pl.Int64,
                "n_simulations": pl.Int64, "seed": pl.Int64, "note": pl.String}
CURVE_SCHEMA = {"criterion": pl.String, "n": pl.Int64, "power": pl.Float64}


@dataclass(frozen=True)
class GradeAnalysis:
    descriptive: pl.DataFrame
    fits: pl.DataFrame
    omnibus: pl.DataFrame
    pairwise: pl.DataFrame
    letters: pl.DataFrame
    power: pl.DataFrame
    power_curve: pl.DataFrame
    plots: dict[str, str]
    manifest: dict[str, Any]

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"descriptive": self.descriptive, "fits": self.fits, "omnibus": self.omnibus,
                "pairwise": self.pairwise, "letters": self.letters, "power": self.power,
                "power_curve": self.power_curve}


def model_order(per_query: pl.DataFrame, order: Sequence[str] | None) -> list[str]:
    """The models of ``per_query``, in ``order`` where given (e.g. the baseline first), else sorted."""
    present = set(per_query["model"].unique().to_list())
    if order is None:
        return sorted(present)
    missing = present - set(order)
    if missing:
        raise ValueError(f"models {sorted(missing)} have grades but are not in the model order {list(order)}")
    return [model for model in order if model in present]


def analyse_grades(per_query: pl.DataFrame, settings: AnalysisConfig, *, dataset: str, system: str,
                   models: Sequence[str] | None = None) -> GradeAnalysis:
    """Analyse the judge grades of ``dataset`` / ``system`` in ``per_query`` (see the module doc);
    ``models`` fixes the order (the first is the reference level and gets letter order ties)."""
    rows = per_query.filter((pl.col("dataset") == dataset) & (pl.col("system") == system))
    grades = grade_table(rows)
    if grades.is_empty():
        raise ValueError(f"no judge grades (metrics judge:<criterion>) for dataset {dataset!r}, system {system!r}")
    design = grade_design(grades, model_order(grades, models), interaction=settings.interaction)
    descriptive = describe_grades(design, settings.confidence)
    manifest: dict[str, Any] = {
        "dataset": dataset, "system": system, "settings": settings.model_dump(mode="json"),
        "models": list(design.models), "criteria": list(design.criteria),
        "modelled_queries": len(design.query_ids), "incomplete_queries": design.incomplete_queries,
        "design_columns": list(design.names),
    }
    tables = {name: pl.DataFrame(schema=schema) for name, schema in (
        ("fits", FITS_SCHEMA), ("omnibus", OMNIBUS_SCHEMA), ("pairwise", PAIRWISE_SCHEMA),
        ("letters", LETTERS_SCHEMA), ("power", POWER_SCHEMA), ("power_curve", CURVE_SCHEMA))}
    letters: dict[str, str] = {}
    if len(design.models) < 2:
        manifest["selection"] = "one model only: nothing to compare, no model of the grade is fitted"
    else:
        fits = fit_candidates(design, settings.covariance)
        selected, manifest["selection"] = select_by_aic(fits)
        tables["fits"] = pl.DataFrame([{
            "candidate": f.candidate.name, "group": f.candidate.group, "link": f.candidate.link,
            "response": f.candidate.response, "likelihood": f.candidate.likelihood, "converged": f.converged,
            "loglik": f.loglik, "n_params": f.n_params, "aic": f.aic,
            "comparable": f.candidate.group == "gaussian", "selected": f is selected, "note": f.note,
        } for f in fits], schema=FITS_SCHEMA)
        if selected is not None:
            tests = [likelihood_ratio_test(selected, design, settings.covariance),
                     wald_test(selected, design, settings.covariance)]
            ordinal = next(f for f in fits if f.candidate.group == "ordinal")
            if ordinal is not selected:
                tests.append(likelihood_ratio_test(ordinal, design, settings.covariance))
            tables["omnibus"] = pl.DataFrame([asdict(t) for t in tests], schema=OMNIBUS_SCHEMA)
            tables["pairwise"] = pairwise_comparisons(selected, design, settings.alpha, settings.covariance).cast(PAIRWISE_SCHEMA)
            tables["letters"] = letter_groups(tables["pairwise"], design).cast(LETTERS_SCHEMA)
            letters = dict(zip(tables["letters"]["model"], tables["letters"]["letters"], strict=True))
        power = settings.power
        results = power_analysis(design, difference=power.difference, alpha=settings.alpha, target=power.target,
                                 n_simulations=power.n_simulations, max_queries=power.max_queries, seed=settings.seed)
        tables["power"] = pl.DataFrame([{k: v for k, v in asdict(r).items() if k != "curve"} for r in results],
                                       schema=POWER_SCHEMA)
        tables["power_curve"] = pl.DataFrame([(r.criterion, n, p) for r in results for n, p in r.curve],
                                             schema=CURVE_SCHEMA, orient="row")
    plots = {
        "grades_box": box_plot_svg(per_query_means(design), title=f"{dataset} · {system}: grade per query, by model"),
        "grades_bar": bar_chart_svg(descriptive, letters, title=f"{dataset} · {system}: mean grade by model"),
        "grades_heatmap": heatmap_svg(descriptive, title=f"{dataset} · {system}: mean grade by model and criterion"),
    }
    return GradeAnalysis(descriptive, tables["fits"], tables["omnibus"], tables["pairwise"], tables["letters"],
                         tables["power"], tables["power_curve"], plots, manifest)


def write_grade_analysis(analysis: GradeAnalysis, directory: Path) -> dict[str, Path]:
    """Each table as ``<name>.parquet`` (the manifest in its schema metadata), each plot as
    ``<name>.svg`` and ``manifest.json`` under ``directory``, each written atomically."""
    metadata = {"embedpyramid": json.dumps(analysis.manifest, sort_keys=True, default=str)}
    paths = {name: write_parquet(table.to_arrow().replace_schema_metadata(metadata), directory / f"{name}.parquet")
             for name, table in analysis.tables().items()}
    paths |= {name: write_text(svg, directory / f"{name}.svg") for name, svg in analysis.plots.items()}
    paths["manifest"] = write_json(analysis.manifest, directory / "manifest.json")
    return paths
