"""Pyramid L1 for one (model, dataset): geometry of the raw vectors and the price of
normalization mistakes, read from and written to the artifact store, and their report section.

The raw vectors are the model's output without its final Normalize module (and never
normalized by the card): they carry the norms that a shipped Normalize layer hides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from embedpyramid.config import ProjectConfig, ResolvedModel
from embedpyramid.data import FrozenDataset, document_lengths
from embedpyramid.encode import cached_embedding_path, read_embedding_metadata, read_embeddings, read_token_counts
from embedpyramid.geometry.normalization import BASELINE, NormalizationPrice, normalization_price
from embedpyramid.geometry.norms import GeometryReport, geometry_report, vector_norms
from embedpyramid.rendering.document import Figure, ReportSection
from embedpyramid.rendering.svg import histogram_svg
from embedpyramid.store import ArtifactStore, read_frame, read_json, read_table, write_json, write_parquet

PRICE_METRICS = ("nDCG@10", "Recall@10", "MRR@10")


@dataclass(frozen=True)
class RawVectors:
    """A model's raw query and document vectors on a dataset, with what L1 needs beside them."""

    query_ids: list[str]
    queries: np.ndarray
    doc_ids: list[str]
    documents: np.ndarray
    doc_chars: np.ndarray
    doc_tokens: np.ndarray | None
    backend: dict[str, Any]


def read_raw_vectors(store: ArtifactStore, model: ResolvedModel, frozen: FrozenDataset) -> RawVectors:
    """The raw tables and the documents' lengths. The lengths come first, from the corpus's text
    columns in Arrow, so the corpus's texts and its vectors are never in memory together."""
    chars = document_lengths(read_table(frozen.path("corpus"), columns=["title", "text"]))
    query_ids, queries = read_embeddings(cached_embedding_path(store, model, frozen, "query", raw=True))
    document_path = cached_embedding_path(store, model, frozen, "document", raw=True)
    doc_ids, documents = read_embeddings(document_path)
    return RawVectors(query_ids, queries, doc_ids, documents, chars, read_token_counts(document_path),
                      read_embedding_metadata(document_path)["backend"])


def analyse_geometry(raw: RawVectors, seed: int) -> GeometryReport:
    """Norms, length correlations (tokens capped at the model's max length), length quintiles,
    anisotropy and spread vs margin of the raw vectors."""
    tokens = raw.doc_tokens if raw.doc_tokens is not None else np.full(len(raw.doc_ids), np.nan)
    return geometry_report(raw.queries, raw.documents, raw.doc_chars, tokens,
                           max_tokens=raw.backend.get("max_tokens"), seed=seed)


def price_normalization(config: ProjectConfig, dataset: str, raw: RawVectors, frozen: FrozenDataset) -> NormalizationPrice:
    """The five distinct normalize × similarity combinations, priced against normalized + dot."""
    protocol, comparison = config.protocol, config.protocol.comparison
    return normalization_price(
        raw.queries, raw.documents, raw.query_ids, raw.doc_ids, raw.doc_chars,
        read_frame(frozen.path("qrels")), protocol.measures(), protocol.conventions(config.dataset(dataset)),
        depth=protocol.depth, n_resamples=comparison.n_resamples, seed=comparison.seed,
        confidence=comparison.confidence, doc_block_size=protocol.search.doc_block_size,
        query_block_size=protocol.search.query_block_size,
    )


def write_geometry(report: GeometryReport, raw: RawVectors, directory: Path) -> Path:
    summary = {**report.as_dict(), "backend": raw.backend,
               "token_counts": "per document, capped at the model's max length" if raw.doc_tokens is not None
               else "not known for this backend (no tokenizer exposed)"}
    write_parquet(pl.DataFrame({"norm": vector_norms(raw.documents)}).to_arrow(), directory / "document_norms.parquet")
    write_parquet(pl.DataFrame({"norm": vector_norms(raw.queries)}).to_arrow(), directory / "query_norms.parquet")
    return write_json(summary, directory / "geometry.json")


def write_price(price: NormalizationPrice, directory: Path) -> Path:
    for variant, run in price.runs.items():
        write_parquet(run, directory / "runs" / f"{variant}.parquet")
    write_parquet(price.per_query.to_arrow(), directory / "per_query.parquet")
    write_parquet(price.behaviour.to_arrow(), directory / "behaviour.parquet")
    write_json({"settings": price.settings, "euclidean_check": price.euclidean_check}, directory / "price.json")
    return write_parquet(price.price.to_arrow(), directory / "price.parquet")


