"""What a sweep shows a reader: every config's resolved knobs that differ between configs, and the summary at
its end.

    table = plan_knob_table(plan)           # KnobTable: one row per config, one column per knob that differs
    print("\\n".join(plan_lines(plan)))      # --dry-run and the start of a sweep: the table, legends, warnings
    print("\\n".join(summary_lines(plan, outcome)))  # the end of a sweep: counts, ranking, knobs, the winner,
                                                    # the recommendation

The table is built from the *resolved* configs (every default filled in), not from what the sweep block
wrote, so a section-valued axis shows the strategy's own defaults (``markdown`` at chunk_size 2000) and two
configs that look alike but differ somewhere say where. Column headers are the knob's last name where that is
unique (``chunk_size``), and the legend gives each shortened header's full path and each shortened label's
value. ``knob_table`` takes plain ``(label, {dotted path: value})`` pairs, so the same table is made from a
plan, from child runs' ``kbench.knob.*`` tags or from anything else that names knobs.

``summary_lines`` is the one place that writes the end of a sweep for the console; a line added to what a
sweep concludes goes there.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kbench.compare import ranking_lines
from kbench.evaluation.budgets import BUDGET_METRIC, OFFERED_BUDGET, chunk_size_lines
from kbench.evaluation.recommend import Recommendation
from kbench.evaluation.effects import effect_lines
from kbench.sweep.expand import SweepPlan
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_dataset import set_label
from kbench.tracking.mlflow_run import MAX_PARAM_CHARS

MISSING = "-"  # the config has no such knob (another strategy's)
MAX_CELL = 28  # characters of a value in the console table (the full value is in the run's params)
MIN_WIDTH = 60  # the console table wraps to the terminal, never narrower than this


def console_width() -> int:
    """The terminal's width (``COLUMNS`` when set; 120 when the output is piped to a file or CI log)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((120, 24)).columns)


@dataclass
class KnobTable:
    labels: list[str]
    paths: list[str]  # dotted paths of the knobs that differ between at least two configs
    headers: list[str]  # short unique column names for ``paths``
    values: list[list[str]]  # per config, the value of each path (MISSING when it has none)
    legend: dict[str, str] = field(default_factory=dict)  # a shortened header -> its full path

    def rows(self) -> list[dict[str, str]]:
        """One mapping per config: ``config`` and each header (for markdown / HTML tables)."""
        return [{"config": label, **dict(zip(self.headers, row))} for label, row in zip(self.labels, self.values)]

    def of(self, label: str) -> dict[str, str]:
        """The knobs of one config that differ between configs, by full path."""
        return dict(zip(self.paths, self.values[self.labels.index(label)]))


def short_headers(paths: list[str]) -> list[str]:
    """Each path's shortest dotted suffix no other path ends with (``chunk_size``, ``fusion.k`` ...)."""
    headers = []
    for path in paths:
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if sum(1 for p in paths if p == suffix or p.endswith("." + suffix)) == 1:
                headers.append(suffix)
                break
        else:
            headers.append(path)
    return headers


def knob_table(named: list[tuple[str, dict[str, str]]]) -> KnobTable:
    """The knobs whose value is not the same in every config (a knob some configs lack counts as differing)."""
    labels = [label for label, _ in named]
    paths: list[str] = []
    for _, knobs in named:
        paths += [p for p in knobs if p not in paths]
    differing = [p for p in paths if len({knobs.get(p, MISSING) for _, knobs in named}) > 1]
    headers = short_headers(differing)
    values = [[knobs.get(p, MISSING) for p in differing] for _, knobs in named]
    legend = {h: p for h, p in zip(headers, differing) if h != p}
    return KnobTable(labels, differing, headers, values, legend)


def plan_knob_table(plan: SweepPlan) -> KnobTable:
    return knob_table([(c.label, c.resolved_knobs) for c in plan.configs])


