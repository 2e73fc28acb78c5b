"""Write a Comparison as report.md + report.html with two kinds of plots (matplotlib, no display needed):

- ``metric_per_config.png``: each metric's mean per config with its bootstrap interval, the baseline as a
  line, significant differences in colour;
- ``per_query_<config>.png``: per-query scores of the baseline against one other config (by default the
  one whose first metric moved most), so one sees whether a gain is broad or a few queries.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from kbench.compare.compare import Comparison

TEST_NAMES = {"t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test", "randomization": "paired randomization test"}


def _fmt(x: float, digits: int = 4) -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def _p(x: float) -> str:
    if x is None or np.isnan(x):
        return "–"
    return "<0.0001" if x < 1e-4 else f"{x:.4f}"


def metric_rows(comparison: Comparison, metric: str) -> list[dict[str, str]]:
    pct = int(round(comparison.confidence * 100))
    out = []
    for _, r in comparison.table[comparison.table["metric"] == metric].iterrows():
        out.append({
            "config": r["config"] + (" (baseline)" if r["baseline"] else ""),
            f"mean [{pct}% CI]": f"{_fmt(r['mean'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
            f"Δ vs baseline [{pct}% CI]": "–" if r["baseline"] else
            f"{r['diff']:+.4f} [{r['diff_ci_low']:+.4f}, {r['diff_ci_high']:+.4f}]",
            "effect size d": _fmt(r["effect_size"], 3),
            "p t-test": _p(r["p_t"]),
            "p Wilcoxon": _p(r["p_wilcoxon"]),
            "p randomization": _p(r["p_randomization"]),
            f"p adj. ({comparison.correction})": _p(r["p_adjusted"]),
            "significant": "**yes**" if r["significant"] else ("" if r["baseline"] else "no"),
            "better/same/worse": "–" if r["baseline"] else f"{r['wins']}/{r['ties']}/{r['losses']}",
        })
    return out


def summary_lines(comparison: Comparison) -> list[str]:
    sig = comparison.significant()
    if sig.empty:
        return [f"No difference to the baseline is significant at α = {comparison.alpha} after "
                f"{comparison.correction} correction."]
    return [f"{r['config']}: {r['metric']} {r['diff']:+.4f} ({r['mean']:.4f} vs baseline "
            f"{r['mean'] - r['diff']:.4f}), adjusted p = {_p(r['p_adjusted'])}, d = {r['effect_size']:.2f}"
            for _, r in sig.sort_values(["metric", "diff"], ascending=[True, False]).iterrows()]


def header_lines(comparison: Comparison) -> list[str]:
    n_tests = int(comparison.table["p_adjusted"].notna().sum())
    lines = [f"Baseline: **{comparison.baseline}**; {len(comparison.runs)} configs, {comparison.n_queries} queries "
             f"paired by query id.",
             f"Significance: {TEST_NAMES[comparison.test]} (two-sided) per metric over queries, "
             f"{comparison.correction} correction over {n_tests} comparisons, α = {comparison.alpha}. "
             f"Intervals: {int(round(comparison.confidence * 100))}% percentile bootstrap over queries. "
             "Effect size: mean difference / standard deviation of the per-query differences (d_z)."]
    if comparison.parent_run_id:
        lines.append(f"Sweep parent run: `{comparison.parent_run_id}` ({comparison.tracking_uri}).")
    return lines + [f"Note: {n}" for n in comparison.notes]


def plot_metric_per_config(comparison: Comparison, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.label for r in comparison.runs]
    n_metrics = len(comparison.metrics)
    fig, axes = plt.subplots(1, n_metrics, figsize=(4.2 * n_metrics, 0.45 * len(labels) + 1.6), sharey=True,
                             squeeze=False)
    for ax, metric in zip(axes[0], comparison.metrics):
        rows = comparison.table[comparison.table["metric"] == metric].set_index("config").loc[labels]
        y = np.arange(len(labels))[::-1]
        colors = ["black" if b else ("tab:green" if s and d > 0 else "tab:red" if s else "tab:gray")
                  for b, s, d in zip(rows["baseline"], rows["significant"], rows["diff"])]
        for yi, (_, r), color in zip(y, rows.iterrows(), colors):
            ax.errorbar(r["mean"], yi, xerr=[[r["mean"] - r["ci_low"]], [r["ci_high"] - r["mean"]]],
                        fmt="none", ecolor=color, capsize=3)
        ax.scatter(rows["mean"], y, c=colors, zorder=3)
        ax.axvline(rows.loc[comparison.baseline, "mean"], color="black", lw=0.8, ls="--")
        ax.set_title(metric, fontsize=10)
        ax.set_yticks(y, labels, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("mean per config with bootstrap CI; green/red = significantly better/worse than baseline (dashed)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_per_query(comparison: Comparison, other: str, metric: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = comparison.scores(comparison.baseline, metric)
    b = comparison.scores(other, metric)
    pairs, counts = np.unique(np.column_stack([a, b]), axis=0, return_counts=True)  # equal points stack up
    fig, ax = plt.subplots(figsize=(4.8, 4.8))
    colors = np.where(pairs[:, 1] > pairs[:, 0], "tab:green", np.where(pairs[:, 1] < pairs[:, 0], "tab:red", "tab:gray"))
    ax.scatter(pairs[:, 0], pairs[:, 1], s=18 * counts, c=colors, alpha=0.6, edgecolors="none")
    lo, hi = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    ax.set_xlabel(f"{comparison.baseline} (baseline)", fontsize=8)
    ax.set_ylabel(other, fontsize=8)
    ax.set_title(f"{metric} per query ({(b > a).sum()} better, {(b == a).sum()} same, {(b < a).sum()} worse)\n"
                 "marker area = number of queries", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _md_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r[h].replace("|", "\\|") for h in head) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(rows: list[dict[str, str]]) -> str:
    frame = pd.DataFrame(rows)
    frame = frame.map(lambda v: v.replace("**", "")) if hasattr(frame, "map") else frame
    return frame.to_html(index=False, escape=True, border=0, classes="kbench")


def write_report(comparison: Comparison, out_dir: str | Path, scatter: str | None = None) -> Path:
    """Write report.md, report.html, comparison.csv and the plots into ``out_dir``; returns the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    comparison.table.to_csv(out / "comparison.csv", index=False)
    plot_metric_per_config(comparison, out / "metric_per_config.png")
    first = comparison.metrics[0]
    others = comparison.table[(comparison.table["metric"] == first) & ~comparison.table["baseline"]]
    if scatter is None and not others.empty:
        scatter = others.loc[others["diff"].abs().idxmax(), "config"]
    scatter_file = None
    if scatter is not None:
        safe = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in scatter)
        scatter_file = f"per_query_{safe}.png"
        plot_per_query(comparison, scatter, first, out / scatter_file)

    title = "kbench comparison"
    md = [f"# {title}", "", *header_lines(comparison), "", "## Significant differences", ""]
    md += [f"- {line}" for line in summary_lines(comparison)]
    md += ["", "![metric per config](metric_per_config.png)", ""]
    if scatter_file:
        md += [f"![per-query scores: baseline vs {scatter}]({scatter_file})", ""]
    for metric in comparison.metrics:
        md += [f"## {metric}", "", _md_table(metric_rows(comparison, metric)), ""]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")

    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>", *(f"<p>{esc(line).replace('**', '')}</p>" for line in header_lines(comparison)),
            "<h2>Significant differences</h2><ul>", *(f"<li>{esc(x)}</li>" for x in summary_lines(comparison)),
            "</ul>", '<img src="metric_per_config.png" alt="metric per config">']
    if scatter_file:
        body.append(f'<img src="{esc(scatter_file)}" alt="per-query scatter">')
    for metric in comparison.metrics:
        body += [f"<h2>{esc(metric)}</h2>", _html_table(metric_rows(comparison, metric))]
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table.kbench{border-collapse:collapse;"
             "font-size:13px}table.kbench td,table.kbench th{padding:3px 8px;border-bottom:1px solid #ddd}"
             "img{max-width:100%}")
    (out / "report.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
                                     f"<style>{style}</style></head><body>{''.join(body)}</body></html>",
                                     encoding="utf-8")
    return out
