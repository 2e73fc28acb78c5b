"""Write a Comparison as report.md + report.html with two kinds of plots (matplotlib, no display needed).

The report opens with the ranking on the headline metric (best first, with its interval, and whether each
config is told apart from the best, as worse, or not), then the differences to the baseline that are significant, better
and worse, then the plots and one table per metric (sorted by that metric, the best marked):

- ``metric_per_config.png``: each metric's mean per config with its bootstrap interval, the baseline as a
  line, significant differences in colour;
- ``per_query_<config>.png``: per-query scores of the baseline against one other config (by default the best
  one, or when the baseline is best the one whose first metric moved most), so one sees whether a gain is
  broad or a few queries.

report.html carries its images inline (data: URIs), so it reads the same opened from disk or in MLflow's
artifact viewer, which cannot follow relative links.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd

from kbench.compare.compare import Comparison, detectable_differences
from kbench.compare.slices import language_table
from kbench.evaluation.directions import lower_is_better

TEST_NAMES = {"t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test", "randomization": "paired randomization test"}
VERDICTS = {"best": "best", "tied": "not told apart from the best", "worse": "worse than the best"}  # "tied": the
# code a ranking row carries; shown in words that never read "as good"
SHORT_VERDICTS = {"best": "best", "tied": "not told apart", "worse": "worse"}  # under a "vs best" column header


def _fmt(x: float, digits: int = 4) -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def format_p(x: float) -> str:
    if x is None or np.isnan(x):
        return "–"
    return "<0.0001" if x < 1e-4 else f"{x:.4f}"


def _pct(comparison: Comparison) -> int:
    return int(round(comparison.confidence * 100))


def verdict_text(row) -> str:
    """``best``, ``not told apart from the best (p = 0.41)`` or ``worse than the best (p = 0.0021)``; p adjusted."""
    if row["vs_best"] == "best":
        return "best"
    return f"{VERDICTS[row['vs_best']]} (p = {format_p(row['p_vs_best_adjusted'])})"


def tie_note(comparison: Comparison) -> str:
    return (f"not told apart = no significant difference to the best ({TEST_NAMES[comparison.test]}, "
            f"{comparison.correction} correction, α = {comparison.alpha}): it may be as good or worse, the data cannot "
            "tell; the recommendation decides at a stated margin")


def ranking_note(comparison: Comparison, metric: str | None = None) -> str:
    metric = metric or comparison.headline
    return (f"{metric}, best first: mean over {comparison.n_queries} queries [{_pct(comparison)}% bootstrap CI]; "
            f"{tie_note(comparison)}.")


def ranking_rows(comparison: Comparison, metric: str | None = None) -> list[dict[str, str]]:
    pct = _pct(comparison)
    out = []
    for _, r in comparison.ranking(metric).iterrows():
        out.append({
            "rank": str(r["rank"]),
            "config": r["config"] + (" (baseline)" if r["baseline"] else ""),
            f"mean [{pct}% CI]": f"{_fmt(r['mean'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
            "Δ to best": "–" if r["vs_best"] == "best" else f"{r['diff_to_best']:+.4f}",
            "vs best": "**best**" if r["vs_best"] == "best" else verdict_text(r),
        })
    return out


def ranking_lines(comparison: Comparison, limit: int = 10) -> list[str]:
    """The ranking on the headline metric as console lines: a title, one aligned line per config (the first
    ``limit``), e.g. ``  2  chunk_size=300  0.6001 [0.4890, 0.7100]  not told apart from the best (p = 0.41)``,
    and what that means."""
    ranking = comparison.ranking()
    shown = ranking.head(limit)
    cells = [[f"{r['rank']:>3}", r["config"] + (" (baseline)" if r["baseline"] else ""),
              f"{_fmt(r['mean'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]", verdict_text(r)]
             for _, r in shown.iterrows()]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    lines = [f"Ranking on {comparison.headline}, best first (mean over {comparison.n_queries} queries "
             f"[{_pct(comparison)}% bootstrap CI]):"]
    lines += ["  " + "  ".join(c[i].ljust(widths[i]) for i in range(3)) + "  " + c[3] for c in cells]
    if len(ranking) > limit:
        lines.append(f"  ... and {len(ranking) - limit} more (every config in the report)")
    return lines + [f"  {tie_note(comparison)}"]


def metric_rows(comparison: Comparison, metric: str) -> list[dict[str, str]]:
    """One row per config, best first on ``metric``, the best marked; the difference to the baseline with its
    tests."""
    pct = _pct(comparison)
    table = comparison.table[comparison.table["metric"] == metric].set_index("config")
    out = []
    for _, rank in comparison.ranking(metric).iterrows():
        r = table.loc[rank["config"]]
        out.append({
            "rank": str(rank["rank"]),
            "config": rank["config"] + (" (baseline)" if r["baseline"] else ""),
            f"mean [{pct}% CI]": f"{_fmt(r['mean'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
            "vs best": "**best**" if rank["vs_best"] == "best" else verdict_text(rank),
            f"Δ vs baseline [{pct}% CI]": "–" if r["baseline"] else
            f"{r['diff']:+.4f} [{r['diff_ci_low']:+.4f}, {r['diff_ci_high']:+.4f}]",
            "effect size d": _fmt(r["effect_size"], 3),
            "p t-test": format_p(r["p_t"]),
            "p Wilcoxon": format_p(r["p_wilcoxon"]),
            "p randomization": format_p(r["p_randomization"]),
            f"p adj. ({comparison.correction})": format_p(r["p_adjusted"]),
            "significant": "**yes**" if r["significant"] else ("" if r["baseline"] else "no"),
            "better/same/worse": "–" if r["baseline"] else f"{r['wins']}/{r['ties']}/{r['losses']}",
        })
    return out


def _difference(r) -> str:
    return (f"{r['config']}: {r['metric']} {r['diff']:+.4f} ({r['mean']:.4f} vs baseline "
            f"{r['mean'] - r['diff']:.4f}), adjusted p = {format_p(r['p_adjusted'])}, d = {r['effect_size']:.4f}")


def _gain(table: pd.DataFrame) -> pd.Series:
    """Each row's difference to the baseline signed so that > 0 is better (a latency or cost that fell)."""
    return table["diff"].where(~table["metric"].map(lower_is_better), -table["diff"])