def _cut(text: str, limit: int = MAX_CELL) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def text_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A left-aligned plain-text table (header, rule, rows)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def column_blocks(widths: list[int], keep: int, width: int) -> list[list[int]]:
    """Column indexes per block so that each block fits ``width`` (two spaces between columns): the first ``keep``
    columns (the config's label) start every block, as pandas wraps a wide frame. A column wider than the room
    left gets a block of its own."""
    kept = sum(widths[:keep]) + 2 * keep
    blocks, block, used = [], [], kept
    for i in range(keep, len(widths)):
        if block and used + widths[i] > width:
            blocks.append(block)
            block, used = [], kept
        block.append(i)
        used += widths[i] + 2
    return [list(range(keep)) + b for b in (blocks + [block] if block else blocks)] or [list(range(keep))]


def wrapped_items(head: str, items: list[str], width: int, indent: str = "") -> list[str]:
    """``head`` then ``items`` joined by "; ", wrapped at ``width`` between items, never inside one."""
    lines, line = [], head
    for n, item in enumerate(items):
        piece = item + (";" if n < len(items) - 1 else "")
        if line.strip() and len(line) + len(piece) > width:
            lines.append(line.rstrip())
            line = "  "
        line += piece + " "
    return [indent + text for text in lines + [line.rstrip()]]


def knob_table_lines(table: KnobTable, first: list[tuple[str, list[str]]] = (), order: list[str] | None = None,
                     indent: str = "", width: int | None = None) -> list[str]:
    """The table as console lines: ``first`` columns (header, one value per label), then the knobs, rows in
    ``order`` (default: the table's); then the legend of shortened headers. Wider than ``width`` (default: the
    terminal's), the knob columns wrap into blocks, each starting with the config's label and the ``first``
    columns; the legend wraps too."""
    width = (width or console_width()) - len(indent)
    labels = order or table.labels
    extra = {name: dict(zip(table.labels, cells)) for name, cells in first}
    headers = ["config", *extra, *table.headers]
    rows = [[label, *(extra[name][label] for name in extra),
             *(_cut(v) for v in table.values[table.labels.index(label)])] for label in labels]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = []
    for n, block in enumerate(column_blocks(widths, 1 + len(extra), width)):
        if n:
            lines.append("")
        lines += [indent + line for line in text_table([headers[i] for i in block], [[r[i] for i in block]
                                                                                    for r in rows])]
    if not table.paths:
        lines.append(f"{indent}(every config resolves to the same knobs)")
    if table.legend:
        lines += wrapped_items("columns: ", [f"{h} = {p}" for h, p in table.legend.items()], width, indent)
    return lines


def label_legend_lines(plan: SweepPlan, indent: str = "") -> list[str]:
    """What each shortened label part stands for, as the sweep block wrote it."""
    if not plan.legend:
        return []
    return [f"{indent}label {part} = {value}" for part, value in plan.legend.items()]


def plan_lines(plan: SweepPlan, indent: str = "") -> list[str]:
    """``--dry-run`` and the start of a sweep: each config's run key and resolved knobs that differ between
    configs, the legends, then what makes a comparison unfair and what a reader should know."""
    table = plan_knob_table(plan)
    lines = knob_table_lines(table, [("run key", [c.run_key for c in plan.configs])], indent=indent)
    lines += label_legend_lines(plan, indent)
    lines += [f"{indent}aliases: {c.label} also stands for {', '.join(c.aliases)} (same resolved config)"
              for c in plan.configs if c.aliases]
    lines += [f"{indent}warning: {w}" for w in plan.warnings]
    lines += [f"{indent}note: {n}" for n in plan.notes]
    return lines


def knob_markdown(plan: SweepPlan) -> tuple[list[dict[str, str]], list[str]]:
    """The knob table as rows for a markdown/HTML table, and its legend lines (for the report, the parent run)."""
    table = plan_knob_table(plan)
    legend = [f"`{h}` = `{p}`" for h, p in table.legend.items()]
    legend += [f"`{part}` = `{value}`" for part, value in plan.legend.items()]
    return table.rows(), legend


