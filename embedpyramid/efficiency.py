"""Efficiency per (model, dataset): what a model costs to run, beside what it scores.

One row per (model, dataset), from what the pipeline recorded while it worked plus one
measurement of its own:

- encode throughput at the card's batch size, documents and queries apart: texts/s and
  tokens/s over the encode seconds of the single pass (recorded in each embedding table);
- query-encode latency at batch 1, warm and repeated: ``latency_queries`` queries drawn with a
  seed, each encoded alone ``latency_repeats`` times after one warm-up call; p50/p95 over all
  calls (a local card only: for a remote card it would bill the API, so the per-request
  latency seen during the encode, at the configured batch size, is reported instead);
- exact-search QPS (the stored exact run's timing), vector bytes (dimension × 4 bytes of
  float32) and the corpus's vector bytes, the peak RSS of the encode, device and threads;
- cost. A remote card: ``price_per_million_tokens × tokens / 10⁶`` over the tokens the API
  reported (documents + queries). A local card: device-seconds (encode seconds, documents +
  queries), turned into money only when the card has ``run.price_per_device_hour``. The
  re-embedding cost is the same for the documents alone: what changing the model costs.

Batch-1 latency and batch throughput are never mixed (the convention of level L4 too).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
import polars as pl

from embedpyramid.config import ResolvedModel
from embedpyramid.data import FrozenDataset, encoding_inputs
from embedpyramid.encode import Encoder, cached_embedding_path, read_embedding_metadata, thread_limit
from embedpyramid.rendering.svg import svg_document, svg_text
from embedpyramid.store import ArtifactStore, read_table_metadata, write_parquet

FLOAT32_BYTES = 4

EFFICIENCY_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(), "model": pl.String(), "name": pl.String(), "backend": pl.String(),
    "device": pl.String(), "threads": pl.Int64(), "batch_size": pl.Int64(),
    "documents": pl.Int64(), "document_seconds": pl.Float64(), "documents_per_second": pl.Float64(),
    "document_tokens": pl.Int64(), "document_tokens_per_second": pl.Float64(),
    "queries": pl.Int64(), "query_seconds": pl.Float64(), "queries_per_second_encoded": pl.Float64(),
    "query_tokens": pl.Int64(), "query_tokens_per_second": pl.Float64(),
    "latency_p50_ms": pl.Float64(), "latency_p95_ms": pl.Float64(), "latency_queries": pl.Int64(),
    "latency_repeats": pl.Int64(), "latency_seed": pl.Int64(), "latency_basis": pl.String(),
    "search_metric": pl.String(), "search_qps": pl.Float64(), "search_threads": pl.Int64(),
    "dim": pl.Int64(), "bytes_per_vector": pl.Int64(), "corpus_vector_bytes": pl.Int64(),
    "encode_peak_rss_bytes": pl.Int64(), "api_requests": pl.Int64(), "api_retries": pl.Int64(),
    "texts_from_cache": pl.Int64(), "tokens_billed": pl.Int64(),
    "price_per_million_tokens": pl.Float64(), "price_per_device_hour": pl.Float64(),
    "cost_basis": pl.String(), "device_seconds": pl.Float64(), "cost": pl.Float64(),
    "reembed_device_seconds": pl.Float64(), "reembed_cost": pl.Float64(),
}


@dataclass(frozen=True)
class Latency:
    """Batch-1 encode latencies (milliseconds) of ``queries`` texts × ``repeats`` calls."""

    p50_ms: float
    p95_ms: float
    queries: int
    repeats: int
    seed: int


def query_latency(encoder: Encoder, texts: Sequence[str], *, queries: int, repeats: int, seed: int,
                  threads: int | None = None) -> Latency:
    """Encode ``queries`` texts drawn with ``seed``, one per call, ``repeats`` times each, after
    one untimed warm-up call; p50/p95 over every call."""
    if not texts:
        raise ValueError("no query texts to time")
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in np.sort(rng.choice(len(texts), min(queries, len(texts)), replace=False))]
    timings = []
    with thread_limit(threads):
        encoder.encode(sample[:1], "query")
        for _ in range(repeats):
            for text in sample:
                start = time.perf_counter()
                encoder.encode([text], "query")
                timings.append((time.perf_counter() - start) * 1000.0)
    p50, p95 = np.percentile(timings, [50, 95])
    return Latency(float(p50), float(p95), len(sample), repeats, seed)


def _per_second(amount: float | None, seconds: float) -> float | None:
    return amount / seconds if amount is not None and seconds > 0 else None


def _tokens(metadata: dict[str, Any]) -> int | None:
    """Tokens of a table: the tokenizer's count, else what the API reported."""
    if metadata.get("tokens") is not None:
        return int(metadata["tokens"])
    usage = metadata.get("api_usage")
    if usage and not usage["texts_without_tokens"]:
        return int(usage["tokens"])
    return None


