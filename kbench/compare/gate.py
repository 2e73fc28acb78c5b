"""The regression gate: is a candidate significantly worse than a baseline by more than a margin?

    from kbench.compare.gate import gate, resolve_side
    result = gate(resolve_side("configs/prod.yaml"), resolve_side("configs/candidate.yaml"), margin=0.01)
    result.passed, result.markdown(), result.as_dict()

Each side is a config file (run on the spot; a finished run with the same run key *and* the same fingerprint is
read back instead of recomputed, and the embedding and chunk caches serve the rest) or a logged run id. Runs are
paired by query id. For each gated metric (the headline metric by default, see ``compare.headline_metric``) the
paired test of ``evaluation/significance.py`` runs on the candidate's scores shifted up by the margin, i.e. on
``candidate - baseline + margin``: a metric *fails* when that shifted difference is below zero and its p-value,
corrected over the gated metrics (Holm by default), is below alpha. The tests are two-sided, so failing in the
worse direction only is a one-sided test at alpha / 2: a gate that blocks a merge errs towards letting it pass.

A gate never compares runs whose datasets differ (the fingerprint's dataset hash) unless told to, since a
difference there says nothing about the change being tested.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from kbench.compare.compare import headline_metric
from kbench.config import load_experiment
from kbench.evaluation.budgets import BUDGET_METRIC, OFFERED_BUDGET, is_budget_metric
from kbench.evaluation.significance import TESTS, adjust_p_values, bootstrap_ci
from kbench.paths import workspace_dir
from kbench.runner import run_experiment
from kbench.tracking.fingerprint import FINGERPRINT_FILE, run_fingerprint
from kbench.tracking.mlflow_run import mlflow_client
from kbench.tracking.read import (RunReadError, artifact_source, find_finished_elsewhere, find_run, read_artifact,
                                  read_per_query, tracking_client)
from kbench.errors import UserError

CONFIG_SUFFIXES = (".yaml", ".yml")


class GateError(UserError, ValueError):
    """Bad input to the gate (exit code 2): a missing run, unknown metric, different datasets, too few queries."""


@dataclass
class GateSide:
    """One side of the gate: per-query scores (indexed by query_id) and where they came from."""

    spec: str  # what the user gave: a config path or a run id
    label: str
    per_query: pd.DataFrame
    fingerprint: dict[str, Any] | None
    run_id: str | None = None
    how: str = "read"  # read (a logged run id), reused (a finished run of the config), ran (computed now)
    chunking: dict[str, str] = field(default_factory=dict)  # strategy, chunk_size: a chunk-size change is said


@dataclass
class MetricVerdict:
    metric: str
    baseline_mean: float
    candidate_mean: float
    diff: float  # candidate - baseline
    diff_ci_low: float
    diff_ci_high: float
    p_value: float  # the test on candidate - baseline + margin
    p_adjusted: float
    worse: bool  # significantly worse by more than the margin

    @property
    def verdict(self) -> str:
        return "FAIL" if self.worse else "pass"


@dataclass
class GateResult:
    baseline: GateSide
    candidate: GateSide
    verdicts: list[MetricVerdict]
    margin: float
    test: str
    correction: str
    alpha: float
    n_queries: int
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(v.worse for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def as_dict(self) -> dict[str, Any]:
        def side(s: GateSide) -> dict[str, Any]:
            return {"spec": s.spec, "label": s.label, "run_id": s.run_id, "how": s.how,
                    "fingerprint": s.fingerprint}

        def number(x: float) -> float | None:
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

        return {
            "passed": self.passed, "exit_code": self.exit_code, "margin": self.margin, "test": self.test,
            "correction": self.correction, "alpha": self.alpha, "n_queries": self.n_queries,
            "baseline": side(self.baseline), "candidate": side(self.candidate), "notes": self.notes,
            "metrics": [{"metric": v.metric, "baseline": v.baseline_mean, "candidate": v.candidate_mean,
                         "diff": v.diff, "diff_ci": [v.diff_ci_low, v.diff_ci_high], "p_value": number(v.p_value),
                         "p_adjusted": number(v.p_adjusted), "verdict": v.verdict} for v in self.verdicts],
        }

    def markdown(self) -> str:
        """A summary for a CI job's page (GitHub's $GITHUB_STEP_SUMMARY renders it)."""
        head = "✅ **kbench gate passed**" if self.passed else "❌ **kbench gate failed**"
        lines = [f"### {head}: `{self.candidate.label}` against `{self.baseline.label}`", "",
                 f"{self.n_queries} queries paired; fails only when significantly worse by more than "
                 f"{self.margin:g} ({self.test} test on candidate − baseline + margin, {self.correction} correction, "
                 f"α = {self.alpha:g}, worse direction only).", "",
                 "| metric | baseline | candidate | diff | 95% CI of diff | p (shifted) | p adjusted | verdict |",
                 "|---|---:|---:|---:|---|---:|---:|---|"]
        for v in self.verdicts:
            lines.append(f"| {v.metric} | {v.baseline_mean:.4f} | {v.candidate_mean:.4f} | {v.diff:+.4f} | "
                         f"[{v.diff_ci_low:+.4f}, {v.diff_ci_high:+.4f}] | {_p(v.p_value)} | {_p(v.p_adjusted)} | "
                         f"{'**FAIL**' if v.worse else 'pass'} |")
        lines.append("")
        for name, s in (("baseline", self.baseline), ("candidate", self.candidate)):
            fp = s.fingerprint or {}
            lines.append(f"- {name}: `{s.spec}` ({s.how}{', run ' + s.run_id if s.run_id else ''}); dataset "
                         f"`{fp.get('dataset_hash', 'unknown')}`, fingerprint `{fp.get('hash', 'unknown')}`")
        lines += [f"- note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _p(p: float) -> str:
    if p is None or math.isnan(p):
        return "–"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


# --------------------------------------------------------------------------- the two sides
def is_config(spec: str) -> bool:
    return spec.endswith(CONFIG_SUFFIXES) or Path(spec).is_file()


def _fingerprint_of(client, run) -> dict[str, Any] | None:
    source = artifact_source(run)
    try:
        text = read_artifact(client, source, FINGERPRINT_FILE, lambda path: path.read_bytes())
    except Exception:  # logged before fingerprints existed
        return None
    try:
        fingerprint = json.loads(text.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError alike
        raise GateError(f"run {source}: its {FINGERPRINT_FILE} is damaged ({type(e).__name__} at byte "
                        f"{getattr(e, 'pos', getattr(e, 'start', '?'))}); a gate never compares a run it cannot "
                        "check: re-run its config (kbench run) or gate another run") from None
    if not isinstance(fingerprint, dict):
        raise GateError(f"run {source}: its {FINGERPRINT_FILE} is not a JSON object; re-run its config "
                        "(kbench run) or gate another run")
    return fingerprint


def resolve_side(spec: str, *, tracking_uri: str | None = None, reuse: bool = True,
                 say: Callable[[str], None] = lambda s: None) -> GateSide:
    """A config file (run now, or read back a finished run of the same run key and fingerprint) or a run id."""
    if is_config(spec):
        if not Path(spec).is_file():
            raise GateError(f"{spec}: no such config file")
        experiment = load_experiment(spec)
        fingerprint = run_fingerprint(experiment)
        if reuse and experiment.tracking.enabled:
            client = mlflow_client(experiment.tracking.tracking_uri, workspace_dir(experiment.workspace))
            found = find_finished_elsewhere(client, experiment.run_key(), exclude_parent="")
            logged = _fingerprint_of(client, found) if found is not None else None
            if logged is not None and logged.get("hash") == fingerprint["hash"]:
                say(f"{spec}: reusing finished run {found.info.run_id} (same run key and fingerprint)")
                per_query, _ = read_per_query(client, found)
                return GateSide(spec, experiment.name, per_query, fingerprint, found.info.run_id, "reused",
                                _chunking(experiment.resolved()["chunking"]))
        say(f"{spec}: running {experiment.name} (run key {experiment.run_key()})")
        result = run_experiment(experiment, progress=False)
        written = json.loads((result.run_dir / FINGERPRINT_FILE).read_text(encoding="utf-8"))
        return GateSide(spec, experiment.name, result.per_query.set_index("query_id"), written, result.run_id, "ran",
                        _chunking(experiment.resolved()["chunking"]))
    client = tracking_client(tracking_uri)
    try:
        run = find_run(client, spec)
        per_query, _ = read_per_query(client, run)
    except RunReadError as e:
        raise GateError(f"{spec}: not a config file (.yaml) and {e}") from None
    label = run.data.tags.get("mlflow.runName") or run.info.run_id[:8]
    return GateSide(spec, label, per_query, _fingerprint_of(client, run), run.info.run_id, "read",
                    _chunking({k.removeprefix("chunking."): v for k, v in run.data.params.items()
                               if k.startswith("chunking.")}))


def _chunking(section: dict) -> dict[str, str]:
    """A side's chunker and chunk size, as text (what a chunk-size change is told by)."""
    return {k: str(section[k]) for k in ("strategy", "chunk_size") if section.get(k) is not None}


