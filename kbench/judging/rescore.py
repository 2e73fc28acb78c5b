"""Re-scoring logged runs with judged qrels, from their saved rankings (no re-retrieval).

``kbench compare RUN... --judged-qrels QRELS [--judged-use beside|instead]``: each run's dataset and chunks
are rebuilt from its logged config (as ``kbench judge`` and ``misses`` do) with ``dataset.judged_qrels`` set,
its ranking is read from the run folder's ``rankings.parquet``, and ``evaluate_rankings`` scores it again:
the same code, dataset and ranking as a ``kbench run`` made with ``dataset.judged_qrels`` (same config), so
the figures are equal to the bit (tested). What the saved ranking cannot give is left out rather than
reported stale: ``miss_stage`` and ``ceiling_*`` need the retrieval trace, ``context_*`` the context assembly.
Columns the judged qrels cannot change (latency, ragas) keep the logged values.

Each run's ``judged_at_<k>`` (the share of its top-k documents that carry a label) is reported as logged and
with the judged qrels; a run below ``min_judged`` (default 0.8) is marked: its metrics count every unjudged
document as not relevant, so they rest on a thin pool. Qrels judged on a sample of the questions (``kbench
judge --max-queries``; their provenance lists the questions) re-score those questions only.

Judged qrels are document grades, so span metrics (``chunk_*``, ``span_*``) do not move; compare the
``doc_*`` metrics (the CLI's default with ``--judged-qrels``). The qrels' provenance (``<QRELS>.json`` from
``kbench judge``: judge model, prompt SHA-256, dataset, pooled runs) and the file's own SHA-256 say which
judgements produced the numbers.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kbench.compare.compare import (DEFAULT_MEASURES, NOT_METRICS, CompareError, Comparison, RunScores, compare_scores,
                                    load_runs)
from kbench.config import validate_experiment
from kbench.datasets import DatasetError
from kbench.datasets.registry import resolve_dataset_path
from kbench.judging import MIN_JUDGED
from kbench.evaluation.stage import evaluate_rankings, summarize
from kbench.paths import workspace_dir
from kbench.pipeline import chunked_dataset
from kbench.evaluation.budgets import budget_tokenizer
from kbench.retrieval.context import count_ranked_tokens
from kbench.tracking.read import artifact_source, get_run, read_config, read_run

# logged columns a saved ranking cannot recompute (they need the retrieval trace or the context assembly)
NOT_RESCORED = ("miss_stage", "ceiling_", "context_")


@dataclass
class JudgedQrels:
    """Which judgements re-scored the runs: the file, its SHA-256, and ``kbench judge``'s provenance."""
    path: Path
    use: str
    sha256: str
    provenance: dict = field(default_factory=dict)  # empty when <path>.json is missing

    @classmethod
    def read(cls, path: str | Path, use: str = "beside") -> "JudgedQrels":
        path = Path(path).expanduser().resolve()
        if not path.is_file():
            raise CompareError(f"--judged-qrels: {path} is not a file; give the --out of `kbench judge`")
        side = path.with_name(path.name + ".json")
        provenance = {}
        if side.is_file():
            try:
                provenance = json.loads(side.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise CompareError(f"--judged-qrels: {side} is not JSON ({e}); rewrite it with `kbench judge`") from None
        return cls(path, use, hashlib.sha256(path.read_bytes()).hexdigest(), provenance)

    def describe(self) -> str:
        p = self.provenance
        if not p:
            return (f"judged qrels {self.path} (sha256 {self.sha256[:12]}, used {self.use}); no provenance file "
                    f"{self.path.name}.json beside it: not written by `kbench judge`, judge unknown")
        text = (f"judged qrels {self.path} (sha256 {self.sha256[:12]}, used {self.use}): judge model "
                f"{p.get('judge_model', '?')}, prompt sha256 {str(p.get('prompt_sha256', '?'))[:12]}, "
                f"pooled top-{p.get('k', '?')} of {len(p.get('runs', []))} run(s) on dataset {p.get('dataset', '?')}")
        if p.get("queries"):
            text += f"; a seeded sample of {len(p['queries'])} questions (judge --max-queries), compared on those"
        if p.get("partial"):
            text += (f"; PARTIAL: the judge went on below its floor of usable grades (--allow-partial; "
                     f"{p.get('unparsed', '?')} answers held no grade)")
        return text




def rescore_run(client, scores: RunScores, judged: JudgedQrels, only: set[str] | None = None) -> RunScores:
    """One logged run scored again with the judged qrels: a new RunScores (same label and ids); ``only``: the
    questions to keep (a judged sample)."""
    run = get_run(client, scores.run_id)
    experiment = validate_experiment(read_config(client, run), f"run {artifact_source(run)} config.yaml")
    dataset_config = experiment.dataset.model_copy(update={"judged_qrels": str(judged.path),
                                                           "judged_qrels_use": judged.use})
    made_on = judged.provenance.get("dataset")
    try:
        name = resolve_dataset_path(dataset_config)[1]
        if made_on and made_on != name:  # before loading: the more telling message
            raise CompareError(f"--judged-qrels: judged on dataset {made_on!r}, but run {scores.label} is on "
                               f"{name!r}; judge this dataset's runs (kbench judge)")
        dataset, chunks = chunked_dataset(dataset_config, experiment.chunking,
                                         cache_dir=workspace_dir(experiment.workspace) / "cache")
    except DatasetError as e:
        raise CompareError(f"{scores.label}: {e}") from None
    ranking = read_run(client, run)
    known = {c.chunk_id for c in chunks}
    unknown = sorted({h.chunk_id for hits in ranking.hits.values() for h in hits} - known)
    if unknown:
        raise CompareError(f"{scores.label}: its ranking names {len(unknown)} unit(s) the rebuilt chunks lack (e.g. "
                           f"{unknown[0]!r}): a run over other units (parents, leg units) or a changed corpus "
                           "cannot be re-scored from its saved ranking; re-run it with dataset.judged_qrels")
    tokens = None
    if experiment.evaluation.budgets:
        tokens = count_ranked_tokens(ranking, chunks, budget_tokenizer(experiment.evaluation.budget_tokenizer))
    frame = evaluate_rankings(dataset, chunks, ranking, experiment.evaluation, tokens).set_index("query_id")
    if only is not None:
        frame = frame[frame.index.isin(only)]
    logged = scores.per_query
    kept = [c for c in logged.columns if c not in frame.columns and not c.startswith(NOT_RESCORED)]
    frame = frame.join(logged[kept], how="left") if kept else frame
    summary = {k: v for k, v in scores.summary.items() if not k.startswith(NOT_RESCORED)}
    summary.update(summarize(frame.reset_index().drop(columns=[c for c in frame if c.startswith("latency_ms_")])))
    return RunScores(scores.label, scores.run_id, frame, scores.artifact_run_id, scores.knobs, summary)


def rescore_runs(client, runs: list[RunScores], judged: JudgedQrels, only: set[str] | None = None
                 ) -> list[RunScores]:
    return [rescore_run(client, r, judged, only) for r in runs]


def judged_at_k_table(before: list[RunScores], after: list[RunScores], k: int, min_judged: float = MIN_JUDGED,
                      only: set[str] | None = None) -> pd.DataFrame:
    """Per run, the mean share of its top-k documents carrying a label: as logged, and with the judged qrels;
    ``thin`` when that is below ``min_judged``."""
    column = f"judged_at_{k}"
    rows = []
    for b, a in zip(before, after):
        logged = b.per_query if only is None else b.per_query[b.per_query.index.isin(only)]
        rows.append({"config": a.label, "run_id": a.run_id,
                     "logged": float(logged[column].mean()) if column in logged else float("nan"),
                     "with_judged": float(a.per_query[column].mean()) if column in a.per_query else float("nan")})
    table = pd.DataFrame(rows)
    table["thin"] = ~(table["with_judged"] >= min_judged)  # NaN (no such column) is thin too
    return table


def doc_metrics(columns) -> list[str]:
    """nDCG, recall and MRR at 10 (else the largest k) of the document level: what judged qrels change."""
    ks = sorted({int(c.rsplit("_", 1)[1]) for c in columns if c not in NOT_METRICS and c.startswith("doc_")
                 and "_at_budget_" not in c and c.rsplit("_", 1)[1].isdigit()})
    if not ks:
        raise CompareError("--judged-qrels: the re-scored runs have no doc_*_at_<k> metrics to compare")
    k = 10 if 10 in ks else ks[-1]
    return [f"doc_{m}_at_{k}" for m in DEFAULT_MEASURES if f"doc_{m}_at_{k}" in columns]


@dataclass
class JudgedComparison:
    comparison: Comparison
    judged: JudgedQrels
    judged_at_k: pd.DataFrame  # per run: judged_at_<k> as logged and with the judged qrels, thin or not
    k: int
    min_judged: float = MIN_JUDGED

    @property
    def thin(self) -> list[str]:
        """Labels of the runs whose metrics rest on a pool below ``min_judged``."""
        return [str(c) for c in self.judged_at_k.loc[self.judged_at_k["thin"], "config"]]


def compare_judged(runs: str | list[str], judged: JudgedQrels, *, metrics: list[str] | None = None,
                   tracking_uri: str | None = None, min_judged: float = MIN_JUDGED, **options) -> JudgedComparison:
    """``compare_runs`` on the runs re-scored with ``judged``; default metrics: the document level's (see
    ``doc_metrics``). ``options``: baseline, test, correction, alpha, ... as ``compare_scores`` takes them."""
    logged, parent_id, client = load_runs(runs, tracking_uri)
    sampled = judged.provenance.get("queries")
    only = set(sampled) if sampled else None
    rescored = rescore_runs(client, logged, judged, only)
    metrics = metrics or doc_metrics(list(rescored[0].per_query.columns))
    comparison = compare_scores(rescored, metrics=metrics, **options)
    comparison.parent_run_id = parent_id
    comparison.tracking_uri = str(client.tracking_uri)
    comparison.notes.append("scores re-computed from each run's saved ranking with the " + judged.describe())
    if only is not None:
        comparison.notes.append(f"the qrels judge a seeded sample of {len(only)} questions (kbench judge "
                                "--max-queries): the runs are compared on those questions only")
    k = int(metrics[0].rsplit("_", 1)[1]) if metrics[0].rsplit("_", 1)[1].isdigit() else 10
    result = JudgedComparison(comparison, judged, judged_at_k_table(logged, rescored, k, min_judged, only), k,
                              min_judged)
    if result.thin:
        comparison.notes.append(
            f"thin pool: {', '.join(result.thin)} keep judged_at_{k} below {min_judged:.2f} with these qrels, so "
            f"their {', '.join(metrics)} count every unjudged document of their top {k} as not relevant; judge "
            "their pools (kbench judge with their run ids) before trusting their ranks")
    return result


__all__ = ["JudgedComparison", "JudgedQrels", "compare_judged", "doc_metrics", "judged_at_k_table", "rescore_run",
           "rescore_runs"]
