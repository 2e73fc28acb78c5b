"""Embedding speed per model and backend, side by side in one process, with the drift from torch and nDCG@10.

``--corpus FOLDER`` (a folder of documents, e.g. ../shared/datasets/fastapi_docs, every file, recursively):
indexing speed, drift and accuracy on real documentation. A heading question set is built from the folder
(``kbench datasets build synthetic FOLDER --method heading``: a section's heading path is the question, its body
the reference; into <workspace>/bench/sets/, reused when built; or give one with ``--set DIR``), its documents are
chunked recursive 1000/200, and every backend of the model (torch, onnx, onnx-int8, openvino at OpenVINO's own
precision and at f32 where they differ, openvino-int8: what ``kbench models tune`` measures) encodes the same chunks
in turn (``--rounds`` interleaved rounds, best kept). Per backend: chunks/s, the ratio to torch, the one-off
preparation (export, int8 calibration build), the label-free drift a tuning measures (kbench/embedding/tuning.py:
mean cosine error to torch's vectors; mean top-10 overlap of each question's top 10 over the chunks with torch's,
questions in one batch and each alone; within the drift gate or beyond it), and doc nDCG@10 of exact cosine search
for every question beside its paired difference to torch with a 95% bootstrap interval (questions resampled): the
gate's verdict and the labelled difference side by side. The backends ``exact`` and ``fast`` would choose from the
table are marked, and the last line names them, the fastest backend whose interval stays above -0.005, and what
this machine's kept tuning chose. The timed chunks are the set's documents (the folder, less the ~200 heading
lines the questions were taken from).

    .venv/bin/python benchmarks/encoding.py --corpus ../shared/datasets/fastapi_docs [--questions 200]
        [--max-documents N] [--limit N] [--backends torch,openvino-int8] [--scifact 0]

``--max-documents`` keeps the questions' documents and a seeded sample of the rest (a quick check);
``--scifact N`` adds the drift and nDCG columns on N SciFact test claims (their abstracts and others, up to 2,000).
``--set DIR`` alone takes a labelled set as it is (the demo set, chunked as configs/quickstart.yaml does):

    .venv/bin/python benchmarks/encoding.py --set datasets/demo --chunker fixed --chunk-size 600 --chunk-overlap 100

Every table is printed under the CPU's model, its flags (kbench/embedding/cpu.py), its kind and the prior (what
``fast`` was expected to run on such a CPU before measuring) and the load average; each row has the highest 1-minute
load average seen right after its timed rounds. ``--cpu avx2`` emulates an AVX2-only CPU (an EPYC before Zen 4) on
this one: the process starts again with torch's MKL, ATen and oneDNN and OpenVINO's oneDNN capped at AVX2
(AVX2_ENV), OpenVINO computes in f32. OpenVINO's MLAS f32 kernels and all of ONNX Runtime keep this CPU's
instructions (EMULATION_NOTE; docs/how-to/fast-embedding.md).

Without ``--corpus`` or ``--set``: the SciFact measurements below.

For each model: passages/s of torch, onnx, onnx-int8 and openvino on the same SciFact abstracts (rounds
interleaved, best round kept); kbench's indexing path (``CachedEmbedder.embed``, cold cache) against a bare
``SentenceTransformer.encode`` on the same texts (the pipeline's overhead); single-query p50 per backend;
what each change buys on its own (length-sorted batches, threads, int8); and nDCG@10 per backend on a
SciFact sample (the test queries' relevant abstracts plus other abstracts, exact search). Static models
(wordllama, model2vec) and the shipped ONNX paraphrase-MiniLM-L3-v2 get throughput and nDCG too.

    .venv/bin/python benchmarks/encoding.py [--passages 128] [--ndcg-queries 100] [--ndcg-docs 500]

nDCG on a sample is higher than on the full corpus (fewer distractors): compare backends with it, not
with published full-SciFact figures.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench_io import interleaved_best, p50_ms, write_json
from kbench import DatasetConfig, format_table, load_dataset
from kbench.cache import EmbeddingCache
from kbench.chunking import chunk_corpus
from kbench.config import ChunkingConfig
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding import choice, tuning
from kbench.embedding.config import DriftGate
from kbench.embedding.cpu import CPUINFO, PRIOR_SOURCE, CpuFeatures, cpu_features
from kbench.embedding.models import CATALOGUE, resolve_model_path
from kbench.embedding.onnx_runtime import computes_in
from kbench.embedding.stage import CachedEmbedder, l2_normalize, load_encoder
from kbench.evaluation.metrics.ndcg import ndcg_at_k
from kbench.evaluation.significance import bootstrap_ci
from kbench.paths import exports_dir, workspace_dir

TRANSFORMER_BACKENDS = ["torch", "onnx", "onnx-int8", "openvino", "openvino-int8"]

# --cpu avx2: an AVX2-only CPU (an EPYC before Zen 4: no AVX-512, VNNI, bf16 or AMX), emulated on this one. The
# libraries read these variables when they load, so the process runs again with them set (emulate):
# torch's MKL GEMMs, ATen kernels and oneDNN, and OpenVINO's oneDNN kernels, then use AVX2 code at most.
AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
EMULATED_CPUS = {"avx2": CpuFeatures.of("avx2")}
EMULATION_NOTE = (
    "emulated AVX2-only CPU: torch (MKL, ATen, oneDNN) and OpenVINO's oneDNN kernels capped at AVX2 "
    f"({', '.join(f'{k}={v}' for k, v in AVX2_ENV.items())}), OpenVINO at precision f32 (what it computes in "
    "without bf16). Not capped: OpenVINO's MLAS f32 "
    "FullyConnected and MVN kernels, and all of ONNX Runtime (MLAS picks its kernels from CPUID, no switch): "
    "their times are this CPU's widest kernels, an upper bound for an AVX2 CPU. onnx-int8's 7-bit weights give the "
    "same integers on an AVX2 CPU as here, so its nDCG is the AVX2 one; its speed there must be measured there")


def emulate(cpu: str) -> None:
    """Run this benchmark again with the libraries capped to ``cpu``'s instructions (before any is imported)."""
    if cpu == "native" or all(os.environ.get(k) == v for k, v in AVX2_ENV.items()):
        return
    print(f"--cpu {cpu}: running again with {' '.join(f'{k}={v}' for k, v in AVX2_ENV.items())}", flush=True)
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **AVX2_ENV})