def chunk_size_note(baseline: GateSide, candidate: GateSide, metrics: list[str]) -> str | None:
    """A gate of a chunk-size change on a top-k metric: the note that says so and offers the budget metric."""
    a, b = baseline.chunking.get("chunk_size"), candidate.chunking.get("chunk_size")
    top_k = [m for m in metrics if not is_budget_metric(m)]
    if not top_k or not (a or b) or a == b:
        return None
    budget = BUDGET_METRIC.format(n=OFFERED_BUDGET)
    return (f"the two chunk differently (chunk_size {a or 'none'} against {b or 'none'}) and {', '.join(top_k)} "
            "counts chunks, not tokens: longer chunks hold more of an answer in the same top k, so a top-k gate "
            f"favours them; gate a budget metric too: --metric {budget} (both configs with evaluation.budgets: "
            f"[{OFFERED_BUDGET}])")


# --------------------------------------------------------------------------- the decision
def option_problem(margin: float, alpha: float, test: str) -> str | None:
    """What is wrong with the gate's options, or None: checked before either side runs."""
    if test not in TESTS:
        return f"--test: unknown {test!r}; allowed: {', '.join(TESTS)}"
    if not (margin >= 0 and math.isfinite(margin)):
        return f"--margin: {margin} must be a finite number >= 0 (in the metric's units, e.g. 0.01)"
    if not 0 < alpha < 1:
        return f"--alpha: {alpha} must be between 0 and 1"
    return None


