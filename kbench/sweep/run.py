"""Run a sweep: one MLflow parent run, one child run per config, resumable after any interruption.

What is "finished": a child run of this sweep's parent (tag ``kbench.sweep.key``) with status FINISHED and
tag ``kbench.sweep.config_key`` = the config's run key. A child is created only once its config's results
exist (by the driver, the only MLflow writer), so a kill leaves at most the child being logged in state
RUNNING; the next start marks such a child KILLED and runs its config again. Failed configs get a FAILED
child carrying the error (tag ``kbench.error``, artifact ``error.txt``) and are tried again on the next
start. A config already FINISHED anywhere in the tracking store (same ``kbench.run_key``, e.g. by another
sweep or ``kbench run``) is not run again: a link child is logged instead (params and metrics copied, tag
``kbench.sweep.reused_from`` = the source run, whose artifacts hold the per-query results); ``reuse=False``
runs it again. A lock file per sweep stops two drivers of the same sweep from running at once.

At the end the finished configs are compared (kbench.compare): ranked on the headline metric, and one config
recommended (``evaluation.recommend``: the best by mean, or a cheaper config shown within the margin of it; the
rule every surface shows). The sweep's "winner" is that recommended config, there is no other: its resolved
config is written to ``<workspace>/sweeps/<sweep key>/winner.yaml``, and the parent run gets its metrics, that
file (artifact ``winner.yaml``), tags naming it and the recommendation and ranking as its MLflow description;
with ``report`` the markdown/HTML report too (artifact ``report/``).
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlsplit

import yaml

from kbench.compare import Comparison, compare_runs, headline_metric, write_report
from kbench.compare.evidence import comparison_evidence
from kbench.compare.recommendation import recommend_by_tag, recommend_comparison
from kbench.compare.report import md_table, ranking_rows
from kbench.embedding.choice import drift_note
from kbench.evaluation.config import LEVELS
from kbench.evaluation.recommend import Recommendation
from kbench.evalsets.match import decision_line
from kbench.paths import workspace_dir
from kbench.progress import duration
from kbench.pipeline import preflight
from kbench.sweep.executors import ComputedRun, JobFailure, make_job
from kbench.sweep.effects import effects_markdown, grid_effects, log_effects
from kbench.sweep.expand import SweepConfig, SweepPlan
from kbench.sweep.summary import (decision_metrics, decision_tags, knob_markdown, parent_name, plan_knob_table,
                                  plan_lines, winner_comments)
from kbench.trace import traced
from kbench.tracking import tags as tag
from kbench.tracking.fingerprint import FINGERPRINT_FILE, fingerprint_tags
from kbench.tracking.mlflow_dataset import log_dataset_input, publish_record, set_label
from kbench.tracking.mlflow_export import describe, export_logged_run
from kbench.tracking.mlflow_pages import log_winner_model
from kbench.tracking.mlflow_run import (MAX_PARAM_CHARS, ensure_experiment, fill_run, mlflow_client,
                                        record_failed_run, run_params, run_tags)
from kbench.tracking.guard import mark_abandoned, owner_tags
from kbench.tracking.read import find_finished_elsewhere, sweep_children
from kbench.tracking.run_folder import check_workspace, run_times, write_complete
from kbench.tracking.run_records import read_dataset_record
from kbench.errors import UserError
from kbench.filter_strings import literal

LIVE_STATUSES = ("RUNNING", "SCHEDULED")


class SweepError(UserError, RuntimeError):
    pass


@dataclass
class SweepOutcome:
    parent_run_id: str
    tracking_uri: str
    experiment_id: str
    sweep_key: str
    status: dict[str, str] = field(default_factory=dict)  # label -> ran | done | reused | failed
    run_ids: dict[str, str] = field(default_factory=dict)  # label -> child run id
    errors: dict[str, str] = field(default_factory=dict)
    killed_children: list[str] = field(default_factory=list)  # RUNNING children of an interrupted start
    report_dir: Path | None = None
    report_error: str | None = None
    comparison: Comparison | None = None  # the finished configs compared (two or more): ranking, tests
    winner: str | None = None  # the recommended config (``recommendation.config``; the only one that finished)
    winner_run_id: str | None = None
    winner_config: Path | None = None  # its resolved config (winner.yaml), runnable with `kbench run`
    headline: str | None = None  # the metric the configs are ranked on
    headline_value: float | None = None  # the winner's
    warnings: list[str] = field(default_factory=list)  # the plan's: configs that lose by construction
    recommendation: Recommendation | None = None  # evaluation.recommend over the finished configs (two or more)
    effects: list = field(default_factory=list)  # evaluation.effects.Effect: the grid's factor effects
    effects_note: str = ""  # why there are none (no complete grid, one config), when there are none
    unscored: bool = False  # every config finished on questions none of which carries a label (a query log's set)

    def count(self, status: str) -> int:
        return sum(1 for s in self.status.values() if s == status)


class SweepLock:
    """An exclusive flock on <workspace>/sweeps/<sweep_key>.lock; the kernel drops it when the process dies."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip()
            os.close(self._fd)
            raise SweepError(f"this sweep is already running (process {holder or '?'}, lock {self.path}); "
                             "wait for it to finish or stop that process, then start it again") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)
        return self

    def __exit__(self, *exc):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def child_tags(plan: SweepPlan, config: SweepConfig) -> dict[str, str]:
    """The sweep's tags on a child: its label, config key, the knobs that differ from the baseline
    (``kbench.sweep.knobs``) and one ``kbench.knob.<path>`` tag per knob that differs between any two configs
    of the sweep, with this config's resolved value ("-": it has no such knob), so MLflow's run table shows
    what each child ran."""
    differing = plan_knob_table(plan).of(config.label) if config in plan.configs else {}
    tags = {tag.SWEEP_KEY: plan.sweep_key, tag.SWEEP_ROLE: "child", tag.SWEEP_LABEL: config.label,
            tag.SWEEP_CONFIG_KEY: config.run_key,
            tag.SWEEP_KNOBS: ", ".join(f"{k}={v}" for k, v in config.knobs.items())[:MAX_PARAM_CHARS] or "baseline",
            **{f"{tag.KNOB_PREFIX}{k}": v[:MAX_PARAM_CHARS] for k, v in {**config.knobs, **differing}.items()}}
    if config.aliases:
        tags[tag.SWEEP_ALIASES] = ", ".join(config.aliases)
    return tags


