"""Stage-wise search (``search: {strategy: stagewise, order: [chunking, embedding, retrieval, rerank]}``).

Each grid axis belongs to a stage: its config section (``chunking.chunk_size`` -> chunking). Stage by stage in
``order``, every combination of that stage's axes is scored on every question with the other axes at their
current values (earlier stages: their picks; later stages: the baseline's value, or the axis's first value
when the baseline's is not on it); the stage's recommendation (``search_outcome.recommend``: the best on the
headline, or a cheaper config shown within the margin of it) is fixed and the next stage goes on. So a grid of a x b x c values costs a + b + c configs, not a x b x c.

With ``race: true`` each stage's configs are raced (``race_run.race_configs``) instead of each being scored on
every question: a config significantly worse than the stage's best leaves early, and the stage's pick is
chosen among the configs left, scored on every question. ``alpha`` is split evenly over the stages that race
(those with more than one config), so the chance that any stage drops its best config is at most ``alpha``.

What this assumes: the stages do not interact. A chunk size that is best without a reranker may not be best
with one; stage-wise search never sees that pair. ``check: true`` tests the assumption where it matters: every
config one axis away from the result is scored too, and the outcome says whether any of them is
significantly better (then the assumption failed there and a grid or a race is the honest search).

Every config scored is scored on every question, so the ranking at the end is over the configs the search
saw, compared as a grid's are.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

from kbench.compare import headline_metric
from kbench.dotted import get_dotted
from kbench.sweep.expand import SweepPlan, labelled_grid_points
from kbench.sweep.race_run import race_configs
from kbench.sweep.racing import RaceResult
from kbench.sweep.scoring import ConfigScorer, SearchStrategyError
from kbench.sweep.search import stage_of
from kbench.sweep.search_outcome import SearchOutcome, compare_frames, recommend, search_evidence

ASSUMPTION = ("stage-wise search assumes the stages do not interact: each stage's axes were chosen with the later "
              "stages at the baseline")


def stage_axes(sweep: dict[str, list[Any]], order: list[str]) -> list[tuple[str, list[str]]]:
    """The stages of ``order`` that have grid axes, each with its axes (in the sweep's order)."""
    outside = [p for p in sweep if stage_of(p) not in order]
    if outside:
        raise SearchStrategyError(f"search.order {order} has no stage for the grid axes {outside}; add their stages "
                                  f"({', '.join(sorted({stage_of(p) for p in outside}))}) to search.order")
    return [(stage, [p for p in sweep if stage_of(p) == stage]) for stage in order
            if any(stage_of(p) == stage for p in sweep)]


def start_point(sweep: dict[str, list[Any]], baseline: dict[str, Any]) -> dict[str, int]:
    """Each axis at the baseline's value (the config without its sweep block), or at its first value."""
    start = {}
    for path, values in sweep.items():
        try:
            value = get_dotted(baseline, path)
        except (KeyError, TypeError):
            value = None
        start[path] = values.index(value) if value in values else 0
    return start


def points_by_index(sweep: dict[str, list[Any]]) -> dict[tuple[int, ...], str]:
    """Each grid point's label by its value indices, in the sweep's axis order."""
    combos = itertools.product(*(range(len(v)) for v in sweep.values()))
    return {combo: label for (label, _), combo in zip(labelled_grid_points(sweep)[0], combos)}


def _value(value: Any) -> str:
    if isinstance(value, dict):
        if value.get("enabled") is False:
            return "off"
        return str(value.get("strategy", value.get("method", "{...}")))
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def run_stagewise(plan: SweepPlan, scorer: ConfigScorer, say: Callable[[str], None] = print) -> SearchOutcome:
    sweep = plan.raw_blocks.get("sweep") or {}
    if not sweep or plan.raw_blocks.get("variants"):
        raise SearchStrategyError("search: stagewise searches a grid (sweep:), without variants; move the variants "
                                  "into grid axes or use search: {strategy: race}")
    paths = list(sweep)
    steps_of = stage_axes(sweep, plan.search.order)
    points = points_by_index(sweep)
    config_of = {c.label: c.label for c in plan.configs}
    config_of.update({alias: c.label for c in plan.configs for alias in c.aliases})
    ids = scorer.question_ids()
    frames: dict = {}
    headline = ""

    def score(combos: list[tuple[int, ...]]) -> list[str]:
        nonlocal headline
        labels = list(dict.fromkeys(config_of[points[c]] for c in combos))
        todo = [label for label in labels if label not in frames]
        frames.update(scorer.score(todo, ids))
        if not headline:
            headline = headline_metric(next(iter(frames.values())).columns) or ""
            if not headline:
                raise SearchStrategyError("search: stagewise needs a ranking metric (nDCG@k) in the results")
        return labels

    def race_stage(stage: str, combos: list[tuple[int, ...]]) -> list[str]:
        """The stage's configs raced; the survivors' results over every question join ``frames``."""
        nonlocal headline
        labels = list(dict.fromkeys(config_of[points[c]] for c in combos))
        result, full, found = race_configs(labels, scorer, ids, plan.search, alpha=stage_alpha, say=say,
                                           release=False, intro=f"  {stage} race: ",
                                           known={k: v for k, v in frames.items() if k in labels})
        headline = headline or found
        frames.update(full)
        races[stage] = result
        return result.survivors

    current = start_point(sweep, plan.baseline.resolved())
    steps = []
    races: dict[str, RaceResult] = {}
    sizes = {stage: math.prod(len(sweep[p]) for p in axes) for stage, axes in steps_of}
    stage_alpha = plan.search.alpha / max(1, sum(1 for n in sizes.values() if n > 1))
    say(f"stagewise {plan.name}: {len(plan.configs)} configs, stages {' -> '.join(s for s, _ in steps_of)}"
        + (f", each raced at alpha {stage_alpha:.3g}" if plan.search.race else ""))
    for stage, axes in steps_of:
        combos = []
        for values in itertools.product(*(range(len(sweep[p])) for p in axes)):
            point = dict(current)
            point.update(zip(axes, values))
            combos.append(tuple(point[p] for p in paths))
        labels = race_stage(stage, combos) if plan.search.race and sizes[stage] > 1 else score(combos)
        subset = {label: frames[label] for label in labels}
        pick, found = recommend(compare_frames(subset, headline, plan, scorer.costs), subset, headline,
                                  plan.baseline.recommend)
        if pick is None:  # every config of the stage over a budget: the stage has nothing to fix
            raise SearchStrategyError(f"stagewise: every config of the {stage} stage is over a recommend budget "
                                      f"({'; '.join(found.budgets)}); raise the budget or drop those axes")
        chosen = next(c for c in combos if config_of[points[c]] == pick)
        current = dict(zip(paths, chosen))
        fixed = ", ".join(f"{p.rsplit('.', 1)[-1]}={_value(sweep[p][current[p]])}" for p in axes)
        raced = races.get(stage)
        among = (f"{len(labels) + len(raced.dropped)} configs raced, {len(raced.dropped)} dropped; best of the "
                 f"{len(labels)} left" if raced else f"best of {len(labels)} configs")
        how = ("best" if found is None or pick == found.best else "cheapest within the margin of the best")
        steps.append(f"{stage}: {fixed} fixed ({among}: {pick}, the {how}"
                     + ("" if found is None or found.decided else "; provisional: the questions cannot decide")
                     + ")")
        say(f"  {steps[-1]}")
    final = config_of[points[tuple(current[p] for p in paths)]]
    notes = [ASSUMPTION]
    if races:
        notes.append(f"each of the {len(races)} stages raced at alpha {plan.search.alpha} / {len(races)} = "
                     f"{stage_alpha:.3g} (Bonferroni over its rounds x comparisons), so the chance that any stage "
                     f"dropped its best config is at most {plan.search.alpha}")
    if plan.search.check:
        neighbours = []
        for path in paths:
            for i in range(len(sweep[path])):
                if i != current[path]:
                    neighbours.append(tuple(i if p == path else current[p] for p in paths))
        labels = score(neighbours)
        around = {label: frames[label] for label in dict.fromkeys([final, *labels])}
        comparison = compare_frames(around, headline, plan, scorer.costs)
        better = []
        if comparison is not None:  # the final config significantly worse than the best around it
            ranking = comparison.ranking().set_index("config")
            if ranking.loc[final, "vs_best"] == "worse":
                better = [str(ranking.index[0])]
        notes.append(f"checked {len(around) - 1} configs one axis away from {final}: "
                     + (f"{', '.join(better)} significantly better, so the stages interact there"
                        if better else "none is significantly better"))
    comparison = compare_frames(frames, headline, plan, scorer.costs)
    recommended, recommendation = recommend(comparison, frames, headline, plan.baseline.recommend,
                                            search_evidence(plan, scorer))
    if recommended != final:
        notes.append(f"the stage-wise path ended at {final}; of every config it scored, {recommended} is the "
                     "recommendation")
    return SearchOutcome("stagewise", headline, len(ids), len(plan.configs), scorer.cost, dict(frames), comparison,
                         recommended, recommendation, notes=notes, steps=steps, stage_races=races)