def differences(comparison: Comparison) -> tuple[list[str], list[str]]:
    """The significant differences to the baseline: (better, worse), each sorted by metric, largest first (a
    latency or cost is better when it fell)."""
    sig = comparison.significant().assign(order=lambda t: t["metric"].map(comparison.metrics.index),
                                          gain=_gain)
    better = sig[sig["gain"] > 0].sort_values(["order", "gain"], ascending=[True, False])  # headline first
    worse = sig[sig["gain"] < 0].sort_values(["order", "gain"], ascending=[True, True])
    return [_difference(r) for _, r in better.iterrows()], [_difference(r) for _, r in worse.iterrows()]


def summary_lines(comparison: Comparison) -> list[str]:
    """The significant differences to the baseline as console lines, better ones first, then worse ones."""
    better, worse = differences(comparison)
    if not better and not worse:
        return [f"No difference to the baseline ({comparison.baseline}) is significant at α = {comparison.alpha} "
                f"after {comparison.correction} correction."]
    lines = []
    if better:
        lines += [f"Significantly better than the baseline ({comparison.baseline}):", *(f"  {x}" for x in better)]
    if worse:
        lines += [f"Significantly worse than the baseline ({comparison.baseline}):", *(f"  {x}" for x in worse)]
    return lines


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
    from matplotlib.figure import Figure  # not pyplot: a notebook calling this keeps its own backend

    labels = list(comparison.ranking()["config"])  # best first on the headline metric
    n_metrics = len(comparison.metrics)
    fig = Figure(figsize=(4.2 * n_metrics, 0.45 * len(labels) + 1.6))
    axes = fig.subplots(1, n_metrics, sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], comparison.metrics):
        rows = comparison.table[comparison.table["metric"] == metric].set_index("config").loc[labels]
        y = np.arange(len(labels))[::-1]
        colors = ["black" if b else ("tab:green" if s and d > 0 else "tab:red" if s else "tab:gray")
                  for b, s, d in zip(rows["baseline"], rows["significant"], _gain(rows))]
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
    return path


