"""What a person reads on a run's MLflow page, written into the run folder so MLflow receives it with the rest.

``plots/metrics_by_k.png`` (each metric against k, per level), ``plots/latency_per_stage.png`` (wall seconds
per stage, query latency percentiles) and ``plots/per_query_distribution.png`` (a histogram of the headline
metric over queries); and ``per_query_results.json``, one row per question: its headline scores, the rank of its
first relevant hit, where a relevant item was lost (``miss_stage``), its text, the top hit's document and text,
the references, then every metric at every k, in MLflow's table format (``log_table``'s JSON), so the
run page's artifact viewer and the experiment's Evaluation view show it. ``MLFLOW_TABLE_TAG`` is the tag that
makes MLflow list it as a table.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from kbench.records import Chunk, Dataset, Run

RESULTS_TABLE = "per_query_results.json"
PLOTS_DIR = "plots"
MLFLOW_TABLE_TAG = "mlflow.loggedArtifacts"  # MLflow's own tag: [{"path": ..., "type": "table"}]
TEXT_CHARS = 400  # of a question's top hit, in the table
LEVELS = ("chunk", "doc", "span")  # finest first: the headline is read at the finest level present
METRIC_COLUMN = re.compile(r"^(doc|chunk|span)_([a-z_]+?)_at_(\d+)$")
METRIC_ORDER = ("precision", "recall", "mrr", "ndcg", "map", "hit_rate", "iou")  # rows of a run's description


def headline_columns(columns) -> list[str]:
    """nDCG and recall at 10 (else the largest k) of the finest level present, e.g. chunk_ndcg_at_10."""
    found: dict[tuple[str, str], list[int]] = {}
    for name in columns:
        if m := METRIC_COLUMN.match(name):
            found.setdefault((m.group(1), m.group(2)), []).append(int(m.group(3)))
    for level in LEVELS:
        picked = []
        for metric in ("ndcg", "recall"):
            ks = found.get((level, metric))
            if ks:
                k = 10 if 10 in ks else max(ks)
                picked.append(f"{level}_{metric}_at_{k}")
        if picked:
            return picked
    return []


def results_table(per_query: pd.DataFrame, dataset: Dataset | None, chunks: list[Chunk], run: Run | None) -> pd.DataFrame:
    """One row per question: id, its headline scores, the first relevant rank, the miss stage, the question, the top
    hit's document and text, the references, then every ``<level>_<metric>_at_<k>`` of the question."""
    questions = {q.query_id: q.text for q in dataset.queries} if dataset else {}
    texts = {c.chunk_id: c.text for c in chunks}
    scores = headline_columns(per_query.columns)
    every_metric = [c for c in per_query.columns if METRIC_COLUMN.match(c) and c not in scores]
    rows = []
    for record in per_query.to_dict("records"):
        qid = str(record["query_id"])
        hits = run.hits.get(qid, []) if run is not None else []
        top = hits[0] if hits else None
        rows.append({  # the headline scores first: MLflow's Evaluation view compares runs on the first column
            "query_id": qid,
            **{name: _rounded(record[name]) for name in scores},
            "first_relevant_rank": first_relevant_rank(record, dataset.qrels.get(qid) if dataset else None, run),
            "miss_stage": _miss_stage(record.get("miss_stage")),
            "question": questions.get(qid, ""),
            "top_doc_id": top.doc_id if top else "",
            "top_hit": _clip(texts.get(top.chunk_id, "")) if top else "",
            "references": ", ".join(_references(dataset, qid)),
            **{name: _rounded(record[name]) for name in every_metric},
        })
    return pd.DataFrame(rows)


def first_relevant_rank(record: dict, grades: dict[str, int] | None, run: Run | None) -> int | None:
    """The rank of a question's first relevant hit at the finest level scored: a chunk hitting a reference span
    (span datasets: ``spans_hit``, within the largest k scored, under evaluation.overlap), else a document that
    ``grades`` (the question's qrels) grades above 0, anywhere in the ranking; None when there is none."""
    spans_hit = record.get("spans_hit")
    if spans_hit is not None and not (isinstance(spans_hit, float) and spans_hit != spans_hit):
        found = [int(r) for r in spans_hit if int(r) > 0]
        return min(found) if found else None
    if not grades or run is None:
        return None
    return next((rank for rank, doc in enumerate(run.doc_ids(str(record["query_id"])), start=1)
                 if grades.get(doc, 0) > 0), None)


def _miss_stage(value) -> str:
    """Where each relevant item of a question ended (hit, right_doc_wrong_chunk, lost at fusion, ...)."""
    if value is None or isinstance(value, float):
        return ""
    return ", ".join(str(v) for v in value)


def _rounded(value) -> float | None:
    return None if value is None or value != value else round(float(value), 4)


def _references(dataset: Dataset | None, qid: str) -> list[str]:
    if dataset is None:
        return []
    if dataset.spans.get(qid):
        return [f"{s.doc_id}[{s.start}:{s.end}]" for s in dataset.spans[qid]]
    return sorted(dataset.qrels.get(qid, {}))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"


def write_results_table(folder: Path, table: pd.DataFrame) -> Path:
    """MLflow's table JSON (pandas "split" orient, as ``MlflowClient.log_table`` writes it)."""
    path = folder / RESULTS_TABLE
    table.to_json(path, orient="split", index=False, force_ascii=False)
    return path


def table_tags(run_dir: Path | None) -> dict[str, str]:
    """The tag that makes MLflow list the run folder's results table as a table (Evaluation view)."""
    if run_dir is None or not (run_dir / RESULTS_TABLE).is_file():
        return {}
    return {MLFLOW_TABLE_TAG: json.dumps([{"path": RESULTS_TABLE, "type": "table"}])}