def efficiency_row(
    model: ResolvedModel, dataset: str, documents: dict[str, Any], queries: dict[str, Any],
    search: dict[str, Any], latency: Latency | None,
) -> dict[str, Any]:
    """One row of :data:`EFFICIENCY_SCHEMA` from the metadata of the document and query tables,
    the exact run's search manifest and the measured latency (None for a remote card)."""
    card, api = model.card, model.card.api
    doc_tokens, query_tokens = _tokens(documents), _tokens(queries)
    usages = [m["api_usage"] for m in (documents, queries) if m.get("api_usage")]
    request_ms = [1000.0 * s for u in usages for s in u["request_seconds"]]
    if latency is None and request_ms:
        p50, p95 = (float(v) for v in np.percentile(request_ms, [50, 95]))
        latency_basis = f"per API request at batch {card.run.batch_size} during the encode (batch-1 timing would bill)"
    elif latency is None:
        p50 = p95 = None
        latency_basis = "not measured: a remote card answered from the response cache"
    else:
        p50, p95 = latency.p50_ms, latency.p95_ms
        latency_basis = "batch 1, warm, each query repeated"
    device_seconds = documents["seconds"] + queries["seconds"]
    price_tokens = api.price_per_million_tokens if api else None
    price_hour = card.run.price_per_device_hour
    if model.is_remote:
        basis = "api tokens"
        cost = None if price_tokens is None or None in (doc_tokens, query_tokens) else \
            price_tokens * (doc_tokens + query_tokens) / 1e6
        reembed = None if price_tokens is None or doc_tokens is None else price_tokens * doc_tokens / 1e6
    else:
        basis = "device-seconds"
        cost = None if price_hour is None else price_hour * device_seconds / 3600
        reembed = None if price_hour is None else price_hour * documents["seconds"] / 3600
    dim = int(documents["dim"])
    return {
        "dataset": dataset, "model": model.key, "name": model.name, "backend": card.backend,
        "device": "remote" if model.is_remote else card.run.device, "threads": documents.get("threads"),
        "batch_size": documents.get("batch_size", card.run.batch_size),
        "documents": documents["rows"], "document_seconds": documents["seconds"],
        "documents_per_second": _per_second(documents["rows"], documents["seconds"]),
        "document_tokens": doc_tokens, "document_tokens_per_second": _per_second(doc_tokens, documents["seconds"]),
        "queries": queries["rows"], "query_seconds": queries["seconds"],
        "queries_per_second_encoded": _per_second(queries["rows"], queries["seconds"]),
        "query_tokens": query_tokens, "query_tokens_per_second": _per_second(query_tokens, queries["seconds"]),
        "latency_p50_ms": p50, "latency_p95_ms": p95,
        "latency_queries": latency.queries if latency else None, "latency_repeats": latency.repeats if latency else None,
        "latency_seed": latency.seed if latency else None, "latency_basis": latency_basis,
        "search_metric": search.get("metric"), "search_qps": search.get("queries_per_second"),
        "search_threads": search.get("threads"),
        "dim": dim, "bytes_per_vector": dim * FLOAT32_BYTES, "corpus_vector_bytes": documents["rows"] * dim * FLOAT32_BYTES,
        "encode_peak_rss_bytes": max(documents.get("peak_rss_bytes") or 0, queries.get("peak_rss_bytes") or 0),
        "api_requests": sum(u["requests"] for u in usages) if usages else None,
        "api_retries": sum(u["retries"] for u in usages) if usages else None,
        "texts_from_cache": sum(u["texts_cached"] for u in usages) if usages else None,
        "tokens_billed": sum(u["tokens_billed"] for u in usages) if usages else None,
        "price_per_million_tokens": price_tokens, "price_per_device_hour": price_hour,
        "cost_basis": basis, "device_seconds": None if model.is_remote else device_seconds, "cost": cost,
        "reembed_device_seconds": None if model.is_remote else documents["seconds"], "reembed_cost": reembed,
    }


def efficiency_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=EFFICIENCY_SCHEMA, orient="row")


