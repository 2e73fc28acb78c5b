"""Sweep economy: a 12-config SciFact sweep, cold and warm cache, against embedding its unique texts once.

The sweep is a real ``kbench sweep`` (``run_sweep``: MLflow parent and children, run folders, the
content-addressed caches) over 3 chunkings x 2 retrieval modes x 2 result depths on a SciFact sample
(every judged document plus a seeded sample up to ``--documents``; all 300 test claims). Three timings:

- unique: the sweep's distinct chunk texts, embedded once in one call by the same encoder (model loaded
  beforehand, not timed): the least any sweep of these configs must spend;
- cold: the sweep in a fresh workspace (empty caches; configs sharing a chunking embed its texts once);
- warm: the same 12 configs again as another sweep (new sweep name, ``reuse=False``, so every config runs)
  in the same workspace: chunk and embedding caches are warm.

The ratios cold / unique and warm / unique say what a sweep costs beyond the embedding it cannot avoid.

    .venv/bin/python benchmarks/sweep_economy.py [--documents 1000] [--backend torch]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_io import write_json
from kbench import format_table
from kbench.embedding.stage import load_encoder
from kbench.pipeline import chunked_dataset
from kbench.sweep import expand_sweep, make_executor, run_sweep

CHUNKINGS = [
    {"strategy": "none"},
    {"strategy": "fixed", "chunk_size": 1000, "chunk_overlap": 200},
    {"strategy": "fixed", "chunk_size": 500, "chunk_overlap": 100},
]


def sweep_data(name: str, workspace: Path, documents: int, backend: str) -> dict:
    return {
        "name": name, "workspace": str(workspace),
        "dataset": {"name": "scifact", "max_documents": documents},
        "chunking": CHUNKINGS[0],
        "embedding": {"model": "all-MiniLM-L6-v2", "backend": backend},
        "retrieval": {"legs": ["vector"], "fusion": {"strategy": "rrf", "k": 60}, "top_k": 10, "latency": "batch"},
        "evaluation": {"k": [10]},
        "tracking": {"experiment": name},
        "sweep": {"chunking": CHUNKINGS, "retrieval.legs": [["vector"], ["vector", "bm25"]],
                  "retrieval.top_k": [10, 100]},
    }


def unique_texts(plan) -> list[str]:
    """The distinct texts the sweep's configs embed (chunk texts of each distinct chunking)."""
    seen: dict[str, None] = {}
    done: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for config in plan.configs:
            e = config.experiment
            key = e.chunking.model_dump_json()
            if key in done:
                continue
            done.add(key)
            _, chunks = chunked_dataset(e.dataset, e.chunking, cache_dir=Path(tmp))
            seen.update(dict.fromkeys(e.embedding.document_prefix + c.text for c in chunks))
    return list(seen)


def timed_sweep(plan) -> tuple[float, dict]:
    t = time.perf_counter()
    outcome = run_sweep(plan, make_executor("local"), reuse=False, report=False, say=lambda _: None)
    seconds = time.perf_counter() - t
    if outcome.count("failed"):
        raise SystemExit(f"sweep failed: {outcome.errors}")
    return seconds, outcome.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000,
                        help="SciFact abstracts: every judged one plus a seeded sample up to this many")
    parser.add_argument("--backend", default="torch", choices=["torch", "onnx", "onnx-int8", "openvino"])
    parser.add_argument("--workspace", type=Path, default=None, help="default: a fresh temporary folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="kbench-sweep-economy-"))
    # KBENCH_WORKSPACE overrides a config's workspace: the cold sweep would then meet another run's warm cache
    outer_workspace = os.environ.pop("KBENCH_WORKSPACE", None)

    cold_plan = expand_sweep(sweep_data("economy-cold", workspace, args.documents, args.backend))
    warm_plan = expand_sweep(sweep_data("economy-warm", workspace, args.documents, args.backend))
    assert len(cold_plan.configs) == 12, len(cold_plan.configs)
    texts = unique_texts(cold_plan)
    encoder = load_encoder(cold_plan.baseline.embedding)
    t = time.perf_counter()
    encoder.encode(texts)
    unique_s = time.perf_counter() - t
    print(f"{len(texts)} unique texts over {len(CHUNKINGS)} chunkings, embedded once: {unique_s:.1f} s", flush=True)
    del encoder

    cold_s, _ = timed_sweep(cold_plan)
    print(f"cold sweep (12 configs, empty caches): {cold_s:.1f} s", flush=True)
    warm_s, _ = timed_sweep(warm_plan)
    print(f"warm sweep (12 configs, warm caches): {warm_s:.1f} s", flush=True)

    if outer_workspace is not None:
        os.environ["KBENCH_WORKSPACE"] = outer_workspace  # the JSON goes where the caller's workspace is
    rows = [["embed the unique texts once", f"{unique_s:.1f}", "1.00x"],
            ["cold sweep", f"{cold_s:.1f}", f"{cold_s / unique_s:.2f}x"],
            ["warm sweep", f"{warm_s:.1f}", f"{warm_s / unique_s:.2f}x"]]
    print(f"\n## sweep economy: SciFact, {args.documents} abstracts, 300 claims, MiniLM on {args.backend}\n")
    print(format_table(["", "seconds", "vs unique embedding"], rows))
    write_json("sweep_economy", {
        "sample": {"dataset": "scifact", "max_documents": args.documents, "backend": args.backend,
                   "configs": 12, "unique_texts": len(texts)},
        "unique_embedding_s": unique_s, "cold_sweep_s": cold_s, "warm_sweep_s": warm_s,
        "cold_over_unique": cold_s / unique_s, "warm_over_unique": warm_s / unique_s,
        "target_warm_over_unique": 1.15})


if __name__ == "__main__":
    main()