def cpu_model() -> str:
    try:
        for line in CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown CPU"


def load_average() -> str:
    """``uptime``'s three load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_lines(args, model: str) -> list[str]:
    """What every table is measured on: this CPU's flags, the emulation, its kind and the prior, the load."""
    lines = [f"CPU: {cpu_model()}, {os.cpu_count()} cores, flags {cpu_features().describe()}"]
    if args.cpu != "native":
        lines.append(EMULATION_NOTE)
    cpu = EMULATED_CPUS.get(args.cpu) or cpu_features()
    lines.append(f"{'an emulated' if args.cpu != 'native' else 'a'} {cpu.kind} CPU, where fast was expected to run "
                 f"{choice.prior_fast(EmbeddingConfig(model=model), cpu)} for {model} before measuring "
                 f"(kbench/embedding/cpu.py: {PRIOR_SOURCE[cpu.kind]}); load average {load_average()}")
    return lines


def backend_config(args, model: str, backend: str, **knobs) -> EmbeddingConfig:
    """``backend`` as the (emulated) CPU runs it: OpenVINO at f32 on an emulated CPU without bf16."""
    if args.cpu != "native" and backend.startswith("openvino"):
        knobs["precision"] = "f32"
    return EmbeddingConfig(model=model, backend=backend, **knobs)


def timed_with_load(rounds: int, candidates: dict) -> tuple[dict[str, float], dict[str, float]]:
    """``interleaved_best``, and the highest 1-minute load average seen right after each candidate ran."""
    loads: dict[str, float] = {}

    def with_load(name, fn):
        def run():
            fn()
            loads[name] = max(loads.get(name, 0.0), os.getloadavg()[0])
        return run

    return interleaved_best(rounds, {n: with_load(n, fn) for n, fn in candidates.items()}), loads