def gate(baseline: GateSide, candidate: GateSide, *, metrics: list[str] | None = None, margin: float = 0.01,
         test: str = "randomization", correction: str = "holm", alpha: float = 0.05,
         allow_dataset_change: bool = False, n_resamples: int = 10_000, n_bootstrap: int = 2_000,
         seed: int = 0) -> GateResult:
    if problem := option_problem(margin, alpha, test):
        raise GateError(problem)
    notes = []
    data = [(s.fingerprint or {}).get("dataset_hash") for s in (baseline, candidate)]
    if None in data:
        missing = [s.spec for s, d in zip((baseline, candidate), data) if d is None]
        notes.append(f"no fingerprint for {', '.join(missing)} (logged before fingerprints): dataset equality unchecked")
    elif data[0] != data[1]:
        if not allow_dataset_change:
            raise GateError(f"the datasets differ (dataset hash {data[0]} vs {data[1]}): a difference in scores would "
                            "not be the change under test. Gate runs on the same frozen dataset, or pass "
                            "--allow-dataset-change if comparing across datasets is what you mean")
        notes.append(f"datasets differ ({data[0]} vs {data[1]}), allowed by --allow-dataset-change")
    common = baseline.per_query.index.intersection(candidate.per_query.index).sort_values()
    if len(common) < 2:
        raise GateError(f"the runs share {len(common)} query ids; the gate pairs by query and needs at least 2")
    for s in (baseline, candidate):
        if len(s.per_query) != len(common):
            notes.append(f"{s.label}: {len(s.per_query) - len(common)} queries not in the other run were left out")
    metrics = list(metrics or [])
    if not metrics:
        numeric = [c for c in baseline.per_query.columns if baseline.per_query[c].dtype.kind in "fi"]
        headline = headline_metric(numeric)
        if headline is None:
            raise GateError(f"no headline metric (nDCG@10 or the like) in the baseline's per-query scores; "
                            f"give --metric (columns: {numeric})")
        metrics = [headline]
    for s in (baseline, candidate):
        missing = [m for m in metrics if m not in s.per_query]
        if missing:
            raise GateError(f"{s.label}: no per-query scores for {missing}; available: "
                            f"{[c for c in s.per_query.columns if s.per_query[c].dtype.kind in 'fi']}")
    if note := chunk_size_note(baseline, candidate, metrics):
        notes.append(note)
    run_test = TESTS[test]
    rows = []
    for metric in metrics:
        a = baseline.per_query.loc[common, metric].to_numpy(dtype=float)
        b = candidate.per_query.loc[common, metric].to_numpy(dtype=float)
        shifted = b + margin  # H0: the candidate is worse by exactly the margin
        p = (run_test(a, shifted, n_resamples, seed) if test == "randomization" else run_test(a, shifted)).p_value
        low, high = bootstrap_ci(b - a, 0.95, n_bootstrap, seed)
        rows.append((metric, float(a.mean()), float(b.mean()), float((b - a).mean()), low, high, p))
    adjusted = adjust_p_values(np.array([r[-1] for r in rows]), correction)
    verdicts = [MetricVerdict(m, am, bm, d, lo, hi, p, q, worse=bool(d + margin < 0 and q < alpha))
                for (m, am, bm, d, lo, hi, p), q in zip(rows, adjusted)]
    return GateResult(baseline, candidate, verdicts, margin, test, correction, alpha, len(common), notes)


__all__ = ["GateError", "GateResult", "GateSide", "MetricVerdict", "gate", "is_config", "resolve_side"]
