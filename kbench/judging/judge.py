"""Pooling runs, judging what has no label, and measuring the judge.

- **Pool**: the top ``k`` chunks of every run given (or every finished config of a sweep, given its parent run
  id), per query, deduplicated by their document and character range (two chunkers can cut the same
  passage). The runs must share one dataset. ``max_queries``: a seeded sample of the pooled questions, each
  with its whole pool (a CPU judge cannot grade a real sweep's pool; a sample of whole questions keeps
  judged_at_k meaningful on them).
- **Every pooled pair is judged**, labelled or not: PPI (``kbench label --judged``) needs the model's grade on the
  relevant passages too, or the model has none exactly where the dataset says the answer is. A chunk overlapping
  one of the query's reference spans (span datasets) or from a document the qrels grade is counted as labeled.
- **The judge**: the LLM (``LLMJudge``) or a trained cross-encoder (``judging.trained.TrainedJudge``), both behind
  ``answers(questions, pairs) -> JudgeAnswers``.
- **Judging**: the UMBRELA-style prompt (``prompt.py``) through the shared LLM client, answers cached by
  (model, prompt) as they arrive, so a re-run, a killed judge or a bigger pool pays only for new pairs.
  Nothing is written unless the judge worked: an endpoint that stops (down, quota, refused key) or fails every
  request raises, and fewer usable grades than ``llm.policy.min_usable`` (80%) stop it with the count, the
  model and the fix (kbench/llm/usable.py; ``allow_partial`` goes on, recorded in the provenance).
- **Qrels**: one TREC line per (query, document) the judge graded, the document's grade the best grade of its
  judged chunks (``dataset.judged_qrels_use: beside`` keeps the dataset's own label where it has one; ``instead``
  reads the judge's alone). ``<out>.json`` beside it holds the provenance (judge model, prompt SHA-256, runs, k)
  and every chunk-level judgement. ``dataset.judged_qrels`` uses them in a run; ``read_judgements`` reads them
  back (``kbench label --judged``), checked by shape first: one line naming the judgement and field, never a
  traceback.
- **Logged runs**: rebuilt from their config.yaml; a relative ``dataset.path`` is read where the run read it (the
  absolute folder its ``dataset.json`` records), not against this process's folder.
- **judged_at_k**: per run, the mean share of each query's top-k documents that carry a label (dataset or
  judge), before and after judging: a metric computed on a thin pool shows as such.
- **Calibration**: a seeded, balanced sample of pooled pairs whose label is known (relevant: the span/qrels
  positives; not relevant: span-dataset chunks overlapping no reference, and for document qrels every pooled
  document of a judged question they do not grade: a real set's qrels hold only positives, so an unjudged pooled
  document counts as not relevant, as pooled evaluation assumes; the kappa is then a lower bound), judged blind;
  Cohen's kappa between the labels and the judge (grade >= 2 = relevant) and the 2 x 4 table, per judge given
  (a trained judge beside the served model). ``calibrate_items`` measures judges on any labelled pairs (a person's
  grades from ``kbench label``, which the CLI reads).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kbench.config import validate_experiment
from kbench.judging.agreement import cohen_kappa, confusion
from kbench.judging.prompt import PROMPT_SHA256, judge_prompt, parse_grade
from kbench.llm import ChatBatchResult, LLMClient, stop_error
from kbench.paths import workspace_dir
from kbench.pipeline import chunked_dataset
from kbench.datasets.reading import json_type
from kbench.datasets.registry import resolve_dataset_path
from kbench.errors import UserError, quoted_token
from kbench.records import Chunk, Dataset, Run
from kbench.tracking import tags as tag
from kbench.tracking.read import (RunReadError, artifact_source, find_run, finished_sweep_children, read_artifact,
                                  read_config, read_run, tracking_client)
from kbench.tracking.run_records import DATASET_FILE

RELEVANT_FROM = 2  # a judge grade at or above this counts as relevant when compared with binary labels


class JudgeError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Pair:
    query_id: str
    doc_id: str
    start: int
    end: int


@dataclass
class LoggedRun:
    run_id: str
    name: str
    run: Run
    dataset: Dataset
    chunks: dict[str, Chunk]
    judged_qrels: str | None = None  # the judged qrels the run was scored with (its dataset's labels include them)
    dataset_path: str = ""  # the folder the run read its dataset from, absolute


def load_logged_run(client, run_id: str) -> LoggedRun:
    """A run's rankings, and its dataset and chunks rebuilt from its resolved config (as ``misses`` does)."""
    run = run_id if not isinstance(run_id, str) else find_run(client, run_id)
    try:
        config = read_config(client, run)
    except Exception:  # noqa: BLE001 - MLflow's own error: the run has no config.yaml artifact
        raise RunReadError(f"run {run.info.run_id} has no config.yaml artifact: not a kbench run (a sweep's "
                           "parent run stands for its configs; give its id alone)") from None
    if folder := logged_dataset_folder(client, run, config):
        config["dataset"]["path"] = folder
    experiment = validate_experiment(config, f"run {artifact_source(run)} config.yaml")
    dataset, chunks = chunked_dataset(experiment.dataset, experiment.chunking,
                                     cache_dir=workspace_dir(experiment.workspace) / "cache")
    return LoggedRun(run.info.run_id, run.data.tags.get("mlflow.runName", run.info.run_id[:8]), read_run(client, run),
                     dataset, {c.chunk_id: c for c in chunks}, experiment.dataset.judged_qrels,
                     str(resolve_dataset_path(experiment.dataset)[0]))