def sample(dataset, n_queries: int, n_docs: int, seed: int = 0):
    """The first n_queries judged test queries, their relevant abstracts, and other abstracts up to n_docs."""
    queries = [q for q in dataset.queries if dataset.qrels.get(q.query_id)][:n_queries]
    relevant = {d for q in queries for d in dataset.qrels[q.query_id]}
    others = [d for d in dataset.documents if d.doc_id not in relevant]
    random.Random(seed).shuffle(others)
    docs = [d for d in dataset.documents if d.doc_id in relevant] + others[: max(0, n_docs - len(relevant))]
    return queries, docs


def ndcg10(encoder, queries, docs, qrels) -> float:
    d = l2_normalize(encoder.encode([x.text for x in docs]))
    q = l2_normalize(encoder.encode([x.text for x in queries], for_queries=True))
    return float(np.mean(doc_ndcg10(q, d, [x.doc_id for x in docs], queries, qrels)))


def doc_ndcg10(query_vectors: np.ndarray, unit_vectors: np.ndarray, unit_docs: list[str], queries, qrels) -> list[float]:
    """Per query, nDCG@10 of the documents ranked by their best unit's cosine (exact search)."""
    out = []
    for q, query in zip(query_vectors, queries):
        order = np.argsort(-(unit_vectors @ q), kind="stable")
        ranked: list[str] = []
        for i in order:
            if unit_docs[i] not in ranked:
                ranked.append(unit_docs[i])
                if len(ranked) == 10:
                    break
        grades = qrels[query.query_id]
        out.append(ndcg_at_k([grades.get(doc, 0) for doc in ranked], list(grades.values()), 10))
    return out


def heading_set(folder: Path, questions: int, seed: int) -> Path:
    """A heading question set built from ``folder`` under <workspace>/bench/sets/ (reused when built)."""
    from kbench.datasets.synthetic import build_from_source
    from kbench.datasets.synthetic.build import is_built_set

    out = workspace_dir() / "bench" / "sets" / f"{folder.resolve().name}-heading-{questions}-s{seed}"
    if not is_built_set(out):
        report = build_from_source(str(folder), out, method="heading", seed=seed, max_questions=questions)
        print(f"built {out}: {report.kept} heading questions from {report.documents} documents", flush=True)
    return out


def accuracy_row(values: list[float], torch_values: list[float]) -> dict:
    diff = np.asarray(values) - np.asarray(torch_values)
    low, high = bootstrap_ci(diff) if len(diff) else (float("nan"), float("nan"))
    return {"ndcg_at_10": float(np.mean(values)), "ndcg_diff": float(diff.mean()), "ci_low": low, "ci_high": high}


def bench_corpus(args) -> None:
    """Indexing speed of every backend on a folder's chunks, its drift from torch without labels and its heading
    questions' nDCG@10 (module doc)."""
    folder = Path(args.corpus or args.set)
    set_dir = Path(args.set) if args.set else heading_set(folder, args.questions, args.seed)
    dataset = load_dataset(DatasetConfig(path=str(set_dir), max_documents=args.max_documents))
    queries = [q for q in dataset.queries if dataset.qrels.get(q.query_id)]
    chunking = ChunkingConfig(strategy=args.chunker, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap)
    chunks = chunk_corpus(dataset.documents, chunking)
    if args.limit:
        chunks = chunks[: args.limit]
        kept = {c.doc_id for c in chunks}
        queries = [q for q in queries if set(dataset.qrels[q.query_id]) & kept]
    texts = [c.text for c in chunks]
    model = args.models.split(",")[0]
    pairs = backend_pairs(args, model)
    print(f"== {model} on {folder}: {len(dataset.documents)} documents, {len(chunks)} chunks ({args.chunker} "
          f"{args.chunk_size}/{args.chunk_overlap}, {sum(map(len, texts)) / max(len(texts), 1):.0f} characters on "
          f"average), {len(queries)} questions from {set_dir}; backends {', '.join(map(label, pairs))} ==", flush=True)
    (workspace_dir() / "bench").mkdir(parents=True, exist_ok=True)
    # every export built fresh (its time is the prepare column), in the workspace, removed at the end
    scratch = Path(tempfile.mkdtemp(prefix="encoding-exports-", dir=workspace_dir() / "bench"))
    try:
        bench_backends(args, folder, set_dir, model, pairs, chunks, texts, queries, dataset, scratch / "exports")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def backend_pairs(args, model: str) -> list[tuple[str, str]]:
    """(backend, precision) pairs measured: what a tuning measures (OpenVINO at its own precision and at f32 where
    they differ); on an emulated CPU without bf16, OpenVINO at f32 only. ``--backends`` keeps some."""
    if args.cpu == "native":
        pairs = tuning.candidates(model)
    else:
        pairs = [(b, "f32" if b.startswith("openvino") else "auto") for b in CATALOGUE[model].backends]
    wanted = args.backends.split(",") if args.backends else None
    return [p for p in pairs if wanted is None or p[0] in wanted]


