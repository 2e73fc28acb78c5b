"""What a search of a sweep (race, stage-wise) ends with, the same way for each: the configs scored on every
question compared as a grid sweep's are, one recommendation, the cost, and one MLflow run.

The comparison at the end is ``compare.compare_scores`` (paired test, Holm, ties to the best), as for a grid
sweep's children, and the recommendation comes from the one function ``recommend``. The outcome is logged as
one MLflow run (``<name> race`` / ``<name> stagewise``, tag ``kbench.sweep.search``): the recommended config's
metrics over every question, the search's cost as ``search_*`` metrics, and ``search.md`` / ``search.json`` /
``winner.yaml`` as artifacts. No child run per config: a race scores most configs on part of the questions
only, which is no run a child could stand for.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from kbench.compare import Comparison, compare_scores
from kbench.compare.compare import RunScores
from kbench.compare.recommendation import recommend_comparison
from kbench.compare.report import ranking_lines
from kbench.evaluation.stage import summarize
from kbench.hashing import stable_hash
from kbench.paths import workspace_dir
from kbench.sweep.expand import SweepPlan
from kbench.sweep.racing import RaceResult
from kbench.sweep.scoring import SearchCost
from kbench.tracking import tags as tag
from kbench.tracking.guard import owner_tags
from kbench.tracking.mlflow_run import ensure_experiment, fill_run, mlflow_client

SEARCH_TAG = "kbench.sweep.search"  # grid | race | stagewise, on a search's MLflow run


@dataclass
class SearchOutcome:
    strategy: str
    headline: str
    n_questions: int
    n_configs: int
    cost: SearchCost
    frames: dict[str, pd.DataFrame]  # per config scored on every question: its per-query results
    comparison: Comparison | None  # the configs scored on every question, compared as a grid's are
    recommended: str
    tied: list[str]
    race: RaceResult | None = None
    notes: list[str] = field(default_factory=list)  # what the strategy assumes, what it checked
    steps: list[str] = field(default_factory=list)  # stagewise: what each stage fixed
    stage_races: dict[str, RaceResult] = field(default_factory=dict)  # stagewise with race: true, per stage
    run_id: str | None = None
    tracking_uri: str | None = None
    winner_config: Path | None = None

    def lines(self) -> list[str]:
        c = self.cost
        out = [f"{self.strategy}: {self.n_configs} configs, {self.n_questions} questions; "
               f"{c.configs_scored} configs scored, {c.groups_embedded} corpora embedded "
               f"({c.configs_embedded} configs' worth), {c.scorings} config-question scorings of "
               f"{self.n_configs * self.n_questions} a grid makes; embedding {c.embed_seconds:.1f}s, "
               f"search {c.search_seconds:.1f}s"]
        if self.race is not None:
            out += race_lines(self.race, "  ")
        for stage, step in zip(self.stage_steps(), self.steps):
            out.append(f"  {step}")
            if stage in self.stage_races:
                out += race_lines(self.stage_races[stage], "    ")
        out += [f"  note: {n}" for n in self.notes]
        if self.comparison is not None:
            out += [""] + ranking_lines(self.comparison)
        out.append(f"recommended: {self.recommended} ({self.headline} "
                   f"{self.frames[self.recommended][self.headline].mean():.4f} over every question)"
                   + (f"; tied with it: {', '.join(self.tied)}" if self.tied else ""))
        if self.winner_config:
            out.append(f"  resolved config: {self.winner_config} (run it: kbench run {self.winner_config})")
        return out

    def stage_steps(self) -> list[str]:
        """The stage each of ``steps`` fixed (a step reads ``"<stage>: ..."``)."""
        return [step.split(":", 1)[0] for step in self.steps]

    def dropped(self) -> list[dict]:
        """Every config a race dropped, with the stage it was raced in (``None``: a race of the whole grid)."""
        races = ([(None, self.race)] if self.race else []) + list(self.stage_races.items())
        return [{**d.__dict__, "stage": stage} for stage, r in races for d in r.dropped]

    def summary(self) -> dict:
        return {"strategy": self.strategy, "headline": self.headline, "questions": self.n_questions,
                "configs": self.n_configs, "cost": self.cost.as_dict(), "recommended": self.recommended,
                "tied": self.tied, "notes": self.notes, "steps": self.steps,
                "dropped": self.dropped(),
                "threshold": self.race.threshold if self.race else None,
                "stage_thresholds": {stage: r.threshold for stage, r in self.stage_races.items()},
                "ranking": self.comparison.ranking()[["rank", "config", "mean", "vs_best", "p_vs_best_adjusted"]]
                .to_dict("records") if self.comparison is not None else []}


def race_lines(r: RaceResult, indent: str) -> list[str]:
    """A race's rounds, its correction and what it dropped, as the console and search.md show them."""
    out = [f"{indent}{r.rounds} rounds of {r.planned_rounds} planned; {r.correction}"]
    if r.dropped:
        out.append(f"{indent}dropped ({len(r.dropped)}), significantly worse than the best so far:")
        out += [f"{indent}  round {d.round}: {d.label} ({d.questions} questions, {d.mean:.4f}, {d.diff:+.4f} vs "
                f"{d.best}, p = {d.p_value:.3g})" for d in r.dropped]
    return out