def summary_lines(plan: SweepPlan, outcome) -> list[str]:
    """The end of a sweep (``outcome``: the ``run.SweepOutcome``): what ran, failures, warnings, the ranking, each
    config's knobs in ranking order, the factor effects, and last the recommendation (``evaluation/recommend.py``:
    the best by mean, or a cheaper config shown within the margin of it; provisional when the set cannot decide)
    with its knobs and where its resolved config is. The recommendation is the sweep's one pick: the parent run,
    winner.yaml and ``kbench compare`` name the same config."""
    lines = [f"sweep {plan.name}: {outcome.count('ran')} ran, {outcome.count('done')} finished before, "
             f"{outcome.count('reused')} reused, {outcome.count('failed')} failed"]
    lines += [f"  FAILED {label}: {error}" for label, error in outcome.errors.items()]
    lines += [f"warning: {w}" for w in outcome.warnings]
    lines.append("")
    failed_line = (f"no recommendation: {outcome.count('failed')} of {len(plan.configs)} configs failed, and a "
                   "config picked among the rest could lose to one that did not run; fix the failures and run the "
                   "sweep again (finished configs are kept, not run again)")
    if outcome.winner is None and outcome.recommendation is None and outcome.comparison is None:
        if outcome.errors:
            return lines + [failed_line]
        if outcome.unscored:
            parent = outcome.parent_run_id
            return lines + [f"no recommendation yet: every config finished, and none is scored: the set's questions "
                            f"carry no label (a query log's set); the rankings are kept: grade them with `kbench "
                            f"judge {parent} --out judged.qrels` (a served LLM, or --judge-model NAME: see "
                            "docs/how-to/query-logs.md), then run the sweep again with --set "
                            "dataset.judged_qrels=judged.qrels"]
        return lines + ["no config finished: nothing to rank"
                        + (f" ({outcome.report_error})" if outcome.report_error else "")]
    table = plan_knob_table(plan)
    if outcome.comparison is not None:
        lines += ranking_lines(outcome.comparison) + [""]
        ranked = [str(c) for c in outcome.comparison.ranking()["config"] if c in table.labels]
        order = ranked + [label for label in table.labels if label not in ranked]
        lines += ["Each config's knobs that differ between configs (resolved: the strategies' own defaults "
                  "filled in), in ranking order:"]
        lines += knob_table_lines(table, order=order, indent="  ") + label_legend_lines(plan, "  ") + [""]
    if outcome.report_error:
        lines.append(f"(comparison incomplete: {outcome.report_error})")
    if getattr(outcome, "effects", None):
        lines += effect_lines(outcome.effects, outcome.headline)
        lines += ["  (also on the parent run: metrics effect_*, artifacts factor_effects.md/.json)", ""]
    elif getattr(outcome, "effects_note", "") and (plan.raw_blocks.get("sweep") or {}):
        lines += [f"factor effects: none ({outcome.effects_note})", ""]
    if outcome.errors:
        return lines + [failed_line]
    if outcome.recommendation is not None:
        lines += (outcome.recommendation.lines() + chunk_size_warning(plan, outcome)  # beside the pick
                  + recommendation_knobs(outcome.recommendation.config, plan, outcome.winner_config))
    else:
        value = f", {outcome.headline} {outcome.headline_value:.4f}" if outcome.headline_value is not None else ""
        lines += [f"recommendation: {outcome.winner} (the only config that finished{value}: nothing to compare it "
                  "with)"] + recommendation_knobs(outcome.winner, plan, outcome.winner_config)
    lines.append("  also on the parent run: " + ("its metrics, artifact winner.yaml, " if outcome.winner else "")
                 + "the recommendation and ranking as description")
    return lines