def label(pair: tuple[str, str]) -> str:
    return pair[0] if pair[1] == "auto" else f"{pair[0]} ({pair[1]})"


def encoded(encoder, texts: list[str] | np.ndarray, questions: list[str]) -> tuple:
    """What the drift measures read (tuning.drift_row): unit vectors of the texts (or their vectors, already
    encoded), of the questions in one batch and each alone, and ms per question alone."""
    batch = encoder.encode(questions)
    t = time.perf_counter()
    alone = np.concatenate([encoder.encode([q], for_queries=True) for q in questions])
    per_question = 1000 * (time.perf_counter() - t) / max(len(questions), 1)
    vectors = texts if isinstance(texts, np.ndarray) else encoder.encode(texts)
    return tuning.unit_vectors(vectors), tuning.unit_vectors(batch), tuning.unit_vectors(alone), per_question


def bench_backends(args, folder, set_dir, model, pairs, chunks, texts, queries, dataset, exports: Path) -> None:
    encoders, prepare_s = {}, {}
    for pair in pairs:
        t = time.perf_counter()
        encoders[pair] = load_encoder(EmbeddingConfig(model=model, backend=pair[0], precision=pair[1]),
                                      exports=exports)
        if getattr(encoders[pair], "needs_calibration", False):
            encoders[pair].calibrate(texts)  # on the corpus, as a run does
        encoders[pair].encode(texts[:1])  # builds what is built on first use (the int8 model); warms up
        prepare_s[pair] = time.perf_counter() - t
    chunk_vectors: dict = {}

    def encode(pair):
        chunk_vectors.setdefault(pair, encoders[pair].encode(texts))

    print("\n".join(cpu_lines(args, model)) + " (before the timed rounds)", flush=True)
    loads_before = load_average()
    times, loads = timed_with_load(args.rounds, {pair: (lambda pair=pair: encode(pair)) for pair in pairs})
    unit_docs = [c.doc_id for c in chunks]
    reference = pairs[0]
    drift, per_query = {}, {}
    for pair in pairs:
        drift[pair] = mine = encoded(encoders[pair], chunk_vectors[pair], [q.text for q in queries])
        per_query[pair] = doc_ndcg10(mine[1], mine[0], unit_docs, queries, dataset.qrels)
    rows, measured = [], []
    for pair in pairs:
        runs_in = computes_in(pair[0], encoders[pair].onnx.precision if encoders[pair].onnx is not None else "f32")
        row = tuning.drift_row(pair, runs_in, drift[pair], drift[reference], len(texts) / times[pair],
                               len(texts) / times[reference], prepare_s[pair])
        measured.append(row)
        rows.append({**asdict(row), "label": label(pair), "chunks": len(texts), "seconds": times[pair],
                     "load_1min": loads[pair], **accuracy_row(per_query[pair], per_query[reference])})
    if args.scifact:
        scifact_rows(args, pairs, encoders, rows)
    table = tuning.Tuning(model, {}, label(reference), measured, {"source": str(set_dir), "passages": len(texts)},
                          0.0, "", load_average())
    gate = DriftGate()
    exact, fast = choice.choose(table, "exact", gate), choice.choose(table, "fast", gate)
    print(format_table(*corpus_table(args, rows, measured, exact, fast, gate)))
    ok = [r for r in rows if r["label"] != label(reference) and r["ci_low"] > -0.005
          and (not args.scifact or r["scifact_ci_low"] > -0.005)]
    best = max(ok, key=lambda r: r["chunks_per_s"])["label"] if ok else label(reference)
    print(f"\nFrom this table: exact runs {exact.label}, fast runs {fast.label} (drift gate: top-10 overlap >= "
          f"{gate.min_overlap:g} in a batch and alone, cosine error <= {gate.max_cosine_error:g}); the fastest "
          f"backend whose doc nDCG@10 interval stays above -0.005: {best}. {kept_choice_line(model)}. load: the "
          f"highest 1-minute load average right after the backend's timed rounds; ratios need a quiet machine. "
          f"Load average now {load_average()}")
    write_json("encoding-corpus", {"corpus": str(folder), "set": str(set_dir), "model": model,
                                   "questions": len(queries), "chunks": len(texts), "rounds": args.rounds,
                                   "cpu": {"model": cpu_model(), "flags": sorted(cpu_features().flags),
                                           "emulated": args.cpu},
                                   "load_before": loads_before, "load_after": load_average(),
                                   "exact": exact.label, "fast": fast.label, "best_within_0.005": best,
                                   "gate": gate.model_dump(), "results": rows})


