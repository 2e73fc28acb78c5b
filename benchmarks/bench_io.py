"""What every benchmark shares: timing side by side, and its JSON under experiments/bench/."""
from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from kbench.cli.console import quiet_libraries
from kbench.paths import workspace_dir

# the libraries as `kbench` runs them: no model-loading or artifact-upload bars and no MLflow INFO lines between the
# figures (every benchmark imports this module before it imports a model library)
quiet_libraries()

# The 8-config grid (2 chunkers x 4 retrieval modes) that recommend_regret.py and synthetic_agreement.py both run,
# so their figures are about the same configs
CHUNKERS = {"fixed-400": {"strategy": "fixed", "chunk_size": 400, "chunk_overlap": 0},
            "recursive-1000": {"strategy": "recursive", "chunk_size": 1000, "chunk_overlap": 200}}
MODES = {"vector": {"legs": ["vector"]},
         "bm25": {"legs": ["bm25"]},
         "rrf": {"legs": ["vector", "bm25"], "fusion": {"strategy": "rrf", "k": 60}},
         "weighted": {"legs": ["vector", "bm25"], "fusion": {"strategy": "weighted", "weight": 0.5}}}


def interleaved_best(rounds: int, candidates: dict, *args) -> dict[str, float]:
    """Best wall time per candidate over ``rounds`` rounds, candidates run in turn within each round, so
    load from other processes falls on all of them alike (ratios, not absolute figures, are the result)."""
    best = {name: float("inf") for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            t = time.perf_counter()
            fn(*args)
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def p50_ms(fn, items) -> float:
    times = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def write_json(name: str, payload: dict) -> Path:
    """experiments/bench/<name>.json (or $KBENCH_WORKSPACE/bench/), written by atomic rename."""
    folder = workspace_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                              "load_1min": os.getloadavg()[0]}, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".partial-{name}-", suffix=".json", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, default=float)
    target = folder / f"{name}.json"
    os.replace(tmp, target)
    print(f"\nwrote {target}")
    return target