def price_table(price: pl.DataFrame, metrics: tuple[str, ...] = PRICE_METRICS) -> pl.DataFrame:
    """One row per variant: each metric's mean and its delta vs the baseline with the CI."""
    rows = []
    for variant, group in price.group_by("variant", maintain_order=True):
        row: dict[str, Any] = {"variant": variant[0]}
        for record in group.filter(pl.col("metric").is_in(list(metrics))).iter_rows(named=True):
            row[record["metric"]] = f"{record['mean']:.4f}"
            row[f"Δ {record['metric']} [95% CI]"] = (
                "baseline" if variant[0] == BASELINE.name
                else f"{record['delta']:+.4f} [{record['ci_low']:+.4f}, {record['ci_high']:+.4f}]"
            )
        rows.append(row)
    return pl.DataFrame(rows)


def norm_histogram(document_norms: np.ndarray, query_norms: np.ndarray, title: str) -> str:
    return histogram_svg({"documents": document_norms, "queries": query_norms}, title=title, xlabel="L2 norm (raw)")


def report_section(directory: Path, model_key: str, dataset: str) -> ReportSection:
    """The L1 section of one (model, dataset) for the report, from its stored outputs."""
    geometry = read_json(directory / "geometry.json")
    doc_norms, query_norms = (read_frame(directory / f"{kind}_norms.parquet")["norm"].to_numpy()
                              for kind in ("document", "query"))
    backend, norms = geometry["backend"], geometry["doc_norms"]
    if backend.get("stripped"):
        layer = "ships a Normalize module, stripped for these raw vectors"
    elif backend.get("normalize_layer") is None:
        layer = "vectors as the backend returns them (no module list to inspect)"
    else:
        layer = "no Normalize module, nothing stripped"
    if norms["sd"] is not None and norms["sd"] < 1e-4 and abs(norms["mean"] - 1) < 1e-3:
        layer += "; the backend already returns unit vectors, so skipping normalization changes nothing"
    spread = geometry["spread_margin"]
    correlations = geometry["length_correlations"]
    intro = (
        f"{model_key} on {dataset}: modules {', '.join(backend.get('modules') or [])} — {layer}. "
        f"Raw document norms: mean {_num(norms['mean'])}, sd {_num(norms['sd'])}, "
        f"min {_num(norms['min'])}, max {_num(norms['max'])} (max/min {_num(norms['max_over_min'])}). "
        f"Norm vs characters: Pearson {_num(correlations['pearson_chars'])}, Spearman {_num(correlations['spearman_chars'])}; "
        f"vs tokens: Pearson {_num(correlations['pearson_tokens'])}, Spearman {_num(correlations['spearman_tokens'])} "
        f"(tokens {geometry.get('token_counts')}). Anisotropy (mean cosine of {geometry['anisotropy_pairs']} random "
        f"document pairs, seed {geometry['seed']}): {_num(geometry['anisotropy'])}. Spread (norm sd/mean) "
        f"{_num(spread['spread'])} against margin (mean (top-1 − top-{spread['margin_rank']})/top-1 cosine) "
        f"{_num(spread['margin'])}: ratio {_num(spread['ratio'])}."
    )
    title = f"Raw norms of {model_key} ({dataset})"
    figure = Figure(f"norms-{dataset}-{model_key.replace('@', '-')}", title, norm_histogram(doc_norms, query_norms, title))
    return ReportSection(
        title=f"L1 geometry and the price of normalization mistakes: {model_key} ({dataset})",
        intro=intro,
        tables=(
            ("Price of each normalize × similarity combination (delta vs normalized + dot, paired CI)",
             price_table(read_frame(directory / "price.parquet"))),
            ("What each combination retrieves (top-10): overlap with the baseline, top-1 changes, length and norm "
             "of retrieved documents, pick ratio per length quintile vs the baseline",
             read_frame(directory / "behaviour.parquet")),
            ("Length quintiles of the corpus (raw document norms)", pl.DataFrame(geometry["quintiles"]).select(
                "quintile", "chars_min", "chars_max", "n", "mean_tokens", "mean_norm")),
        ),
        figures=(figure,),
    )


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
