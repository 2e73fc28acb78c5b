"""Sweeps of the same configs on several evaluation sets, as one pick (``kbench compare --sweep A --sweep B``, and
``kbench sweep CONFIG --sets DIR DIR``): the logged runs into ``evaluation.across.recommend_across``, and its record
into files and one MLflow run.

    comparisons = [compare_runs(parent) for parent in parents]
    found = across_comparisons(comparisons, names, config)       # evaluation.across.AcrossSets
    write_across(found, folder)                                  # across.txt, across.json
    log_across(found, comparisons, tracking_uri)                  # one MLflow run: the pick, the per-set lines
"""
from __future__ import annotations

import json
from pathlib import Path

from kbench.compare.compare import Comparison, CompareError
from kbench.compare.evidence import comparison_evidence
from kbench.compare.recommendation import config_record, recommendation_headline
from kbench.evaluation.across import AcrossSets, recommend_across
from kbench.evaluation.recommend import RecommendConfig
from kbench.tracking import tags as tag
from kbench.tracking.read import tracking_client

ROLE = "across"  # kbench.sweep.role of the run that holds a decision across sets


def set_names(comparisons: list[Comparison]) -> list[str]:
    """Each sweep's set: its runs' dataset (tag ``kbench.dataset``), with the parent run id where two name the
    same."""
    names = [c.runs[0].tags.get(tag.DATASET) or (c.parent_run_id or c.runs[0].run_id)[:8] for c in comparisons]
    return [f"{n} ({(c.parent_run_id or '')[:8]})" if names.count(n) > 1 else n for n, c in zip(names, comparisons)]


def across_comparisons(comparisons: list[Comparison], names: list[str] | None = None,
                       config: RecommendConfig | None = None, *, alpha: float | None = None) -> AcrossSets:
    """One pick over the comparisons' runs (one comparison per set, configs matched by label), on the first
    comparison's recommendation headline, at its alpha unless given; each set's evidence read from its runs."""
    names = names or set_names(comparisons)
    headline = recommendation_headline(comparisons[0])
    for name, comparison in zip(names, comparisons):
        lacking = [r.label for r in comparison.runs if headline not in r.per_query.columns]
        if lacking:
            raise CompareError(f"the runs on {name} have no per-query {headline} ({', '.join(lacking[:3])}): the sets "
                               "are compared on the first set's headline; sweep them with the same evaluation section")
    try:
        return recommend_across({name: [config_record(r) for r in c.runs] for name, c in zip(names, comparisons)},
                                headline, config, alpha=comparisons[0].alpha if alpha is None else alpha,
                                evidence={name: comparison_evidence(c) for name, c in zip(names, comparisons)})
    except ValueError as e:
        raise CompareError(str(e)) from None


def write_across(found: AcrossSets, folder: Path) -> Path:
    """``across.txt`` (the lines, then each set's own recommendation) and ``across.json`` under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "across.txt").write_text("\n".join(report_lines(found)) + "\n", encoding="utf-8")
    (folder / "across.json").write_text(json.dumps(found.as_dict(), indent=2, default=float), encoding="utf-8")
    return folder


def report_lines(found: AcrossSets, parents: list[str] | None = None) -> list[str]:
    """The decision's lines, then each set's own recommendation (at alpha / S), under its name and sweep."""
    out = list(found.lines())
    for n, (name, lines) in enumerate(found.set_lines().items()):
        out += ["", f"{name}" + (f" (sweep {parents[n]})" if parents else "") + ": its own recommendation",
                *lines]
    return out


def log_across(found: AcrossSets, comparisons: list[Comparison], *, tracking_uri: str | None = None,
               name: str | None = None, folder: Path | None = None) -> str:
    """One MLflow run beside the sweeps (in the first sweep's experiment): tags naming the pick, whether it is
    decided, its worst bound and the sweeps' parent runs; the decision and each set's own recommendation as its
    description; ``across.txt`` / ``across.json`` (``folder``'s, when written) as artifacts. Returns its id."""
    client = tracking_client(tracking_uri or comparisons[0].tracking_uri)
    parents = [c.parent_run_id or "" for c in comparisons]
    experiment_id = client.get_run(parents[0] or comparisons[0].runs[0].run_id).info.experiment_id
    title = name or f"across {len(found.names)} sets · {', '.join(found.names)}"
    note = [f"**Recommended across {len(found.names)} sets{'' if found.decided else ' (provisional)'}: {found.pick}**",
            "", *report_lines(found, parents)]
    run = client.create_run(experiment_id, run_name=title[:250], tags={
        "mlflow.runName": title[:250], tag.SWEEP_ROLE: ROLE,
        tag.SWEEP_SETS: json.dumps(dict(zip(found.names, parents))),
        tag.SWEEP_WINNER: found.pick, tag.SWEEP_RECOMMENDATION: found.pick, tag.SWEEP_HEADLINE: found.headline,
        tag.SWEEP_DECIDED: str(found.decided).lower(), tag.SWEEP_BOUND: f"{found.worst(found.pick):.4f}",
        tag.MLFLOW_NOTE: "\n".join(note)[:5000]})
    run_id = run.info.run_id
    client.log_metric(run_id, "recommendation_bound", found.worst(found.pick))
    for set_name in found.names:
        client.log_metric(run_id, f"bound_{_metric_name(set_name)}", found.bound(found.pick, set_name))
    if folder is not None:
        for file in ("across.txt", "across.json"):
            if (folder / file).is_file():
                client.log_artifact(run_id, str(folder / file))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _metric_name(text: str) -> str:
    """A set's name as part of an MLflow metric key (letters, digits, _ - . / and spaces only)."""
    return "".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in text)[:200]
