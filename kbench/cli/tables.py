"""Plain-text tables for the terminal."""
from __future__ import annotations

import re


def format_table(headers: list[str], rows: list[list[object]]) -> str:
    """Numbers right-aligned (floats to 4 places), text left-aligned."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def metrics_table(metrics: dict[str, float], level: str) -> str | None:
    """One row per metric, one column per k, for ``level`` in doc | chunk | span."""
    pattern = re.compile(rf"^{level}_(\w+?)_at_(\d+)$")
    grid: dict[str, dict[int, float]] = {}
    for key, value in metrics.items():
        m = pattern.match(key)
        if m:
            grid.setdefault(m.group(1), {})[int(m.group(2))] = value
    if not grid:
        return None
    ks = sorted({k for row in grid.values() for k in row})
    rows = [[name, *(grid[name].get(k, float("nan")) for k in ks)] for name in grid]
    return format_table([f"{level}-level", *(f"@{k}" for k in ks)], rows)


def print_metrics(result) -> None:
    print()
    print(f"experiment {result.experiment.name}: {result.counts.get('queries')} queries, "
          f"{result.counts.get('documents')} documents, {result.counts.get('chunks')} chunks")
    for level in ("doc", "chunk", "span"):
        table = metrics_table(result.metrics, level)
        if table:
            print()
            print(table)
    print()
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stage_seconds.items())
    print(f"stage wall time: {stages}")
    lat = {k: v for k, v in result.metrics.items() if k.startswith("latency_ms_total")}
    if lat:
        print("query latency (ms): " + ", ".join(f"{k.rsplit('_', 1)[1]} {v:.2f}" for k, v in lat.items()))
    print(f"results: {result.run_dir}")
    if result.run_id:
        print(f"MLflow run {result.run_id} in {result.tracking_uri} (experiment {result.experiment.tracking.experiment!r})")
        print(f"  browse: mlflow ui --backend-store-uri {result.tracking_uri}")