def logged_dataset_folder(client, run, config: dict) -> str | None:
    """For a run whose ``dataset.path`` is relative (to the folder it was started in, a sweep's, which need not be
    this one): the folder it read, absolute, as the run resolved it (its ``dataset.json``); None otherwise, or
    when the run did not record it (read relative to this folder, as before)."""
    path = (config.get("dataset") or {}).get("path") if isinstance(config, dict) else None
    if not isinstance(path, str) or not path or Path(path).expanduser().is_absolute():
        return None
    try:
        record = read_artifact(client, artifact_source(run), DATASET_FILE,
                               lambda found: json.loads(found.read_text(encoding="utf-8")))
    except Exception:  # noqa: BLE001 - MLflow's own error: a run logged before dataset.json
        return None
    source = record.get("source") if isinstance(record, dict) else None
    folder = source.get("path") if isinstance(source, dict) else None
    return folder if isinstance(folder, str) and Path(folder).is_absolute() else None


def dataset_label(dataset: Dataset, pair: Pair) -> int | None:
    """The label the dataset itself gives a pair: 1 overlapping a reference span; a qrels grade; else None."""
    spans = dataset.spans.get(pair.query_id)
    if spans and any(s.doc_id == pair.doc_id and s.start < pair.end and pair.start < s.end for s in spans):
        return 1
    grade = dataset.qrels.get(pair.query_id, {}).get(pair.doc_id)
    if grade is not None and not spans:
        return int(grade)
    return None


def calibration_label(dataset: Dataset, pair: Pair) -> int | None:
    """Binary gold for calibration: span sets label every chunk (1 overlapping a reference, else 0); qrels label
    a question's pooled documents (1 graded above 0; 0 graded 0 or not graded: positive-only qrels)."""
    if dataset.spans.get(pair.query_id):
        return dataset_label(dataset, pair) or 0
    if pair.query_id not in dataset.qrels:
        return None  # a question with no label at all (a query log's)
    return int(dataset.qrels[pair.query_id].get(pair.doc_id, 0) > 0)


def pool_runs(runs: list[LoggedRun], k: int) -> dict[Pair, str]:
    """Pair -> its text, over the top ``k`` of every run."""
    names = {r.dataset.name for r in runs}
    if len(names) > 1:
        raise JudgeError(f"the runs are on different datasets ({', '.join(sorted(names))}); pool runs of one set")
    pool: dict[Pair, str] = {}
    for r in runs:
        for qid, hits in r.run.hits.items():
            for h in hits[:k]:
                chunk = r.chunks.get(h.chunk_id)
                if chunk is not None:
                    pool.setdefault(Pair(qid, chunk.doc_id, chunk.start, chunk.end), chunk.text)
    return pool