def write_plots(folder: Path, metrics: dict[str, float], stage_seconds: dict[str, float],
                per_query: pd.DataFrame) -> list[Path]:
    """The run's three plots as PNG files under ``folder/plots``; a plot with nothing to show is left out.

    Figures are made without pyplot (``Figure`` draws with Agg on its own): switching pyplot's backend here would
    stop a notebook that runs kbench from showing its own charts."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import ScalarFormatter

    out = folder / PLOTS_DIR  # made by the first plot saved
    written = []
    by_level: dict[str, dict[str, dict[int, float]]] = {}
    for name, value in metrics.items():
        if (m := METRIC_COLUMN.match(name)) and value == value:
            by_level.setdefault(m.group(1), {}).setdefault(m.group(2), {})[int(m.group(3))] = value
    levels = [level for level in LEVELS if level in by_level]
    if levels:
        fig = Figure(figsize=(4.2 * len(levels), 3.4))
        axes = fig.subplots(1, len(levels), squeeze=False, sharey=True)
        for ax, level in zip(axes[0], levels):
            for metric, points in sorted(by_level[level].items()):
                ks = sorted(points)
                ax.plot(ks, [points[k] for k in ks], marker="o", label=metric)
            ax.set_title(f"{level} level")
            ax.set_xlabel("k")
            ax.set_xscale("log")
            ax.set_xticks(sorted({k for points in by_level[level].values() for k in points}))
            ax.get_xaxis().set_major_formatter(ScalarFormatter())
            ax.set_ylim(0, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")  # away from the lines (precision falls, recall rises with k)
        axes[0][0].set_ylabel("score")
        fig.suptitle("metrics by k")
        written.append(_save(fig, out / "metrics_by_k.png"))
    latency = {name[len("latency_ms_"):]: per_query[name].dropna() for name in per_query.columns
               if name.startswith("latency_ms_") and per_query[name].notna().any()}
    if stage_seconds or latency:
        fig = Figure(figsize=(10 if latency else 5, 3.4))
        axes = fig.subplots(1, 2 if latency else 1, squeeze=False)
        names = list(stage_seconds)
        axes[0][0].barh(names, [stage_seconds[n] for n in names], color="#4c72b0")
        axes[0][0].invert_yaxis()
        axes[0][0].set_xlabel("wall seconds")
        axes[0][0].set_title("time per stage")
        if latency:
            ax = axes[0][1]
            parts = list(latency)
            p50 = [float(latency[p].quantile(0.5)) for p in parts]
            p95 = [float(latency[p].quantile(0.95)) for p in parts]
            y = range(len(parts))
            ax.barh([i + 0.2 for i in y], p50, height=0.4, label="p50")
            ax.barh([i - 0.2 for i in y], p95, height=0.4, label="p95")
            ax.set_yticks(list(y), parts)
            ax.invert_yaxis()
            ax.set_xlabel("milliseconds per query")
            ax.set_title("query latency per step")
            ax.legend(fontsize=7)
        written.append(_save(fig, out / "latency_per_stage.png"))
    headline = headline_columns(per_query.columns)
    if headline:
        fig = Figure(figsize=(4.2 * len(headline), 3.2))
        axes = fig.subplots(1, len(headline), squeeze=False)
        for ax, name in zip(axes[0], headline):
            values = per_query[name].dropna()
            ax.hist(values, bins=[i / 10 for i in range(11)], color="#55a868", edgecolor="white")
            ax.set_xlabel(name)
            ax.set_ylabel("queries")
            ax.set_title(f"mean {values.mean():.4f} over {len(values)} queries", fontsize=9)
        fig.suptitle("per-query distribution")
        written.append(_save(fig, out / "per_query_distribution.png"))
    return written


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)  # readable at the width MLflow's artifact viewer shows
    return path


def describe_run(description: str, metrics: dict[str, float]) -> str:
    """A run's MLflow description (markdown): the config's ``description``, then its metrics by level and k at
    four decimals (MLflow's own metric list shows every digit; the logged values stay exact)."""
    grid: dict[tuple[str, str], dict[int, float]] = {}
    for name, value in metrics.items():
        if (m := METRIC_COLUMN.match(name)) and value == value:
            grid.setdefault((m.group(1), m.group(2)), {})[int(m.group(3))] = value
    parts = [description.strip()] if description.strip() else []
    for level in LEVELS:
        # rows in one order however the metrics were ordered (a run folder's metrics.json is sorted by name)
        rows = {metric: points for (lv, metric), points in sorted(grid.items(), key=lambda item: (
            METRIC_ORDER.index(item[0][1]) if item[0][1] in METRIC_ORDER else len(METRIC_ORDER), item[0][1]))
            if lv == level}
        if not rows:
            continue
        ks = sorted({k for points in rows.values() for k in points})
        lines = [f"| {level} level | " + " | ".join(f"@{k}" for k in ks) + " |",
                 "|---|" + "---:|" * len(ks)]
        lines += [f"| {metric} | " + " | ".join(f"{points[k]:.4f}" if k in points else "" for k in ks) + " |"
                  for metric, points in rows.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)[:5000]


def write_notebook_html(notebook: Path) -> Path | None:
    """``NAME.html`` beside an executed notebook (nbconvert, images inline), so MLflow's artifact viewer renders
    it; None when it cannot be converted (the .ipynb is kept either way)."""
    try:
        import nbformat
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(notebook, as_version=4))
    except Exception:  # a notebook that fails to convert must not fail the run that executed it
        return None
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html
