"""Plain-text tables for the terminal."""
from __future__ import annotations

import math
import re

from kbench import compare
from kbench.cli.ui_cmd import browse_hint
from kbench import embedding

SLOW_EMBED_S = 30  # a torch embedding stage this long gets the hint below: a faster backend would pay off
# Files of a dataset's documents a loader left out (kbench/sources/loaders.py), as a person reads the reason
SKIPPED_FILES = {"binary": "binary", "undecodable": "not UTF-8 (Latin-1 or another encoding)",
                 "oversized": "over dataset.max_file_bytes", "empty": "empty", "unreadable": "unreadable",
                 "not_documentation": "not documentation"}
SHOWN_FILES = 3


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


DECIMALS = 4  # every float in every table: metrics, means, seconds alike


def column_decimals(values: list[object]) -> int:
    """Four decimals for a column of floats (0.6123, 462.9175), none when every value is whole (a count logged as
    a float, 488.0, prints 488)."""
    floats = [abs(v) for v in values if isinstance(v, float) and math.isfinite(v)]
    if not floats or all(v == round(v) for v in floats):
        return 0
    return DECIMALS


def format_number(value: object, decimals: int) -> str:
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.{decimals}f}"
    return str(value)


def format_table(headers: list[str], rows: list[list[object]], numeric: list[bool] | None = None,
                 decimals: int | None = None) -> str:
    """Numbers right-aligned, floats at four decimals (a column of whole values without; ``decimals`` sets every
    float column, e.g. 4 for metrics that happen to be whole), NaN as "–"; text left-aligned. ``numeric``
    right-aligns columns of pre-formatted numbers (e.g. "0.61 *")."""
    places = [decimals if decimals is not None else column_decimals([row[i] for row in rows])
              for i in range(len(headers))]
    cells = [[format_number(c, places[i]) for i, c in enumerate(row)] for row in rows]
    if numeric is None:
        numeric = [bool(rows) and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
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
    return format_table([f"{level}-level", *(f"@{k}" for k in ks)], rows, decimals=DECIMALS)


def diagnosis_lines(metrics: dict[str, float], budget_tokenizer: str | None = None) -> list[str]:
    """Where the relevant items ended (miss_share_*, non-zero only), the oracle ceilings at nDCG@10 (or the
    largest k) and recall at each token budget, with the tokenizer that counted them (``budget_tokenizer``: the
    config's evaluation.budget_tokenizer); nothing for what the run did not compute."""
    lines = []
    shares = {k.removeprefix("miss_share_"): v for k, v in metrics.items() if k.startswith("miss_share_") and v > 0}
    if shares:
        lines.append("where relevant items ended: " + ", ".join(f"{k} {v:.4f}" for k, v in shares.items()))
    for level in ("chunk", "doc"):
        runs = sorted((int(k.rsplit("_", 1)[1]), k) for k in metrics
                      if k.startswith(f"ceiling_{level}_rerank_ndcg_at_"))
        if runs:
            k = 10 if any(n == 10 for n, _ in runs) else runs[-1][0]
            lines.append(f"{level} nDCG@{k}: run {metrics.get(f'{level}_ndcg_at_{k}', float('nan')):.4f}, "
                         f"perfect rerank {metrics[f'ceiling_{level}_rerank_ndcg_at_{k}']:.4f}, "
                         f"perfect fusion {metrics[f'ceiling_{level}_pool_ndcg_at_{k}']:.4f} "
                         f"(pool recall {metrics[f'ceiling_{level}_pool_recall']:.4f})")
            break
    for name in ("span_recall", "doc_recall"):
        budgets = sorted((int(k.rsplit("_", 1)[1]), v) for k, v in metrics.items()
                         if k.startswith(f"{name}_at_budget_"))
        if budgets:
            lines.append(f"{name} at a token budget: " + ", ".join(f"{n} {v:.4f}" for n, v in budgets))
    if any("_at_budget_" in k for k in metrics):
        from kbench.evaluation.budgets import budget_words

        lines.append(f"  budget tokens {budget_words(budget_tokenizer)}")
    return ([""] + lines) if lines else []


LLM_COUNTERS = ("requests", "cache_hits", "retries", "failures", "unusable_answers", "prompt_tokens",
                "completion_tokens", "cost_usd", "partial")


def llm_usage_lines(metrics: dict[str, float]) -> list[str]:
    """One line per LLM stage of the run (``llm_<stage>_<counter>`` metrics): requests, cache hits, tokens, and
    the answers lost (failed requests, answers the stage could not use) said out loud, never only in MLflow."""
    stages: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        if not key.startswith("llm_") or key.startswith("llm_total_"):
            continue
        counter = next((c for c in LLM_COUNTERS if key.endswith(f"_{c}")), None)
        if counter is not None:
            stages.setdefault(key[4:-len(counter) - 1], {})[counter] = value
    lines = []
    for stage, c in sorted(stages.items()):
        line = (f"LLM {stage}: {c.get('requests', 0):.0f} requests, {c.get('cache_hits', 0):.0f} cached, "
                f"{c.get('retries', 0):.0f} retries, {c.get('prompt_tokens', 0):.0f} prompt + "
                f"{c.get('completion_tokens', 0):.0f} completion tokens")
        if c.get("cost_usd"):
            line += f", ${c['cost_usd']:.4f}"
        lost = [f"{c[n]:.0f} {label}" for n, label in (("failures", "failed requests"),
                                                        ("unusable_answers", "unusable answers")) if c.get(n)]
        if lost:
            line += f"; WARNING: {', '.join(lost)} (the stage fell back for those; see llm_{stage}_*)"
        if c.get("partial"):
            line += ("; PARTIAL: went on below llm.policy.min_usable (allow_partial): its numbers rest on the "
                     "usable answers only (tag kbench.llm.partial)")
        lines.append(line)
    return lines


def faster_backend_hint(section, stage_seconds: dict[str, float]) -> str | None:
    """One line telling a run that spent long embedding on torch what ``fast`` runs instead on this machine, with
    its figures measured here (kbench/embedding/choice.py), or None."""
    seconds = stage_seconds.get("embed", 0.0)
    return embedding.choice.faster_backend_hint(section, seconds) if seconds >= SLOW_EMBED_S else None


def backend_line(section) -> str | None:
    """Which backend a local transformer ran on and why, with this machine's measurements (a saved config may say
    ``exact``); None for static and API models."""
    return embedding.choice.backend_line(section)


def language_line(per_query) -> str | None:
    """``doc_ndcg_at_10 per language: fr 0.4100 (40 questions), en 0.7500 (38)``, when the run split its questions
    by language (``slice_language``: two or more languages, each a meaningful share; kbench.pipeline)."""
    if per_query is None or "slice_language" not in per_query:
        return None
    metric = compare.compare.headline_metric(per_query.columns)
    if metric is None:
        return None
    grouped = per_query.groupby("slice_language")[metric].agg(["mean", "size"]).sort_values("size", ascending=False)
    parts = [f"{code} {row['mean']:.4f} ({int(row['size'])}{' questions' if i == 0 else ''})"
             for i, (code, row) in enumerate(grouped.iterrows())]
    return f"{metric} per language: " + ", ".join(parts)


def skipped_line(skipped: dict[str, list[str]]) -> str | None:
    """``skipped 2 files of the dataset's documents: 1 binary (docs/blob.md), 1 not UTF-8 ... (docs/x.md); ...``:
    what a run did not index and why (the run keeps the counts as count_skipped_<reason>), or None."""
    files = {reason: paths for reason, paths in skipped.items() if reason in SKIPPED_FILES and paths}
    if not files:
        return None
    parts = [f"{len(paths)} {SKIPPED_FILES[reason]} ({', '.join(paths[:SHOWN_FILES])}"
             f"{', ...' if len(paths) > SHOWN_FILES else ''})" for reason, paths in sorted(files.items())]
    count = sum(len(paths) for paths in files.values())
    fix = "; save them as UTF-8 to index them" if "undecodable" in files else ""
    return (f"skipped {count} file{'s' if count > 1 else ''} of the dataset's documents, not indexed: "
            f"{'; '.join(parts)}{fix} (counted as count_skipped_<reason>)")


def print_metrics(result) -> None:
    print()
    total = result.counts.get("documents_total")
    documents = (f"{result.counts.get('documents')} of {total} documents (dataset.max_documents)" if total
                 else f"{result.counts.get('documents')} documents")
    print(f"experiment {result.experiment.name}: {result.counts.get('queries')} queries, {documents}, "
          f"{result.counts.get('chunks')} chunks")
    line = skipped_line(result.dataset.skipped if result.dataset is not None else {})
    if line:
        print(line)
    for level in ("doc", "chunk", "span"):
        table = metrics_table(result.metrics, level)
        if table:
            print()
            print(table)
    for line in diagnosis_lines(result.metrics, result.experiment.evaluation.budget_tokenizer):
        print(line)
    line = language_line(result.per_query)
    if line:
        print(line)
    print()
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stage_seconds.items())
    print(f"stage wall time: {stages}")
    for line in (backend_line(result.experiment.embedding),
                 faster_backend_hint(result.experiment.embedding, result.stage_seconds)):
        if line:
            print(line)
    for line in llm_usage_lines(result.metrics):
        print(line)
    lat = {k: v for k, v in result.metrics.items() if k.startswith("latency_ms_total")}
    if lat:
        print("query latency (ms): " + ", ".join(f"{k.rsplit('_', 1)[1]} {v:.2f}" for k, v in lat.items()))
    print(f"results: {result.run_dir}")
    if result.run_id:
        print(f"MLflow run {result.run_id} in {result.tracking_uri} (experiment {result.experiment.tracking.experiment!r})")
        print(f"  browse: {browse_hint(result.tracking_uri)}   (MLflow's UI on http://127.0.0.1:5000)")