def judged_at_k(run: Run, labeled: dict[str, set[str]], k: int) -> float:
    """Mean over queries of the share of the top-k documents that carry a label."""
    shares = []
    for qid in run.hits:
        docs = run.doc_ids(qid)[:k]
        if docs:
            shares.append(sum(d in labeled.get(qid, set()) for d in docs) / len(docs))
    return float(np.mean(shares)) if shares else float("nan")


FIX = "use a stronger judge model (--model), and measure it first with --calibrate"


@dataclass
class JudgeAnswers:
    """A judge's grades of some pairs (None: no readable grade), how many came from a cache, and whether it went
    on below its floor of usable grades (allow_partial)."""

    grades: list[int | None]
    cache_hits: int = 0
    partial: bool = False


class LLMJudge:
    """The LLM judge: the UMBRELA-style prompt through the shared client (``_ask``)."""

    def __init__(self, client: LLMClient):
        self.client = client

    def describe(self) -> str:
        return f"served model {self.client.endpoint.model}"

    @property
    def provenance(self) -> dict[str, Any]:
        return {"judge_model": self.client.endpoint.model, "prompt_sha256": PROMPT_SHA256}

    def answers(self, questions: dict[str, str], pairs: list[tuple[Pair, str]]) -> JudgeAnswers:
        grades, batch, partial = _ask(self.client, questions, pairs)
        return JudgeAnswers(grades, batch.cache_hits, partial)


def _ask(client: LLMClient, questions: dict[str, str], pairs: list[tuple[Pair, str]]
         ) -> tuple[list[int | None], ChatBatchResult, bool]:
    """A grade per pair (None: no readable grade) and whether the judge went on below the floor
    (allow_partial), once the judge proved it works: an endpoint that stopped or failed every request raises,
    and so does a judge whose usable grades are below the floor."""
    prompts = [judge_prompt(questions[p.query_id], text) for p, text in pairs]
    batch = client.chat_many(prompts, max_tokens=16, temperature=0.0,
                             usable=lambda prompt, answer: parse_grade(answer) is not None)
    if batch.stopped is not None:
        raise stop_error("judge", batch.stopped, batch.success_count, len(prompts))
    failed = [f for f in batch.failed_items if f.attempts]
    if prompts and not batch.answers and failed:
        raise JudgeError(f"judge: {len(failed)} of {len(prompts)} requests failed and none was answered (first: "
                         f"{failed[0].error}); check --base-url and --model, and --timeout-s for a slow model; "
                         "nothing was written")
    grades = [parse_grade(batch.answers[i]) if i in batch.answers else None for i in range(len(prompts))]
    partial = client.require_usable(len(prompts), sum(g is not None for g in grades), fix=FIX, batch=batch)
    return grades, batch, partial