def chunk_size_warning(plan: SweepPlan, outcome) -> list[str]:
    """Configs that chunk differently ranked on a top-k headline: the warning beside the pick, and the budget metric
    (measured: its ranking and the command that ranks on it; not measured: the command that measures it)."""
    table = plan_knob_table(plan)
    knobs = [p for p in ("chunking.strategy", "chunking.chunk_size") if p in table.paths]
    if "chunking.chunk_size" not in knobs or outcome.comparison is None:  # a chunker without one (none) differs too
        return []
    sizes = {label: ", ".join(f"{p.split('.')[-1]} {table.of(label)[p]}" for p in knobs) for label in table.labels}
    columns = outcome.comparison.runs[0].per_query.columns
    measured = sorted((int(c.rsplit("_", 1)[1]), c) for c in columns if c.startswith("span_recall_at_budget_")
                      or (c.startswith("doc_recall_at_budget_") and not any("span_recall" in x for x in columns)))
    chosen = next((c for n, c in measured if n == OFFERED_BUDGET), measured[0][1] if measured else None)
    means = ({chosen: {r.label: float(r.per_query[chosen].mean()) for r in outcome.comparison.runs}} if chosen
             else {})
    sweep = outcome.comparison.parent_run_id or "PARENT"
    command = (f"kbench compare --sweep {sweep} --metric {chosen}" if chosen else
               f"kbench sweep {plan.command or 'CONFIG'} --set 'evaluation.budgets=[{OFFERED_BUDGET}]', then kbench "
               f"compare --sweep PARENT --metric {BUDGET_METRIC.format(n=OFFERED_BUDGET)}")
    return chunk_size_lines(sizes, outcome.headline or "", outcome.recommendation.config, means, command)


def recommendation_lines(recommendation, plan: SweepPlan | None = None, config_file=None) -> list[str]:
    """The ``recommendation:`` line and why (``evaluation.recommend.Recommendation.lines``); with a plan, the
    recommended config's knobs that differ between configs, and its resolved config file."""
    return recommendation.lines() + recommendation_knobs(recommendation.config, plan, config_file)


def recommendation_knobs(label: str | None, plan: SweepPlan | None, config_file=None) -> list[str]:
    """The recommended config's knobs that differ between configs, and where its resolved config is."""
    lines = []
    if label is not None and plan is not None and label in plan.by_label():
        table = plan_knob_table(plan)
        knobs = ", ".join(f"{p}={v}" for p, v in table.of(label).items() if v != MISSING)
        if knobs and table.paths:
            lines.append(f"  its knobs: {knobs}")
    if label is not None and config_file is not None:
        lines.append(f"  resolved config: {config_file} (run it: kbench run {config_file})")
    return lines


def dataset_words(dataset) -> str:
    """The question set a config names, before it is read: its registered name or its folder's name, the split."""
    where = dataset.name or (Path(dataset.path).name if dataset.path else "") or "dataset"
    return where + (f" ({dataset.split})" if dataset.split != "test" else "")


def parent_name(plan: SweepPlan, record: dict | None = None, strategy: str | None = None) -> str:
    """``<sweep> · <search> of N configs · <set>``: three sweeps of one config on three sets (or searches) read
    apart in MLflow's runs list. The set is its name and digest (``docs@1a2b3c4d``) once a config has read it;
    ``strategy``: the search's when it is not the plan's (``until-decided``)."""
    where = set_label(record) if record else dataset_words(plan.baseline.dataset)
    return f"{plan.name} · {strategy or plan.search.strategy} of {len(plan.configs)} configs · {where}"


def winner_comments(recommendation: Recommendation | None) -> str:
    """The recommendation's lines after its first (the bound, what it rules out, the warnings on the pick, how the
    set's documents were altered) as ``#`` comments of winner.yaml, so the file says what it holds for."""
    if recommendation is None:
        return ""
    return "".join(f"# {line.strip()}\n" for line in recommendation.lines()[1:])


def decision_tags(found: Recommendation) -> dict[str, str]:
    """The parent run's tags of a recommendation: decided, within the margin, the bound and what it rules out."""
    tags = {tag.SWEEP_DECIDED: str(found.decided).lower(),
            tag.SWEEP_WITHIN_MARGIN: ", ".join(found.within_margin)[:MAX_PARAM_CHARS]}
    if found.bounds is not None:
        tags[tag.SWEEP_BOUND] = f"{found.bound:.4f}"
        tags[tag.SWEEP_RULED_OUT] = (", ".join(found.ruled_out) or "none")[:MAX_PARAM_CHARS]
    return tags


def decision_metrics(found: Recommendation) -> dict[str, float]:
    """``recommendation_bound`` (the pick's bound, headline units) for the parent run, when there is one."""
    return {"recommendation_bound": found.bound} if found.bounds is not None else {}