def scifact_rows(args, pairs, encoders, rows) -> None:
    """The drift and doc nDCG@10 of each backend on ``--scifact`` SciFact test claims over their abstracts and
    others (up to 2,000), into ``rows`` as ``scifact_*``."""
    scifact = load_dataset(DatasetConfig(name="scifact"))
    claims, abstracts = sample(scifact, args.scifact, 2000)
    vectors = {pair: encoded(encoders[pair], [x.text for x in abstracts], [x.text for x in claims]) for pair in pairs}
    reference = pairs[0]
    ndcg = {pair: doc_ndcg10(v[1], v[0], [x.doc_id for x in abstracts], claims, scifact.qrels)
            for pair, v in vectors.items()}
    for row, pair in zip(rows, pairs):
        drift = tuning.drift_row(pair, row["computes_in"], vectors[pair], vectors[reference], 1.0, 1.0, 0.0)
        row.update({f"scifact_{k}": v for k, v in accuracy_row(ndcg[pair], ndcg[reference]).items()})
        row.update(scifact_overlap_mean=drift.overlap_mean, scifact_alone_overlap_mean=drift.alone_overlap_mean,
                   scifact_cosine_error_mean=drift.cosine_error_mean)


def interval(r: dict, prefix: str = "") -> str:
    return (f"{r[prefix + 'ndcg_at_10']:.4f} ({r[prefix + 'ndcg_diff']:+.4f} [{r[prefix + 'ci_low']:+.4f}, "
            f"{r[prefix + 'ci_high']:+.4f}])")


def corpus_table(args, rows, measured, exact, fast, gate) -> tuple[list[str], list[list[str]]]:
    """The corpus benchmark's table: speed, drift and the labelled difference side by side, per backend."""
    headers = ["backend", "computes in", "chunks/s", "vs torch", "load", "prepare s", "cosine error",
               "top-10 overlap (alone)", "drift gate", "doc nDCG@10 (vs torch [95%])"]
    headers += ["SciFact overlap (alone)", "SciFact nDCG@10 (vs torch [95%])"] if args.scifact else []
    table = []
    for r, m in zip(rows, measured):
        marks = [name for name, c in (("exact", exact), ("fast", fast)) if c.row == m]
        status = "exact" if choice.is_exact(m) else "within" if choice.gate_problem(m, gate) is None else "beyond"
        table.append([r["label"] + (f" [{', '.join(marks)}]" if marks else ""), m.computes_in,
                      f"{m.chunks_per_s:.1f}", f"{m.speedup:.2f}x", f"{r['load_1min']:.2f}", f"{m.prepare_s:.0f}",
                      f"{m.cosine_error_mean:.1e}", f"{m.overlap_mean:.3f} ({m.alone_overlap_mean:.3f})", status,
                      interval(r)]
                     + ([f"{r['scifact_overlap_mean']:.3f} ({r['scifact_alone_overlap_mean']:.3f})",
                         interval(r, "scifact_")] if args.scifact else []))
    return headers, table