def efficiency_path(store: ArtifactStore, dataset: str, model_key: str) -> Path:
    return store.root / "efficiency" / dataset / model_key / "efficiency.parquet"


def measure_efficiency(
    store: ArtifactStore, model: ResolvedModel, dataset: str, frozen: FrozenDataset, encoder: Callable[[], Encoder],
    *, seed: int,
) -> pl.DataFrame:
    """The efficiency row of one (model, dataset), written to :func:`efficiency_path`: the
    recorded encode and search figures, and the batch-1 query latency measured now with the
    card's model (``encoder`` is only called for a local card)."""
    run = model.card.run
    latency = None if model.is_remote else query_latency(
        encoder(), encoding_inputs(frozen, "query").texts, queries=run.latency_queries, repeats=run.latency_repeats,
        seed=seed, threads=run.threads)
    row = efficiency_row(
        model, dataset,
        read_embedding_metadata(cached_embedding_path(store, model, frozen, "document")),
        read_embedding_metadata(cached_embedding_path(store, model, frozen, "query")),
        read_table_metadata(store.run_dir(dataset, model.key) / "exact.parquet"), latency,
    )
    frame = efficiency_frame([row])
    write_parquet(frame.to_arrow(), efficiency_path(store, dataset, model.key))
    return frame


def cost_axis(table: pl.DataFrame) -> tuple[str, str]:
    """The x of the cost/quality plot: money when every model has a price, else the seconds
    the corpus took to embed (device-seconds for local cards)."""
    if table["reembed_cost"].null_count() == 0:
        return "reembed_cost", "cost to re-embed the corpus (card prices)"
    return "document_seconds", "seconds to embed the corpus (device-seconds; remote: API wall time)"


def pareto_front(table: pl.DataFrame, cost: str, quality: str) -> pl.DataFrame:
    """Models no other model beats on both: cost at most and quality at least, one strictly."""
    ordered = table.sort([cost, quality], descending=[False, True])
    best = ordered[quality].cum_max().shift(1, fill_value=-math.inf)
    return ordered.filter(ordered[quality] > best)


def cost_quality_svg(table: pl.DataFrame, cost: str, quality: str, *, title: str, xlabel: str, ylabel: str) -> str:
    """Every model as a point (cost on x, quality on y, hover for the model) and the Pareto
    front as a line."""
    points = table.filter(pl.col(cost).is_not_null() & pl.col(quality).is_not_null())
    if points.is_empty():
        raise ValueError("no model has both a cost and a quality to plot")
    left, top, width, height = 70, 40, 480, 300
    x_hi = max(points[cost].max() or 0.0, 1e-9) * 1.1
    y_lo, y_hi = points[quality].min(), points[quality].max()
    span = (y_hi - y_lo) or max(abs(y_hi), 1e-3)
    y_lo, y_hi = y_lo - 0.1 * span, y_hi + 0.1 * span

    def x(value: float) -> float:
        return left + value / x_hi * width

    def y(value: float) -> float:
        return top + height - (value - y_lo) / (y_hi - y_lo) * height

    parts = [
        f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#bbb"/>',
        svg_text(left + width / 2, top + height + 36, xlabel, anchor="middle"),
        svg_text(16, top + height / 2, ylabel, anchor="middle", rotate=True),
        svg_text(left, 24, title, size=14, weight="bold"),
    ]
    for fraction in (0.0, 0.5, 1.0):
        parts.append(svg_text(x(fraction * x_hi), top + height + 16, f"{fraction * x_hi:.3g}", size=11, anchor="middle"))
        value = y_lo + fraction * (y_hi - y_lo)
        parts.append(svg_text(left - 6, y(value) + 4, f"{value:.3f}", size=11, anchor="end"))
    front = pareto_front(points, cost, quality)
    path = " ".join(f"{x(c):.1f},{y(q):.1f}" for c, q in front.select(cost, quality).iter_rows())
    parts.append(f'<polyline points="{path}" fill="none" stroke="#2166ac" stroke-width="2"/>')
    for row in points.iter_rows(named=True):
        label = f"{row['model']}: {ylabel} {row[quality]:.4f}, {xlabel} {row[cost]:.4g}"
        parts.append(f'<circle cx="{x(row[cost]):.1f}" cy="{y(row[quality]):.1f}" r="5" fill="#777">'
                     f"<title>{escape(label)}</title></circle>")
        parts.append(svg_text(x(row[cost]) + 7, y(row[quality]) - 7, row["model"], size=10))
    return svg_document(left + width + 120, top + height + 50, title, parts)