def plot_per_query(comparison: Comparison, other: str, metric: str, path: Path) -> Path:
    from matplotlib.figure import Figure  # not pyplot: a notebook calling this keeps its own backend

    a = comparison.scores(comparison.baseline, metric)
    b = comparison.scores(other, metric)
    sign = -1 if lower_is_better(metric) else 1  # a latency is better when it fell
    pairs, counts = np.unique(np.column_stack([a, b]), axis=0, return_counts=True)  # equal points stack up
    fig = Figure(figsize=(4.8, 4.8))
    ax = fig.subplots()
    gain = sign * (pairs[:, 1] - pairs[:, 0])
    colors = np.where(gain > 0, "tab:green", np.where(gain < 0, "tab:red", "tab:gray"))
    ax.scatter(pairs[:, 0], pairs[:, 1], s=18 * counts, c=colors, alpha=0.6, edgecolors="none")
    lo, hi = float(min(a.min(), b.min())), float(max(a.max(), b.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    ax.set_xlabel(f"{comparison.baseline} (baseline)", fontsize=8)
    ax.set_ylabel(other, fontsize=8)
    ax.set_title(f"{metric} per query ({(sign * (b - a) > 0).sum()} better, {(b == a).sum()} same, "
                 f"{(sign * (b - a) < 0).sum()} worse)\n"
                 "marker area = number of queries", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def mde_note(comparison: Comparison) -> str:
    return (f"Minimum detectable difference: the smallest true difference to the baseline that "
            f"{comparison.n_queries} queries find with 80% power (paired t-test, two-sided α = {comparison.alpha}), "
            "from the spread of the per-query differences (median over the configs, and its range). Smaller "
            "differences may be real; this query set will usually miss them.")


def mde_rows(comparison: Comparison) -> list[dict[str, str]]:
    return [{"metric": r.metric, "queries": str(r.n_queries), "MDE (80% power)": _fmt(r.mde),
             "range over configs": f"{_fmt(r.mde_min)} – {_fmt(r.mde_max)}"}
            for r in detectable_differences(comparison).itertuples()]


def slice_rows(table: pd.DataFrame, comparison: Comparison, key: str = "slice") -> list[dict[str, str]]:
    """The headline metric per slice label and config (``compare_by_slice``'s table): mean, difference to the
    baseline, corrected p."""
    part = table[table["metric"] == comparison.headline]
    return [{key: str(r.slice), "config": r.config + (" (baseline)" if r.baseline else ""),
             "questions": str(r.n_queries), "mean": _fmt(r.mean), "Δ vs baseline": "–" if r.baseline else f"{r.diff:+.4f}",
             f"p adj. ({comparison.correction})": "–" if r.baseline else format_p(r.p_adjusted),
             "significant": "" if r.baseline else ("**yes**" if r.significant else "no")} for r in part.itertuples()]


def language_note(comparison: Comparison, table: pd.DataFrame) -> str:
    return (f"The questions are in {table['slice'].nunique()} languages: {comparison.headline} per language, each "
            f"language's questions compared alone ({comparison.correction} correction over every language, config "
            "and metric). A config that wins overall can lose in the language a team reads.")


def md_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r[h].replace("|", "\\|") for h in head) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(rows: list[dict[str, str]]) -> str:
    escaped = pd.DataFrame(rows).to_html(index=False, escape=True, border=0, classes="kbench")
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)  # markdown bold (the best, "yes") as <b>


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _default_scatter(comparison: Comparison) -> str | None:
    """The best config on the headline metric; when the baseline is best, the one that moved most."""
    best = comparison.best
    if best != comparison.baseline:
        return best
    first = comparison.metrics[0]
    others = comparison.table[(comparison.table["metric"] == first) & ~comparison.table["baseline"]]
    return None if others.empty else others.loc[others["diff"].abs().idxmax(), "config"]


def write_report(comparison: Comparison, out_dir: str | Path, scatter: str | None = None,
                 configs: list[dict[str, str]] | None = None, configs_legend: list[str] | None = None,
                 recommendation: list[str] | None = None, appendix: str | None = None) -> Path:
    """Write report.md, report.html (images inline), comparison.csv, ranking.csv and the plots into
    ``out_dir``; returns the folder. ``configs``: one row per config (``config`` and the knobs that differ
    between configs, e.g. a sweep's resolved knobs), shown after the ranking with ``configs_legend``.
    ``recommendation``: the recommendation's lines (``evaluation.recommend``), shown first. ``appendix``: more
    markdown for the end of report.md (a sweep's factor effects)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    comparison.table.to_csv(out / "comparison.csv", index=False)
    comparison.ranking().to_csv(out / "ranking.csv", index=False)
    plot_metric_per_config(comparison, out / "metric_per_config.png")
    first = comparison.metrics[0]
    scatter = scatter if scatter is not None else _default_scatter(comparison)
    scatter_file = None
    if scatter is not None:
        safe = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in scatter)
        scatter_file = f"per_query_{safe}.png"
        plot_per_query(comparison, scatter, first, out / scatter_file)
    better, worse = differences(comparison)
    no_difference = summary_lines(comparison)[0] if not better and not worse else None
    languages = language_table(comparison)  # None unless two or more languages hold a meaningful share
    if languages is not None:
        languages.to_csv(out / "slices_language.csv", index=False)

    title = "kbench comparison"
    md = [f"# {title}", "", *header_lines(comparison), ""]
    if recommendation:
        md += ["## Recommendation", "", *(f"- {line.strip()}" for line in recommendation), ""]
    md += [f"## Ranking on {comparison.headline}", "", ranking_note(comparison), "",
          md_table(ranking_rows(comparison)), ""]
    has_configs = bool(configs) and len(configs[0]) > 1
    if has_configs:
        md += ["## What each config ran", "", "The knobs that differ between configs, resolved (each strategy's "
               "own defaults filled in):", "", md_table(configs), "", *(f"- {x}" for x in configs_legend or []), ""]
    md += [f"## Significant differences to the baseline ({comparison.baseline})", ""]
    if no_difference:
        md += [no_difference, ""]
    for name, lines in (("Better", better), ("Worse", worse)):
        if lines:
            md += [f"**{name}:**", "", *(f"- {line}" for line in lines), ""]
    if languages is not None:
        md += [f"## {comparison.headline} per language", "", language_note(comparison, languages), "",
               md_table(slice_rows(languages, comparison, "language")), ""]
    md += ["## Minimum detectable difference", "", mde_note(comparison), "", md_table(mde_rows(comparison)), ""]
    md += ["![metric per config](metric_per_config.png)", ""]
    if scatter_file:
        alt = scatter.replace("[", "(").replace("]", ")")  # brackets would end the alt text
        md += [f"![per-query scores: baseline vs {alt}]({scatter_file})", ""]
    for metric in comparison.metrics:
        md += [f"## {metric}", "", md_table(metric_rows(comparison, metric)), ""]
    text = "\n".join(md)
    (out / "report.md").write_text(text + "\n" + appendix if appendix else text, encoding="utf-8")

    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>", *(f"<p>{esc(line).replace('**', '')}</p>" for line in header_lines(comparison))]
    if recommendation:
        body += ["<h2>Recommendation</h2><ul>", *(f"<li>{esc(line.strip())}</li>" for line in recommendation), "</ul>"]
    body += [f"<h2>Ranking on {esc(comparison.headline)}</h2>", f"<p>{esc(ranking_note(comparison))}</p>",
            _html_table(ranking_rows(comparison))]
    if has_configs:
        body += ["<h2>What each config ran</h2>", "<p>The knobs that differ between configs, resolved (each "
                 "strategy's own defaults filled in):</p>", _html_table(configs)]
        body += ["<ul>", *(f"<li>{esc(x.replace('`', ''))}</li>" for x in configs_legend or []), "</ul>"]
    body.append(f"<h2>Significant differences to the baseline ({esc(comparison.baseline)})</h2>")
    if no_difference:
        body.append(f"<p>{esc(no_difference)}</p>")
    for name, lines in (("Better", better), ("Worse", worse)):
        if lines:
            body += [f"<h3>{name}</h3><ul>", *(f"<li>{esc(x)}</li>" for x in lines), "</ul>"]
    if languages is not None:
        body += [f"<h2>{esc(comparison.headline)} per language</h2>", f"<p>{esc(language_note(comparison, languages))}</p>",
                 _html_table(slice_rows(languages, comparison, "language"))]
    body += ["<h2>Minimum detectable difference</h2>", f"<p>{esc(mde_note(comparison))}</p>",
             _html_table(mde_rows(comparison))]
    body.append(f'<img src="{_data_uri(out / "metric_per_config.png")}" alt="metric per config">')
    if scatter_file:
        body.append(f'<img src="{_data_uri(out / scatter_file)}" alt="per-query scores: baseline vs {esc(scatter)}">')
    for metric in comparison.metrics:
        body += [f"<h2>{esc(metric)}</h2>", _html_table(metric_rows(comparison, metric))]
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table.kbench{border-collapse:collapse;"
             "font-size:13px}table.kbench td,table.kbench th{padding:3px 8px;border-bottom:1px solid #ddd}"
             "img{max-width:100%}")
    (out / "report.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
                                     f"<style>{style}</style></head><body>{''.join(body)}</body></html>",
                                     encoding="utf-8")
    return out