def expand_runs(client, run_ids: list[str]) -> list:
    """The runs to pool: a sweep parent's id alone stands for its finished configs (one run each)."""
    runs = [find_run(client, r) for r in run_ids]
    if len(runs) == 1 and runs[0].data.tags.get(tag.SWEEP_ROLE) == "parent":
        return finished_sweep_children(client, runs[0])
    parents = [r.info.run_id for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent"]
    if parents:
        raise JudgeError(f"run {parents[0]} is a sweep's parent run: give its id alone (it stands for every "
                         "finished config of the sweep), or give the configs' run ids")
    return runs


def sample_questions(pooled: list[tuple[Pair, str]], max_queries: int | None, seed: int) -> set[str] | None:
    """A seeded sample of ``max_queries`` of the pooled questions (None: all)."""
    ids = sorted({p.query_id for p, _ in pooled})
    if max_queries is None or max_queries >= len(ids):
        return None
    return set(random.Random(seed).sample(ids, max_queries))


@dataclass
class JudgeReport:
    pooled: int
    labeled: int
    judged: int
    unparsed: int
    cache_hits: int
    qrels: dict[str, dict[str, int]]
    judged_at_k_before: dict[str, float]
    judged_at_k_after: dict[str, float]
    grades: dict[int, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # the run ids pooled (a sweep parent's finished configs)
    questions: int = 0  # questions whose pool was judged (a sample with max_queries)
    sampled: bool = False
    partial: bool = False  # went on below the floor of usable grades (allow_partial)


def _pooled(run_ids: list[str], k: int, tracking_uri: str | None):
    """The logged runs, their dataset, its questions by id, and the runs' pooled top-k in a stable order."""
    mlflow = tracking_client(tracking_uri)
    runs = [load_logged_run(mlflow, r) for r in expand_runs(mlflow, run_ids)]
    dataset = runs[0].dataset
    questions = {q.query_id: q.text for q in dataset.queries}
    pooled = sorted(pool_runs(runs, k).items(), key=lambda x: (x[0].query_id, x[0].doc_id, x[0].start))
    return runs, dataset, questions, pooled


def judge_runs(run_ids: list[str], judge, *, k: int = 10, out: Path | None = None,
               tracking_uri: str | None = None, max_queries: int | None = None, seed: int = 0) -> JudgeReport:
    """Grade every pooled pair of the runs with ``judge`` (``LLMJudge``, a trained judge, or an ``LLMClient``)."""
    judge = LLMJudge(judge) if isinstance(judge, LLMClient) else judge
    runs, dataset, questions, pooled = _pooled(run_ids, k, tracking_uri)
    chosen = sample_questions(pooled, max_queries, seed)
    if chosen is not None:
        pooled = [(p, t) for p, t in pooled if p.query_id in chosen]
        questions = {q: text for q, text in questions.items() if q in chosen}
    todo = [(p, t) for p, t in pooled if p.query_id in questions]
    if not todo:
        raise JudgeError(f"judge: nothing to judge: the top {k} of the {len(runs)} runs pool no (question, chunk) "
                         "pair of this dataset's questions; no qrels written")
    labeled = sum(dataset_label(dataset, p) is not None for p, _ in todo)
    answers = judge.answers(questions, todo)
    grades = answers.grades
    doc_grades: dict[str, dict[str, int]] = {}
    judgements = []
    for (p, _), g in zip(todo, grades):
        judgements.append({"query_id": p.query_id, "doc_id": p.doc_id, "start": p.start, "end": p.end, "grade": g})
        if g is not None:
            doc_grades.setdefault(p.query_id, {})
            doc_grades[p.query_id][p.doc_id] = max(g, doc_grades[p.query_id].get(p.doc_id, 0))
    qrels = doc_grades
    before = {q: set(dataset.qrels.get(q, {})) for q in questions}
    after = {q: before[q] | set(qrels.get(q, {})) for q in questions}
    report = JudgeReport(len(pooled), labeled, sum(g is not None for g in grades),
                         sum(g is None for g in grades), answers.cache_hits, qrels,
                         {r.name: judged_at_k(_only(r.run, chosen), before, k) for r in runs},
                         {r.name: judged_at_k(_only(r.run, chosen), after, k) for r in runs},
                         {g: sum(x == g for x in grades) for g in range(4)}, [r.run_id for r in runs],
                         len(questions), chosen is not None, answers.partial)
    if not qrels:
        raise JudgeError(f"judge: none of the {len(todo)} judged pairs got a readable grade; no qrels written")
    if out is not None:
        write_qrels(out, qrels, {**judge.provenance, "k": k,
                                 "runs": report.runs, "dataset": dataset.name,
                                 "pooled": report.pooled, "already_labeled": report.labeled,
                                 "unparsed": report.unparsed, "partial": answers.partial,
                                 "queries": sorted(questions) if chosen is not None else None,
                                 "max_queries": max_queries, "seed": seed if chosen is not None else None,
                                 "judgements": judgements})
    return report


def _only(run: Run, questions: set[str] | None) -> Run:
    """``run`` with only the sampled questions (all when None)."""
    if questions is None:
        return run
    return Run({q: hits for q, hits in run.hits.items() if q in questions}, run.name)


def write_qrels(out: Path, qrels: dict[str, dict[str, int]], provenance: dict[str, Any]) -> None:
    """TREC qrels (``qid 0 docid grade``) and ``<out>.json``, each written whole then renamed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{q} 0 {d} {g}" for q in sorted(qrels) for d, g in sorted(qrels[q].items())]
    for path, text in ((out, "\n".join(lines) + ("\n" if lines else "")),
                       (out.with_name(out.name + ".json"), json.dumps(provenance, indent=1))):
        tmp = path.with_name(f".partial-{path.name}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


JUDGED_FIX = "give the --out of `kbench judge RUN... --out FILE` (its .json holds the chunk-level grades)"


def read_judgements(path: Path) -> tuple[dict[tuple[str, str, int, int], int], dict[str, Any]]:
    """The chunk-level grades of a ``kbench judge --out`` file (``<out>.json``, or the qrels beside it) by
    (query, document, start, end), and the file's provenance. Checked by shape before use: an object whose
    ``judgements`` is a list of objects, each with a ``query_id`` and ``doc_id`` (text or a whole number), a
    ``start`` and ``end`` (whole numbers, 0 <= start <= end) and a ``grade`` (0-3, or null: no readable grade);
    anything else is a JudgeError naming the judgement and the field (never quoting the file)."""
    path = Path(path)
    side = path if path.suffix == ".json" else path.with_name(path.name + ".json")
    where = f"--judged {side}"
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JudgeError(f"--judged {path}: no {side.name} beside it; {JUDGED_FIX}") from None
    except IsADirectoryError:
        raise JudgeError(f"--judged {path}: {side.name} is a folder; {JUDGED_FIX}") from None
    except UnicodeDecodeError:
        raise JudgeError(f"{where}: not UTF-8 text; {JUDGED_FIX}") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise JudgeError(f"{where}: not JSON ({getattr(e, 'msg', 'nested too deeply')}"
                         f"{f' at line {e.lineno}' if hasattr(e, 'lineno') else ''}); {JUDGED_FIX}") from None
    if not isinstance(data, dict):
        raise JudgeError(f"{where}: a JSON {json_type(data)} where `kbench judge` writes an object with "
                         f"\"judgements\"; {JUDGED_FIX}")
    judgements = data.get("judgements")
    if not isinstance(judgements, list):
        said = "no \"judgements\"" if judgements is None else f"\"judgements\" is a JSON {json_type(judgements)}"
        raise JudgeError(f"{where}: {said}, not a list of chunk-level grades; {JUDGED_FIX}")
    grades: dict[tuple[str, str, int, int], int] = {}
    for i, j in enumerate(judgements):
        at = f"{where}: judgements[{i}]"
        if not isinstance(j, dict):
            raise JudgeError(f"{at} is a JSON {json_type(j)}, not an object; {JUDGED_FIX}")
        ids = [_judged_field(j, key, at, (str, int)) for key in ("query_id", "doc_id")]
        start, end = (_judged_field(j, key, at, (int,)) for key in ("start", "end"))
        if not 0 <= start <= end:
            raise JudgeError(f"{at}: start {start} and end {end} are no character range (0 <= start <= end); "
                             f"{JUDGED_FIX}")
        grade = j.get("grade")
        if grade is None:
            continue
        if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
            shown = quoted_token(grade) if isinstance(grade, str) else f"a JSON {json_type(grade)}"
            shown = f"{grade}" if isinstance(grade, int) and not isinstance(grade, bool) else shown
            raise JudgeError(f"{at}: \"grade\" is {shown}, not a grade 0-3 (or null); {JUDGED_FIX}")
        grades[(str(ids[0]), str(ids[1]), start, end)] = grade
    return grades, data


def _judged_field(judgement: dict, key: str, at: str, kinds: tuple[type, ...]):
    value = judgement.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, kinds) or value == "":
        what = "text or a whole number" if str in kinds else "a whole number"
        got = "missing" if key not in judgement else (
            quoted_token(value) if isinstance(value, str) else f"a JSON {json_type(value)}")
        raise JudgeError(f"{at}: \"{key}\" is {got}, not {what}; {JUDGED_FIX}")
    return value


@dataclass
class Calibration:
    n: int
    kappa: float
    table: np.ndarray  # rows: gold 0/1; columns: judge 0..3
    unparsed: int
    agreement: float
    judge: str = "the judge"
    assumed_negatives: int = 0  # not-relevant pairs that are pooled documents the qrels do not grade
    gold: str = "the dataset's labels"


@dataclass(frozen=True)
class LabelledPair:
    """A (question, passage) pair with a known binary label: what a judge is measured on."""

    pair: Pair
    question: str
    text: str
    gold: int  # 1 relevant, 0 not
    assumed: bool = False  # 0 because no label names it (positive-only qrels), not because one says so


def balanced_sample(items: list[LabelledPair], sample: int, seed: int) -> list[LabelledPair]:
    """A seeded sample of up to ``sample // 2`` relevant and as many not relevant pairs."""
    by_gold = {g: [x for x in items if x.gold == g] for g in (0, 1)}
    if not by_gold[0] or not by_gold[1]:
        raise JudgeError("--calibrate needs labelled pairs of both kinds (relevant and not); these labels give "
                         f"{len(by_gold[1])} relevant and {len(by_gold[0])} not relevant (a set without labels: "
                         "measure the judge on a person's grades with --labels LABELS)")
    rng = random.Random(seed)
    return [x for gold in (1, 0) for x in rng.sample(by_gold[gold], min(len(by_gold[gold]), sample // 2))]


def calibrate_items(items: list[LabelledPair], judges: list, gold: str = "the dataset's labels") -> list[Calibration]:
    """Each judge's grades of the same pairs against their labels: kappa (judge grade >= 2 relevant), the table."""
    questions = {x.pair.query_id: x.question for x in items}
    pairs = [(x.pair, x.text) for x in items]
    out = []
    for judge in judges:
        judge = LLMJudge(judge) if isinstance(judge, LLMClient) else judge
        grades = judge.answers(questions, pairs).grades
        kept = [(x.gold, g, x.assumed) for x, g in zip(items, grades) if g is not None]
        if not kept:
            raise JudgeError(f"--calibrate: {judge.describe()} gave no parseable grade")
        labels = [g for g, _, _ in kept]
        binary = [int(j >= RELEVANT_FROM) for _, j, _ in kept]
        out.append(Calibration(len(kept), cohen_kappa(labels, binary),
                               confusion(labels, [j for _, j, _ in kept], [0, 1], [0, 1, 2, 3]),
                               sum(g is None for g in grades), float(np.mean([a == b for a, b in zip(labels, binary)])),
                               judge.describe(), sum(a for _, _, a in kept), gold))
    return out


def calibrate(run_ids: list[str], judges, *, k: int = 10, sample: int = 50, seed: int = 0,
              tracking_uri: str | None = None) -> list[Calibration]:
    """The judges measured on a balanced sample of the runs' pooled pairs that the dataset labels (one
    ``Calibration`` per judge, on the same pairs)."""
    judges = judges if isinstance(judges, list) else [judges]
    runs, dataset, questions, pooled = _pooled(run_ids, k, tracking_uri)
    items = []
    for p, text in pooled:
        gold = calibration_label(dataset, p)
        if gold is not None and p.query_id in questions:
            assumed = not dataset.spans.get(p.query_id) and p.doc_id not in dataset.qrels.get(p.query_id, {})
            items.append(LabelledPair(p, questions[p.query_id], text, gold, assumed))
    return calibrate_items(balanced_sample(items, sample, seed), judges)
