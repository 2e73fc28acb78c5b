"""What a search of a sweep (race, stage-wise) ends with, the same way for each: the configs scored on every
question compared as a grid sweep's are, one recommendation, the cost, and one MLflow run.

The comparison at the end is ``compare.compare_scores`` (paired test, Holm), as for a grid sweep's children,
and the recommendation is ``evaluation.recommend`` with the sweep's ``recommend`` section, through the one
function ``recommend`` here (each config's ``cost_index_bytes`` from the scorer, as a grid's runs log it). The
outcome is logged as one MLflow run (``<name> race`` / ``<name> stagewise``, tag ``kbench.sweep.search``): the
recommended config's metrics over every question, the search's cost as ``search_*`` metrics, and
``search.md`` / ``search.json`` / ``winner.yaml`` (the recommended config) as artifacts. No child run per config:
a race scores most configs on part of the questions only, which is no run a child could stand for.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from kbench.compare import Comparison, compare_scores
from kbench.compare.compare import RunScores
from kbench.compare.recommendation import recommend_by_tag, recommend_comparison
from kbench.compare.report import ranking_lines
from kbench.compare.evidence import config_warnings, set_evidence
from kbench.evalsets.match import decision_line
from kbench.evaluation.recommend import Evidence, Recommendation, RecommendConfig
from kbench.evaluation.stage import summarize
from kbench.hashing import stable_hash
from kbench.paths import workspace_dir
from kbench.sweep.expand import SweepPlan
from kbench.sweep.racing import RaceResult
from kbench.sweep.scoring import ConfigScorer, SearchCost
from kbench.sweep.sequential import SequentialResult
from kbench.sweep.summary import decision_metrics, decision_tags, parent_name, winner_comments
from kbench.tracking import tags as tag
from kbench.tracking.guard import owner_tags
from kbench.tracking.mlflow_run import ensure_experiment, fill_run, mlflow_client, run_params

SEARCH_TAG = "kbench.sweep.search"  # grid | race | stagewise | until-decided, on a search's MLflow run


@dataclass
class SearchOutcome:
    strategy: str
    headline: str
    n_questions: int
    n_configs: int
    cost: SearchCost
    frames: dict[str, pd.DataFrame]  # per config scored on every question: its per-query results
    comparison: Comparison | None  # the configs scored on every question, compared as a grid's are
    recommended: str | None  # None only when a budget excludes every config
    recommendation: Recommendation | None  # None when only one config was scored on every question
    race: RaceResult | None = None
    sequence: SequentialResult | None = None  # --until-decided: its looks and why it stopped
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
        if self.sequence is not None:
            out += self.sequence.lines("  ")
        for stage, step in zip(self.stage_steps(), self.steps):
            out.append(f"  {step}")
            if stage in self.stage_races:
                out += race_lines(self.stage_races[stage], "    ")
        out += [f"  note: {n}" for n in self.notes]
        if self.comparison is not None:
            out += [""] + ranking_lines(self.comparison)
        if self.recommendation is not None:
            out += self.recommendation.lines()
        else:
            out.append(f"recommendation: {self.recommended} (the only config scored on every question, {self.headline} "
                       f"{self.frames[self.recommended][self.headline].mean():.4f}: nothing to compare it with)")
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
                "recommendation": self.recommendation.as_dict() if self.recommendation else None,
                "notes": self.notes, "steps": self.steps,
                "dropped": self.dropped(),
                "threshold": self.race.threshold if self.race else None,
                "looks": [vars(look) for look in self.sequence.looks] if self.sequence else [],
                "stopped": self.sequence.stopped if self.sequence else None,
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


def recommend(comparison: Comparison | None, frames: dict[str, pd.DataFrame], headline: str,
              config: RecommendConfig | None = None, evidence: Evidence | None = None
              ) -> tuple[str | None, Recommendation | None]:
    """The recommended config and the recommendation behind it (``compare.recommendation.recommend_comparison``
    with the sweep's ``recommend`` section, as a grid sweep ends); with one config scored on every question, that
    config. The one place a search takes its recommendation from; ``evidence``: ``search_evidence``."""
    if comparison is None:
        return max(frames, key=lambda k: frames[k][headline].mean()), None
    found = recommend_comparison(comparison, config, evidence=evidence)
    return found.config, found


def search_evidence(plan: SweepPlan, scorer: ConfigScorer) -> Evidence:
    """What a search's recommendation rests on beside the scores, as a grid's reads it from its runs: the set (its
    pool, its altered corpus) and each config's warnings (its corpus's language census, its legs' analyzers)."""
    dataset = plan.baseline.dataset
    available, corpus = set_evidence(dataset.path)
    warnings = {c.label: tuple(config_warnings(scorer.language_tags.get(c.label, {}), run_params(c.experiment)))
                for c in plan.configs}
    return Evidence(dataset.name or dataset.path or "", available, corpus, {k: v for k, v in warnings.items() if v},
                    sweep_args=plan.command or None,
                    rests_on=decision_line(dataset, workspace_dir(plan.baseline.workspace)) or "")


def compare_frames(frames: dict[str, pd.DataFrame], headline: str, plan: SweepPlan | None = None,
                   costs: dict[str, dict[str, float]] | None = None) -> Comparison | None:
    """The configs scored on every question, compared as a grid sweep's children are; the baseline is the
    plan's baseline config when it is among them (the config whose knobs are the baseline's), else the first.
    ``costs``: each config's run-level costs (``cost_index_bytes``, ...), what the recommendation prices by."""
    if len(frames) < 2:
        return None
    costs = costs or {}
    runs = [RunScores(label, "", frame, "", summary=dict(costs.get(label, {}))) for label, frame in frames.items()]
    baseline = next((c.label for c in (plan.configs if plan else []) if not c.knobs and c.label in frames), None)
    return compare_scores(runs, baseline=baseline)  # the grid's metrics: nDCG, recall, MRR of the finest level


def log_search(plan: SweepPlan, outcome: SearchOutcome, started_ms: int | None = None) -> None:
    """One MLflow run for the search, and the recommended config's resolved config as ``winner.yaml``. The run
    starts at ``started_ms`` (when the search began) and ends now, so MLflow shows how long the search took."""
    baseline = plan.baseline
    workspace = workspace_dir(baseline.workspace)
    key = stable_hash({"sweep": plan.sweep_key, "search": plan.search.model_dump(mode="json"),
                       **({"strategy": outcome.strategy} if outcome.strategy != plan.search.strategy else {})}, 16)
    folder = workspace / "sweeps" / key
    folder.mkdir(parents=True, exist_ok=True)
    config = plan.by_label().get(outcome.recommended) if outcome.recommended else None
    if config is None:  # every config over a budget: an earlier search's winner.yaml no longer holds
        (folder / "winner.yaml").unlink(missing_ok=True)
    else:
        verdict = outcome.recommendation.reason if outcome.recommendation else outcome.recommended
        outcome.winner_config = folder / "winner.yaml"
        outcome.winner_config.write_text(
            f"# The recommendation of the {outcome.strategy} search of sweep {plan.name}: {verdict}\n"
            + winner_comments(outcome.recommendation)
            + "# Paths are absolute and the workspace is the one used: it runs the same from any folder.\n"
            + yaml.safe_dump(config.experiment.portable(), sort_keys=False), encoding="utf-8")
    (folder / "search.md").write_text("\n".join(outcome.lines()) + "\n", encoding="utf-8")
    (folder / "search.json").write_text(json.dumps(outcome.summary(), indent=2, default=float), encoding="utf-8")
    if not baseline.tracking.enabled:
        return
    client = mlflow_client(baseline.tracking.tracking_uri, workspace)
    experiment_id = ensure_experiment(client, baseline.tracking.experiment, workspace)
    name = parent_name(plan, strategy=outcome.strategy)  # the sweep, the search and the set: apart from a grid
    run_id = client.create_run(experiment_id, run_name=name, start_time=started_ms, tags={
        "mlflow.runName": name, tag.SWEEP_KEY: key, tag.SWEEP_ROLE: "parent", SEARCH_TAG: outcome.strategy,
        tag.SWEEP_CONFIGS: str(len(plan.configs)), tag.SWEEP_WINNER: outcome.recommended or "none",
        tag.SWEEP_RECOMMENDATION: outcome.recommended or "none", tag.SWEEP_HEADLINE: outcome.headline,
        tag.SWEEP_RECOMMEND_BY: recommend_by_tag(plan.baseline.recommend),
        **(decision_tags(outcome.recommendation) if outcome.recommendation else {}),
        tag.MLFLOW_NOTE: "\n".join(outcome.lines())[:5000], **owner_tags()}).info.run_id
    metrics = summarize(outcome.frames[outcome.recommended]) if outcome.recommended else {}
    metrics.update({f"search_{k}": float(v) for k, v in outcome.cost.as_dict().items()})
    if outcome.recommendation is not None:
        metrics.update(decision_metrics(outcome.recommendation))
    fill_run(client, run_id, params={"search": json.dumps(plan.search.model_dump(mode="json"))[:6000]},
             metrics=metrics, run_dir=None)
    for file in ("search.md", "search.json", "winner.yaml"):
        if (folder / file).is_file() and (file != "winner.yaml" or outcome.winner_config is not None):
            client.log_artifact(run_id, str(folder / file))
    client.set_terminated(run_id, "FINISHED")
    outcome.run_id, outcome.tracking_uri = run_id, str(client.tracking_uri)