def find_parent(client, experiment_id: str, sweep_key: str):
    runs = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_KEY}` = {literal(sweep_key, 'sweep key')} and "
                                               f"tags.`{tag.SWEEP_ROLE}` = 'parent'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0] if runs else None


def _create_child(client, experiment_id: str, parent_id: str, name: str, tags: dict[str, str],
                  start_ms: int | None = None) -> str:
    """A child run named by its label (the knobs that differ from the baseline, shortened): the parent already
    says which sweep it belongs to."""
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

    run = client.create_run(experiment_id, run_name=name, start_time=start_ms,
                            tags={MLFLOW_RUN_NAME: name, MLFLOW_PARENT_RUN_ID: parent_id, **tags, **owner_tags()})
    return run.info.run_id


def _materialize(computed: ComputedRun, workspace: Path) -> Path:
    """The run folder on this machine: the worker's if this driver sees it, else rebuilt from its files."""
    run_dir = Path(computed.run_dir)
    if run_dir.is_dir():
        return run_dir
    def write(folder: Path) -> None:
        for rel, data in computed.files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    local = workspace / "runs" / run_dir.name
    return local if local.is_dir() else write_complete(local, write)


def run_sweep(plan: SweepPlan, executor, *, reuse: bool = True, report: bool = True,
              say: Callable[[str], None] = print) -> SweepOutcome:
    baseline = plan.baseline
    workspace = workspace_dir(baseline.workspace)
    if not baseline.tracking.enabled:
        raise SweepError("tracking.enabled is false: a sweep records its progress in MLflow and cannot resume "
                         "without it; enable tracking (or run configs one by one with `kbench run --no-log`)")
    check_workspace(workspace)
    check_configs(plan)
    with SweepLock(workspace / "sweeps" / f"{plan.sweep_key}.lock"):
        client = mlflow_client(baseline.tracking.tracking_uri, workspace)
        experiment_id = ensure_experiment(client, baseline.tracking.experiment, workspace)
        parent = find_parent(client, experiment_id, plan.sweep_key)
        if parent is None:
            name = parent_name(plan)
            parent_id = client.create_run(
                experiment_id, run_name=name,
                tags={"mlflow.runName": name, tag.SWEEP_KEY: plan.sweep_key, tag.SWEEP_ROLE: "parent",
                      tag.SWEEP_CONFIGS: str(len(plan.configs)), **owner_tags()}).info.run_id
            say(f"sweep {plan.name}: {len(plan.configs)} configs, new parent run {parent_id}")
        else:
            parent_id = parent.info.run_id
            client.update_run(parent_id, status="RUNNING")
            client.set_tag(parent_id, tag.OWNER, owner_tags()[tag.OWNER])
            say(f"sweep {plan.name}: {len(plan.configs)} configs, resuming parent run {parent_id}")
        try:
            return _run_under_parent(client, experiment_id, parent_id, plan, executor, workspace, reuse, report, say)
        except BaseException as e:  # the parent never stays RUNNING after its driver stops (a kill -9 aside)
            try:
                client.set_tag(parent_id, tag.ERROR, f"{type(e).__name__}: {e}"[:5000])
                client.set_terminated(parent_id, "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
            except Exception:  # the store itself failing: the next start or run marks the parent
                pass
            raise


def _name_parent(client, parent_id: str, name: str) -> None:
    """The parent's name in the runs list (the run's name) and in its tag, the two places MLflow reads it from."""
    client.update_run(parent_id, name=name)
    client.set_tag(parent_id, "mlflow.runName", name)


def _show_the_set(client, experiment_id: str, parent_id: str, plan: SweepPlan, record: dict,
                  say: Callable[[str], None]) -> None:
    """The parent names the set (name and digest) and has it as its dataset input (the runs list's Dataset
    column); the set is published as an MLflow evaluation dataset (the Datasets view). A store without
    evaluation datasets (a file store) keeps the rest."""
    _name_parent(client, parent_id, parent_name(plan, record))
    log_dataset_input(client, parent_id, record)
    try:
        publish_record(record, str(client.tracking_uri), experiment_id)
    except Exception as e:  # the runs are logged; only the Datasets view misses the set
        say(f"  note: the question set {set_label(record)} is not in MLflow's Datasets view ({type(e).__name__}: "
            f"{str(e)[:200]}); publish it with `kbench datasets publish`")


def _show_a_childs_set(client, parent_id: str, plan: SweepPlan, child_ids: list[str]) -> None:
    """The first child's dataset input on the parent and in its name, unless the parent already has one."""
    parent = client.get_run(parent_id)
    if parent.inputs and parent.inputs.dataset_inputs:
        return
    for run_id in child_ids:
        child = client.get_run(run_id)
        inputs = child.inputs.dataset_inputs if child.inputs else []
        if inputs:
            client.log_inputs(parent_id, datasets=[inputs[0]])
            _name_parent(client, parent_id,
                         parent_name(plan, {"name": inputs[0].dataset.name, "digest": inputs[0].dataset.digest}))
            return


def check_configs(plan: SweepPlan) -> None:
    """Before the parent run (and in ``--dry-run``): every config's start-time checks (``pipeline.preflight``:
    the workspace, each model installed and loadable, the store, endpoints and keys), each distinct check once, so
    a config that cannot start fails the sweep in seconds with one line per config, never after the others ran.
    Problems the config alone shows (a model on the wrong provider or backend) were refused when it loaded."""
    checked: dict[str, str | None] = {}
    problems: list[str] = []
    for config in plan.configs:
        experiment = config.experiment
        data = experiment.resolved()
        key = json.dumps([str(workspace_dir(experiment.workspace))]
                         + [data.get(k) for k in ("embedding", "enrichment", "rerank", "store", "evaluation", "query",
                                                  "retrieval")], sort_keys=True, default=str)
        if key not in checked:
            try:
                preflight(experiment)
                checked[key] = None
            except (UserError, ValueError) as e:
                checked[key] = " ".join(str(e).split())
        if checked[key]:
            problems.append(f"  [{config.label}] {checked[key]}")
    if problems:
        raise SweepError(f"{len(problems)} of {len(plan.configs)} configs cannot start; fix them (or drop them from "
                         "the sweep), nothing ran:\n" + "\n".join(problems))


def _run_under_parent(client, experiment_id: str, parent_id: str, plan: SweepPlan, executor, workspace: Path,
                      reuse: bool, report: bool, say: Callable[[str], None]) -> SweepOutcome:
    outcome = SweepOutcome(parent_id, str(client.tracking_uri), experiment_id, plan.sweep_key,
                           warnings=list(plan.warnings))
    _log_parent_plan(client, parent_id, plan)
    if plan.warnings:
        client.set_tag(parent_id, tag.SWEEP_WARNINGS, "\n".join(plan.warnings)[:5000])
    for line in plan_lines(plan, indent="  "):  # what each config runs: its resolved knobs, warnings, notes
        say(line)

    done: dict[str, str] = {}  # config run key -> finished child id
    for run in sweep_children(client, experiment_id, parent_id):
        key = run.data.tags.get(tag.SWEEP_CONFIG_KEY)
        if run.info.status == "FINISHED" and key:
            done.setdefault(key, run.info.run_id)
        elif run.info.status in LIVE_STATUSES:  # the lock says no driver is alive: a kill left it
            client.set_tag(run.info.run_id, tag.SWEEP_NOTE,
                           "left RUNNING by an interrupted sweep; its config was run again")
            client.set_terminated(run.info.run_id, "KILLED")
            outcome.killed_children.append(run.info.run_id)
    mark_abandoned(client, experiment_id)  # other runs of the experiment a killed process left RUNNING

    todo: list[SweepConfig] = []
    for config in plan.configs:
        if config.run_key in done:
            outcome.status[config.label] = "done"
            outcome.run_ids[config.label] = done[config.run_key]
            continue
        source = find_finished_elsewhere(client, config.run_key, parent_id) if reuse else None
        if source is not None:
            outcome.run_ids[config.label] = _link_child(client, experiment_id, parent_id, plan, config, source)
            outcome.status[config.label] = "reused"
            say(f"  {config.label}: reused finished run {source.info.run_id} (same run key {config.run_key})")
            continue
        todo.append(config)
    say(f"  {outcome.count('done')} finished before, {outcome.count('reused')} reused, {len(todo)} to run"
        + (f", {len(outcome.killed_children)} interrupted child runs marked KILLED" if outcome.killed_children else ""))

    by_key = {c.run_key: c for c in todo}
    jobs = [make_job(c.label, c.experiment) for c in todo]
    started = time.perf_counter()
    begun = iter(range(1, len(jobs) + 1))

    def announce(job) -> None:  # before a config's stages print their bars: which config of how many
        say(f"  [{next(begun)}/{len(jobs)}] {job.label}: started ({duration(time.perf_counter() - started)} "
            "into the sweep)")

    executor.on_start = announce
    shown_set = False
    try:
        for n, (job, result) in enumerate(executor.run(jobs), start=1):
            config = by_key[job.run_key]
            progress = _progress(time.perf_counter() - started, n, len(jobs))
            if isinstance(result, JobFailure):
                outcome.run_ids[config.label] = _failed_child(client, experiment_id, parent_id, plan, config, result)
                outcome.status[config.label] = "failed"
                outcome.errors[config.label] = str(result)
                say(f"  [{n}/{len(jobs)}] {config.label}: FAILED after {duration(result.seconds)}: {result} "
                    f"({progress})")
            else:
                outcome.run_ids[config.label] = _finished_child(
                    client, experiment_id, parent_id, plan, config, result, workspace, executor.name)
                outcome.status[config.label] = "ran"
                record = read_dataset_record(_materialize(result, workspace))
                if record is not None and not shown_set:
                    _show_the_set(client, experiment_id, parent_id, plan, record, say)
                    shown_set = True
                say(f"  [{n}/{len(jobs)}] {config.label}: {_headline(result.metrics)}"
                    f"{drift_note(config.experiment.embedding)} in {duration(result.seconds)} ({progress})")
    finally:
        executor.close()
    if not shown_set:  # nothing ran here (all reused or finished before): a child's set names the parent
        _show_a_childs_set(client, parent_id, plan, list(outcome.run_ids.values()))

    client.set_tag(parent_id, tag.SWEEP_SUMMARY,
                   json.dumps({s: outcome.count(s) for s in ("ran", "done", "reused", "failed")}))
    if outcome.errors:  # a pick among the configs that ran could lose to one that did not: none is named
        for key, value in {tag.SWEEP_WINNER: "none", tag.SWEEP_RECOMMENDATION: "none",
                           tag.MLFLOW_NOTE: _failed_note(plan, outcome)}.items():
            client.set_tag(parent_id, key, value)
    if any(s != "failed" for s in outcome.status.values()):
        try:
            if outcome.errors:
                _compare_only(plan, outcome)
            else:
                _pick_winner(client, plan, outcome, workspace, report)
            outcome.effects, outcome.effects_note = grid_effects(plan, outcome.comparison)
            if outcome.effects:  # artifacts factor_effects.json/.md and metrics effect_* on the parent
                log_effects(client, parent_id, outcome.effects, outcome.headline, workspace / "sweeps" / plan.sweep_key)
            if report and outcome.comparison is not None:
                rows, legend = knob_markdown(plan)
                outcome.report_dir = write_report(
                    outcome.comparison, workspace / "sweeps" / plan.sweep_key / "report", configs=rows,
                    configs_legend=legend,
                    recommendation=outcome.recommendation.lines() if outcome.recommendation else None,
                    appendix=effects_markdown(outcome.effects, outcome.headline) if outcome.effects else None)
                client.log_artifacts(parent_id, str(outcome.report_dir), "report")
        except Exception as e:  # the runs are logged; a ranking or report problem must not hide that
            outcome.report_error = f"{type(e).__name__}: {e}"
            say(f"  comparison not finished: {outcome.report_error}")
    client.set_terminated(parent_id, "FAILED" if outcome.errors else "FINISHED")
    return outcome


def _scored(metrics: dict[str, float]) -> bool:
    """Whether a run logged any quality metric (``doc_``, ``chunk_``, ``span_``): a run over questions that carry
    no label logs none, never a 0."""
    return any(name.split("_", 1)[0] in LEVELS for name in metrics)


def _failed_note(plan: SweepPlan, outcome: SweepOutcome) -> str:
    lines = [f"**No recommendation: {outcome.count('failed')} of {len(plan.configs)} configs failed.** A config "
             "picked among the rest could lose to one that did not run. Fix the failures and run the sweep again: "
             "the finished configs are kept and not run again.", ""]
    lines += [f"- FAILED `{label}`: {error}" for label, error in outcome.errors.items()]
    return "\n".join(lines)[:5000]


def _compare_only(plan: SweepPlan, outcome: SweepOutcome) -> None:
    """Configs failed: rank the finished ones (two or more) for the reader, recommend none, write no winner.yaml."""
    if sum(1 for s in outcome.status.values() if s != "failed") >= 2:
        outcome.comparison = compare_runs(outcome.parent_run_id, tracking_uri=outcome.tracking_uri)
        outcome.headline = outcome.comparison.headline


def _progress(elapsed: float, done: int, total: int) -> str:
    left = f", about {duration(elapsed / done * (total - done))} left" if done < total else ""
    return f"{duration(elapsed)} into the sweep{left}"


def _headline(metrics: dict[str, float]) -> str:
    key = headline_metric(metrics)
    return f"{key} {metrics[key]:.4f}" if key else "no ranking metric"


def _pick_winner(client, plan: SweepPlan, outcome: SweepOutcome, workspace: Path, report: bool) -> None:
    """Compare the finished configs and recommend one (``evaluation.recommend``, as ``kbench compare`` and every
    search do); write its resolved config (winner.yaml) and give the parent run its metrics, the config, tags
    naming it and the recommendation with the ranking as description. One config finished: it is the one."""
    finished = [label for label, status in outcome.status.items() if status != "failed"]
    if finished and not any(_scored(client.get_run(outcome.run_ids[label]).data.metrics) for label in finished):
        outcome.unscored = True  # rankings and traces kept for kbench judge and kbench label; nothing to pick on
        client.set_tag(outcome.parent_run_id, tag.SWEEP_WINNER, "none")
        return
    if len(finished) >= 2:
        outcome.comparison = compare_runs(outcome.parent_run_id, tracking_uri=outcome.tracking_uri)
        outcome.headline = outcome.comparison.headline
        evidence = replace(comparison_evidence(outcome.comparison), sweep_args=plan.command or None,
                           rests_on=decision_line(plan.baseline.dataset, workspace) or "")
        outcome.recommendation = recommend_comparison(outcome.comparison, plan.baseline.recommend, evidence=evidence)
        outcome.winner = outcome.recommendation.config  # None: every config over a budget
        run_ids = {r.label: r.run_id for r in outcome.comparison.runs}
        outcome.winner_run_id = run_ids.get(outcome.winner) if outcome.winner else None
    else:
        outcome.winner = finished[0]
        outcome.winner_run_id = outcome.run_ids[finished[0]]
    config = plan.by_label().get(outcome.winner) if outcome.winner else None
    metrics = dict(client.get_run(outcome.winner_run_id).data.metrics) if outcome.winner_run_id else {}
    outcome.headline = outcome.headline or headline_metric(metrics)
    outcome.headline_value = metrics.get(outcome.headline) if outcome.headline else None
    folder = workspace / "sweeps" / plan.sweep_key
    folder.mkdir(parents=True, exist_ok=True)
    if config is None:  # every config over a budget: a winner.yaml of an earlier run of this sweep no longer holds
        forget_winner(client, outcome.parent_run_id, folder / "winner.yaml")
    else:
        outcome.winner_config = folder / "winner.yaml"
        outcome.winner_config.write_text(
            f"# The recommendation of sweep {plan.name} (parent run {outcome.parent_run_id}): {_verdict(outcome)}\n"
            + winner_comments(outcome.recommendation)
            + f"# Its resolved config; run it again with: kbench run {outcome.winner_config}\n"
            + "# Paths are absolute and the workspace is the one used: it runs the same from any folder.\n"
            + yaml.safe_dump(config.experiment.portable(), sort_keys=False), encoding="utf-8")
        client.log_artifact(outcome.parent_run_id, str(outcome.winner_config))
    found = outcome.recommendation
    parent_tags = {tag.SWEEP_WINNER: outcome.winner or "none", tag.SWEEP_WINNER_RUN: outcome.winner_run_id or "",
                   tag.SWEEP_HEADLINE: outcome.headline or "",
                   tag.MLFLOW_NOTE: _parent_note(plan, outcome, report),
                   tag.SWEEP_RECOMMEND_BY: recommend_by_tag(plan.baseline.recommend),
                   tag.SWEEP_RECOMMENDATION: (outcome.winner or "none")[:MAX_PARAM_CHARS]}
    if found is not None:
        parent_tags.update(decision_tags(found))
    fill_run(client, outcome.parent_run_id, params={}, run_dir=None, tags=parent_tags,
             metrics={**metrics, **(decision_metrics(found) if found is not None else {})})
    knobs = list(dict.fromkeys(f"{tag.KNOB_PREFIX}{k}" for c in plan.configs for k in c.knobs))
    describe(client, outcome.experiment_id, plan.baseline.tracking.experiment, metrics, plan.baseline.tracking,
             knobs=knobs, headline=outcome.headline)
    if config is not None:  # the recommended config as an MLflow LoggedModel the runs link to
        log_winner_model(client, outcome.experiment_id, sweep_key=plan.sweep_key, sweep_name=plan.name,
                         label=outcome.winner, parent_run_id=outcome.parent_run_id,
                         winner_run_id=outcome.winner_run_id, params=run_params(config.experiment),
                         metrics=metrics, config_file=outcome.winner_config)


def forget_winner(client, parent_run_id: str, path: Path) -> None:
    """Remove the sweep's winner.yaml and, on a local store, its copy among the parent run's artifacts: a resume
    that recommends none must not leave the last pick looking current."""
    path.unlink(missing_ok=True)
    where = urlsplit(client.get_run(parent_run_id).info.artifact_uri)
    if where.scheme in ("", "file"):
        (Path(unquote(where.path)) / path.name).unlink(missing_ok=True)


def _verdict(outcome: SweepOutcome) -> str:
    """The recommendation line without its prefix; with one config finished, that it is the only one."""
    if outcome.recommendation is not None:
        return outcome.recommendation.reason
    value = f", {outcome.headline} {outcome.headline_value:.4f}" if outcome.headline_value is not None else ""
    return f"{outcome.winner} (the only config that finished{value}: nothing to compare it with)"


def _parent_note(plan: SweepPlan, outcome: SweepOutcome, report: bool) -> str:
    """The parent run's MLflow description: the recommendation (the sweep's one pick), the ranking table, each
    config's knobs, the report."""
    provisional = (outcome.recommendation is not None and outcome.recommendation.config is not None
                   and not outcome.recommendation.decided)
    lines = [f"**Recommended{' (provisional: the set cannot decide)' if provisional else ''}: "
             f"{outcome.winner or 'none'}**"
             + (f", child run `{outcome.winner_run_id}`; its resolved config is the artifact `winner.yaml`, its "
                "metrics are this run's metrics." if outcome.winner else ".")]
    if outcome.recommendation is not None:
        lines += ["", *(line.strip() for line in outcome.recommendation.lines())]
    else:
        lines += ["", f"recommendation: {_verdict(outcome)}"]
    lines += [f"Warning: {w}" for w in outcome.warnings]
    if outcome.comparison is not None:
        lines += ["", f"Ranking on {outcome.headline}, best first:", "", md_table(ranking_rows(outcome.comparison))]
    rows, legend = knob_markdown(plan)
    if rows and len(rows[0]) > 1:
        lines += ["", "Each config's knobs that differ between configs (resolved):", "", md_table(rows)]
        lines += [f"- {line}" for line in legend]
    if outcome.comparison is not None and report:
        lines += ["", "Full report with the significance tests and plots: artifact `report/report.html`."]
    return "\n".join(lines)[:5000]


def _log_parent_plan(client, parent_id: str, plan: SweepPlan) -> None:
    """The baseline's params, the sweep blocks and sweep_plan.json (label, run key, knobs per config)."""
    table = plan_knob_table(plan)
    rows = [{"label": c.label, "run_key": c.run_key, "knobs": c.knobs, "aliases": c.aliases,
             "differing_knobs": table.of(c.label), "overrides": c.overrides} for c in plan.configs]
    client.log_text(parent_id, json.dumps({"sweep_key": plan.sweep_key, "baseline_run_key": plan.baseline.run_key(),
                                           "configs": rows, "label_legend": plan.legend}, indent=2, default=str),
                    "sweep_plan.json")
    params = run_params(plan.baseline)
    params.update({f"sweep.{k}": json.dumps(plan.raw_blocks.get(k))[:MAX_PARAM_CHARS]
                   for k in ("sweep", "variants") if plan.raw_blocks.get(k)})
    existing = client.get_run(parent_id).data.params  # params are write-once in MLflow
    params = {k: v for k, v in params.items() if k not in existing}
    if params:
        fill_run(client, parent_id, params=params, metrics={}, run_dir=None)


def _finished_child(client, experiment_id, parent_id, plan, config, result: ComputedRun, workspace: Path,
                    executor_name: str) -> str:
    run_dir = _materialize(result, workspace)
    tags = {tag.RUN_KEY: config.run_key, tag.DATASET: result.dataset_name, tag.RUN_FOLDER: run_dir.name,
            **run_tags(config.experiment, result.metrics), **config.experiment.tracking.tags,
            **child_tags(plan, config), tag.SWEEP_EXECUTOR: executor_name, tag.WORKER: f"{result.host}:{result.pid}",
            **result.tags}
    fingerprint_file = run_dir / FINGERPRINT_FILE
    if fingerprint_file.is_file():  # written where the config ran (a Dask worker's own precision)
        tags.update(fingerprint_tags(json.loads(fingerprint_file.read_text(encoding="utf-8"))))
    started_ms, ended_ms = run_times(run_dir)
    with traced("mlflow"):
        run_id = _create_child(client, experiment_id, parent_id, config.label, tags, started_ms)
        fill_run(client, run_id, params=run_params(config.experiment, workspace), metrics=result.metrics,
                 run_dir=run_dir)
        client.set_terminated(run_id, "FINISHED", end_time=ended_ms)
    with traced("mlflow_export"):  # the dataset input, traces and prompts, from the run folder
        export_logged_run(client, experiment_id, run_id, run_dir)
    return run_id


def _failed_child(client, experiment_id, parent_id, plan, config, failure: JobFailure) -> str:
    tags = {tag.RUN_KEY: config.run_key, **child_tags(plan, config)}
    run_id = _create_child(client, experiment_id, parent_id, config.label, tags)
    fill_run(client, run_id, params=run_params(config.experiment, workspace_dir(config.experiment.workspace)),
             metrics={}, run_dir=None)
    record_failed_run(client, run_id, str(failure), failure.traceback)
    return run_id


def _link_child(client, experiment_id, parent_id, plan, config, source) -> str:
    """A child that points at an equal config's finished run instead of computing it again."""
    tags = {**child_tags(plan, config), tag.SWEEP_REUSED_FROM: source.info.run_id,
            tag.DATASET: source.data.tags.get(tag.DATASET, ""),
            **{k: v for k, v in source.data.tags.items() if k == tag.LLM_PARTIAL or k in tag.LANGUAGE_TAGS}}
    # the source's start and end: the link took no time, the config took the source's
    run_id = _create_child(client, experiment_id, parent_id, config.label, tags, source.info.start_time)
    fill_run(client, run_id, params=dict(source.data.params), metrics=dict(source.data.metrics), run_dir=None)
    inputs = source.inputs.dataset_inputs if source.inputs else []
    if inputs:  # the runs list's Dataset column: the set the source ran on
        client.log_inputs(run_id, datasets=list(inputs))
    client.set_terminated(run_id, "FINISHED", end_time=source.info.end_time)
    return run_id