def kept_choice_line(model: str) -> str:
    """What the run's own choice is on this machine: the kept tuning (kbench models tune), if any."""
    kept = tuning.stored_tuning(model)
    if kept is None:
        emulated = " under this emulation" if any(os.environ.get(k) for k in AVX2_ENV) else ""
        return f"This machine has no kept tuning of {model}{emulated} (a run tunes first)"
    gate = DriftGate()
    return (f"This machine's kept tuning ({kept.created[:10]}): exact runs {choice.choose(kept, 'exact', gate).label}, "
            f"fast {choice.choose(kept, 'fast', gate).label}")


def calibrated_encoder(config: EmbeddingConfig, texts: list[str]):
    """``load_encoder`` with exports in the workspace's cache; a backend calibrated on the corpus
    (openvino-int8) calibrated on ``texts``, as a run calibrates on its chunks."""
    encoder = load_encoder(config, exports=exports_dir(workspace_dir() / "cache"))
    if getattr(encoder, "needs_calibration", False):
        encoder.calibrate(texts)
        encoder.encode(texts[:1])  # builds the int8 model now, not inside the first timed round
    return encoder


def bench_transformer(args, model: str, texts, query_texts, queries, docs, qrels, rounds: int, backends, results):
    print(f"\n== {model}: {len(texts)} abstracts, {rounds} interleaved rounds ==", flush=True)
    print("\n".join(cpu_lines(args, model)), flush=True)
    encoders = {b: calibrated_encoder(backend_config(args, model, b), texts) for b in backends}
    times, loads = timed_with_load(rounds, {b: (lambda e=e: e.encode(texts)) for b, e in encoders.items()})
    base = times["torch"]
    for b in backends:
        # OpenVINO picks bf16 on a CPU with bf16 instructions (embedding.precision: auto): the row says so
        runs_in = computes_in(b, encoders[b].onnx.precision if encoders[b].onnx is not None else "f32")
        results.append({"model": model, "backend": b, "computes_in": runs_in, "dimension": encoders[b].dimension,
                        "passages_per_s": len(texts) / times[b], "speedup_vs_torch": base / times[b],
                        "load_1min": loads[b], "cpu_flags": cpu_features().describe(), "emulated": args.cpu})
        print(f"{b:10s} {len(texts) / times[b]:8.1f} passages/s  {base / times[b]:.2f}x torch ({runs_in}; load "
              f"{loads[b]:.2f})", flush=True)
    mine = [r for r in results if r["model"] == model]
    for row, b in zip(mine, backends):
        row["query_p50_ms"] = p50_ms(lambda t, e=encoders[b]: e.encode([t], for_queries=True), query_texts)
        all_threads = calibrated_encoder(backend_config(args, model, b, query_threads=None), texts)
        row["query_p50_ms_all_threads"] = p50_ms(lambda t, e=all_threads: e.encode([t], for_queries=True),
                                                 query_texts)
        print(f"{b:10s} query p50 {row['query_p50_ms']:.1f} ms (query_threads 1), "
              f"{row['query_p50_ms_all_threads']:.1f} ms (runtime default threads)", flush=True)
    for row, b in zip(mine, backends):
        row["ndcg_at_10_sample"] = ndcg10(encoders[b], queries, docs, qrels) if queries else None
        if row["ndcg_at_10_sample"] is not None:
            print(f"{b:10s} nDCG@10 (sample) {row['ndcg_at_10_sample']:.4f}", flush=True)
    print(format_table(["backend", "computes in", "passages/s", "vs torch", "load", "query p50 ms",
                        "query p50 ms, all threads", "nDCG@10 (sample)"],
                       [[r["backend"], r["computes_in"], f"{r['passages_per_s']:.1f}", f"{r['speedup_vs_torch']:.2f}x",
                         f"{r['load_1min']:.2f}", f"{r['query_p50_ms']:.1f}", f"{r['query_p50_ms_all_threads']:.1f}",
                         "-" if r["ndcg_at_10_sample"] is None else f"{r['ndcg_at_10_sample']:.4f}"] for r in mine]))
    print(f"load average now {load_average()}")