def recommend(comparison: Comparison | None, frames: dict[str, pd.DataFrame], headline: str) -> tuple[str, list[str]]:
    """The recommended config and the others in its tie: the cheapest config in the top tie on the headline and
    every guard (``compare.recommendation.recommend_comparison``, as a grid sweep ends); when no config is in
    every tie, the best on the headline and its tie.

    The one place a search takes its recommendation from."""
    if comparison is None:
        label = max(frames, key=lambda k: frames[k][headline].mean())
        return label, []
    found = recommend_comparison(comparison)
    if found.config is not None:
        return found.config, [c for c in found.tie if c != found.config]
    ranking = comparison.ranking()
    return str(ranking.iloc[0]["config"]), [str(c) for c in ranking[ranking["vs_best"] == "tied"]["config"]]


def compare_frames(frames: dict[str, pd.DataFrame], headline: str, plan: SweepPlan | None = None) -> Comparison | None:
    """The configs scored on every question, compared as a grid sweep's children are; the baseline is the
    plan's baseline config when it is among them (the config whose knobs are the baseline's), else the first."""
    if len(frames) < 2:
        return None
    runs = [RunScores(label, "", frame, "") for label, frame in frames.items()]
    baseline = next((c.label for c in (plan.configs if plan else []) if not c.knobs and c.label in frames), None)
    return compare_scores(runs, baseline=baseline)  # the grid's metrics: nDCG, recall, MRR of the finest level


def log_search(plan: SweepPlan, outcome: SearchOutcome) -> None:
    """One MLflow run for the search, and the recommended config's resolved config as ``winner.yaml``."""
    baseline = plan.baseline
    workspace = workspace_dir(baseline.workspace)
    key = stable_hash({"sweep": plan.sweep_key, "search": plan.search.model_dump(mode="json")}, 16)
    folder = workspace / "sweeps" / key
    folder.mkdir(parents=True, exist_ok=True)
    config = plan.by_label()[outcome.recommended]
    outcome.winner_config = folder / "winner.yaml"
    outcome.winner_config.write_text(
        f"# Recommended by the {outcome.strategy} search of sweep {plan.name}: {outcome.recommended}.\n"
        + yaml.safe_dump(config.experiment.resolved(), sort_keys=False), encoding="utf-8")
    (folder / "search.md").write_text("\n".join(outcome.lines()) + "\n", encoding="utf-8")
    (folder / "search.json").write_text(json.dumps(outcome.summary(), indent=2, default=float), encoding="utf-8")
    if not baseline.tracking.enabled:
        return
    client = mlflow_client(baseline.tracking.tracking_uri, workspace)
    experiment_id = ensure_experiment(client, baseline.tracking.experiment, workspace)
    name = f"{plan.name} {outcome.strategy}"
    run_id = client.create_run(experiment_id, run_name=name, tags={
        "mlflow.runName": name, tag.SWEEP_KEY: key, tag.SWEEP_ROLE: "parent", SEARCH_TAG: outcome.strategy,
        tag.SWEEP_CONFIGS: str(len(plan.configs)), tag.SWEEP_WINNER: outcome.recommended,
        tag.SWEEP_TIED: ", ".join(outcome.tied)[:5000], tag.SWEEP_HEADLINE: outcome.headline,
        tag.MLFLOW_NOTE: "\n".join(outcome.lines())[:5000], **owner_tags()}).info.run_id
    metrics = summarize(outcome.frames[outcome.recommended])
    metrics.update({f"search_{k}": float(v) for k, v in outcome.cost.as_dict().items()})
    fill_run(client, run_id, params={"search": json.dumps(plan.search.model_dump(mode="json"))[:6000]},
             metrics=metrics, run_dir=None)
    for file in ("search.md", "search.json", "winner.yaml"):
        client.log_artifact(run_id, str(folder / file))
    client.set_terminated(run_id, "FINISHED")
    outcome.run_id, outcome.tracking_uri = run_id, str(client.tracking_uri)