def bench_overhead(model: str, texts, rounds: int) -> dict:
    """kbench's indexing path (cold cache) vs the bare library call on the same texts."""
    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(str(resolve_model_path(model)), device="cpu", local_files_only=True)
    embedder = CachedEmbedder(EmbeddingConfig(model=model, backend="torch"),
                              Path(tempfile.gettempdir()) / "kbench-unused")

    def through_kbench():
        with tempfile.TemporaryDirectory() as tmp:  # cold cache every round: every text is encoded
            embedder.cache = EmbeddingCache(Path(tmp), embedder.fingerprint)
            embedder.embed(texts)

    times = interleaved_best(rounds, {
        "bare SentenceTransformer.encode": lambda: bare.encode(texts, batch_size=64, convert_to_numpy=True),
        "kbench CachedEmbedder.embed (torch)": through_kbench,
    })
    bare_t, ours = times["bare SentenceTransformer.encode"], times["kbench CachedEmbedder.embed (torch)"]
    print(f"pipeline overhead: kbench {ours:.2f}s vs bare {bare_t:.2f}s = {100 * (ours / bare_t - 1):+.1f}% "
          f"(load average {load_average()})")
    return {"bare_s": bare_t, "kbench_s": ours, "overhead_pct": 100 * (ours / bare_t - 1)}


def bench_changes(model: str, texts, rounds: int) -> dict:
    """Each change alone, on ONNX Runtime: length-sorted batches, int8, threads, OpenVINO."""
    shuffled = list(texts)
    random.Random(1).shuffle(shuffled)
    fp32 = load_encoder(EmbeddingConfig(model=model, backend="onnx"))
    one = load_encoder(EmbeddingConfig(model=model, backend="onnx", threads=1))
    int8 = load_encoder(EmbeddingConfig(model=model, backend="onnx-int8"))
    batch = fp32.config.batch_size

    def unsorted():  # batches in arrival order: each pads to its longest text
        for i in range(0, len(shuffled), batch):
            fp32.encode(shuffled[i : i + batch])

    times = interleaved_best(rounds, {
        "onnx, batches in arrival order": unsorted,
        "onnx, length-sorted batches": lambda: fp32.encode(shuffled),
        "onnx, 1 thread": lambda: one.encode(shuffled),
        "onnx-int8": lambda: int8.encode(shuffled),
    })
    ref = times["onnx, length-sorted batches"]
    rows = [[name, f"{t:.2f}", f"{times['onnx, batches in arrival order'] / t:.2f}x"] for name, t in times.items()]
    print(f"\nwhat each change buys (same texts, shuffled; CPU flags {cpu_features().describe()}, load average "
          f"{load_average()}):")
    print(format_table(["variant", "seconds", "vs arrival-order batches"], rows))
    return {"seconds": times, "length_sorting_speedup": times["onnx, batches in arrival order"] / ref,
            "two_threads_vs_one": times["onnx, 1 thread"] / ref, "int8_vs_fp32": ref / times["onnx-int8"]}


def bench_light(texts, queries, docs, qrels, rounds: int, results) -> None:
    configs = {
        "paraphrase-MiniLM-L3-v2 (onnx)": EmbeddingConfig(model="paraphrase-MiniLM-L3-v2", backend="onnx"),
        "wordllama-l2-supercat": EmbeddingConfig(model="wordllama-l2-supercat", provider="static"),
        "wordllama-l2-supercat dim 64": EmbeddingConfig(model="wordllama-l2-supercat", provider="static", dimension=64),
        "tokenlearn-static-64": EmbeddingConfig(model="tokenlearn-static-64", provider="static"),
    }
    encoders = {name: load_encoder(c) for name, c in configs.items()}
    times = interleaved_best(rounds, {n: (lambda e=e: e.encode(texts)) for n, e in encoders.items()})
    rows = []
    for name, e in encoders.items():
        score = ndcg10(e, queries, docs, qrels) if queries else None
        results.append({"model": name, "backend": configs[name].backend if configs[name].provider != "static"
                        else "static", "dimension": e.dimension, "passages_per_s": len(texts) / times[name],
                        "ndcg_at_10_sample": score})
        rows.append([name, e.dimension, f"{len(texts) / times[name]:.1f}", "-" if score is None else f"{score:.4f}"])
    print("\n== light models ==")
    print(format_table(["model", "dim", "passages/s", "nDCG@10 (sample)"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    parser.add_argument("--skip-light", action="store_true", help="no static / paraphrase-MiniLM-L3 models")
    parser.add_argument("--passages", type=int, default=128, help="abstracts timed per backend (MiniLM)")
    parser.add_argument("--mpnet-passages", type=int, default=32, help="abstracts timed per backend (mpnet)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--query-count", type=int, default=30, help="single queries timed for the p50")
    parser.add_argument("--ndcg-queries", type=int, default=100)
    parser.add_argument("--ndcg-docs", type=int, default=500)
    parser.add_argument("--mpnet-ndcg-docs", type=int, default=200)
    parser.add_argument("--corpus", metavar="FOLDER", help="a folder of documents: speed and heading-set accuracy "
                                                            "of every backend on it (see the module doc)")
    parser.add_argument("--set", metavar="DIR", help="--corpus: a question set built from the folder (default: "
                                                     "build a heading set)")
    parser.add_argument("--questions", type=int, default=200, help="--corpus: heading questions to build")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-documents", type=int, default=None, help="--corpus: the questions' documents and "
                                                                        "a seeded sample up to this many")
    parser.add_argument("--limit", type=int, default=None, help="--corpus: the first N chunks only")
    parser.add_argument("--backends", default=None, help="--corpus: a comma-separated subset (default: all)")
    parser.add_argument("--scifact", type=int, default=0, help="--corpus: also nDCG@10 on N SciFact test claims")
    parser.add_argument("--chunker", default="recursive", help="--corpus/--set: the chunking strategy")
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--chunk-overlap", type=int, default=200)
    parser.add_argument("--cpu", choices=["native", *EMULATED_CPUS], default="native",
                        help="avx2: emulate an AVX2-only CPU on this one (see EMULATION_NOTE: what it does not cap)")
    args = parser.parse_args()
    emulate(args.cpu)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.corpus or args.set:
        bench_corpus(args)
        return

    dataset = load_dataset(DatasetConfig(name="scifact"))
    pool = sorted(dataset.documents, key=lambda d: d.doc_id)
    random.Random(0).shuffle(pool)
    query_texts = [q.text for q in dataset.queries[: args.query_count]]
    results: list[dict] = []
    payload: dict = {"sample": {"passages": args.passages, "ndcg_queries": args.ndcg_queries,
                                "ndcg_docs": args.ndcg_docs, "mpnet_ndcg_docs": args.mpnet_ndcg_docs,
                                "mpnet_passages": args.mpnet_passages, "rounds": args.rounds}}
    for model in filter(None, args.models.split(",")):
        if CATALOGUE[model].locate() is None:
            print(f"\n{model}: not installed, skipped ({CATALOGUE[model].install})")
            continue
        mpnet = "mpnet" in model
        n = args.mpnet_passages if mpnet else args.passages
        texts = [d.text for d in pool[:n]]
        queries, docs = sample(dataset, args.ndcg_queries, args.mpnet_ndcg_docs if mpnet else args.ndcg_docs)
        backends = [b for b in TRANSFORMER_BACKENDS if b in CATALOGUE[model].backends]  # mpnet: no int8
        bench_transformer(args, model, texts, query_texts, queries, docs, dataset.qrels, args.rounds, backends,
                          results)
        payload.setdefault("pipeline_overhead", {})[model] = bench_overhead(model, texts, args.rounds)
        if not mpnet:
            payload["changes"] = bench_changes(model, texts, args.rounds)
        write_json("encoding", {**payload, "results": results})  # what is measured so far survives a stop
    if args.skip_light:
        return
    queries, docs = sample(dataset, args.ndcg_queries, args.ndcg_docs)
    bench_light([d.text for d in pool[: args.passages * 4]], queries, docs, dataset.qrels, args.rounds, results)
    payload["results"] = results
    write_json("encoding", payload)


if __name__ == "__main__":
    main()
