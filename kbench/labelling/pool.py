"""The pool a labelling session works on, built from logged runs (or a sweep), kept as one JSON file.

    pool = build_pool(["<sweep parent id>"], k=10, judged=None, seed=0, random_share=0.8)
    pool.write(path); LabelPool.read(path)

- **Contenders**: the runs' logged per-query scores go through the recommendation (``evaluation.recommend``, the
  runs' headline, ``recommend`` section as given): the recommended config and the configs in
  ``Recommendation.undecided`` (those it cannot yet be told apart from). A decided recommendation still pools
  the recommended config and the runner-up, so the labels can check it.
- **Pairs**: the top ``k`` of each contender per question (``judging.pool_runs``: one pair per document and
  character range), with the passage's text, its document's title and the text around it.
- **The model's grades** (Yhat's labels): a ``kbench judge`` file's chunk-level judgements (``--judged``), else
  a trained judge's (``--judge-model``: a cross-encoder ``kbench judge --train`` made, grading every pair), else
  the dataset's own labels (a generated set's qrels or reference spans, ``judging.dataset_label``; not when the
  runs were scored with ``dataset.judged_qrels``, whose document grades are a judge's, not the set's); a pair with
  none is left ungraded (counted as not relevant by the metric, and the least certain for the order). The others
  that exist are kept beside it (``other_models``): the estimate reports each one's kappa against the humans and
  PPI++ uses the one that agrees best (kbench/labelling/estimate.py). Each model's scale (binary: a set's 0/1
  labels; graded: a judge's 0-3) is kept, so human and model grades are compared on one scale.
- **No scores yet** (a query log's set: no question labelled, so the runs logged no quality metric): every run
  given is a contender, up to ``MAX_UNSCORED_CONTENDERS``.
- **Plan**: the order the page serves (``labelling.order.label_plan``), fixed by the seed.
- **Kept beside** (not in the fingerprint): the dataset folder the runs read, absolute (``dataset_path``), each
  contender's logged run-level numbers (``values``: costs and p95s, for the recommendation's cost and budgets),
  and where each generated question came from (``sources``: its method, page and section, as the set recorded
  them; a generated set's pages are then named by their path, not by a title read from what the generator left).

The file's ``fingerprint`` (SHA-256 of the pairs, rankings, model grades and plan) ties a labels file to its pool.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbench.compare.compare import CompareError, headline_metric, load_runs
from kbench.errors import UserError
from kbench.evaluation.recommend import ConfigRecord, RecommendConfig, recommend
from kbench.judging.judge import Pair, dataset_label, load_logged_run, pool_runs, read_judgements
from kbench.judging.prompt import GRADES
from kbench.judging.trained import TrainedJudge
from kbench.labelling.estimate import BINARY, GRADED, RELEVANT_FROM, ModelGrades, PoolArrays, scale_of
from kbench.labelling.order import LabelPlan, label_plan
from kbench.tracking.read import RunReadError, tracking_client

POOL_KIND = "kbench-label-pool"
MAX_UNSCORED_CONTENDERS = 4  # runs with no per-query score (a set without labels) a pool takes whole
CONTEXT_CHARS = 600  # of the document shown before and after the passage
# grade -> what it means: the judge's 0-3 scale, so human and judge grade alike, in the page's word (the prompt's
# "query" is a question as a person reads it)
SCALES = {"graded": {g: GRADES[g].replace("the query", "the question") for g in range(4)},
          "binary": {0: "does not help answer the question", 1: "helps answer the question"}}


class LabelError(UserError, ValueError):
    pass


def read_json(path: Path, option: str, missing: str, not_json: str):
    """The JSON in ``path``, or a LabelError that names the option and says what to give instead (``not_json``
    may hold ``{error}``: the decoder's message, never the file's text)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabelError(f"{option} {path}: no such file; {missing}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LabelError(f"{option} {path}: " + not_json.format(error=e)) from None


@dataclass
class PoolPair:
    query_id: str
    doc_id: str
    start: int
    end: int
    text: str
    title: str = ""
    before: str = ""  # the document's text just before the passage
    after: str = ""

    @property
    def pair_id(self) -> str:
        """The passage's id in the labels file's qrels: ``<doc id>@<start>-<end>`` (its character range)."""
        return f"{self.doc_id}@{self.start}-{self.end}"


@dataclass
class LabelPool:
    dataset: str
    k: int
    configs: list[str]  # contenders, the recommended one first
    runs: dict[str, str]  # config -> run id
    questions: dict[str, str]  # query id -> text, in the pool's question order
    pairs: list[PoolPair]
    ranks: np.ndarray  # [C, P]
    model_grades: np.ndarray  # [P], NaN: none
    model: str  # where the model's grades come from
    plan: LabelPlan
    scale: str = "graded"
    recommendation: list[str] = field(default_factory=list)  # at pool time, from the logged scores
    sweep: str | None = None  # the sweep parent's run id
    model_scale: str = ""  # binary | graded: the model's grades' scale ("" read from them: a pool file before it)
    other_models: list[ModelGrades] = field(default_factory=list)  # other models' grades of the same pairs
    dataset_path: str = ""  # the folder the runs read the dataset from, absolute (as they resolved it)
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # config -> its run's logged costs, p95s ...
    sources: dict[str, str] = field(default_factory=dict)  # query id -> where a generated question came from

    @property
    def question_ids(self) -> list[str]:
        return list(self.questions)

    @property
    def question_of(self) -> np.ndarray:
        index = {q: i for i, q in enumerate(self.questions)}
        return np.array([index[p.query_id] for p in self.pairs], dtype=int)

    def arrays(self) -> PoolArrays:
        return PoolArrays(self.question_of, self.ranks, self.model_grades, self.configs, self.k, len(self.questions),
                          self.model_scale or scale_of(self.model_grades), self.model, list(self.other_models),
                          dict(self.values))

    @property
    def grades(self) -> dict[int, str]:
        return SCALES[self.scale]

    def _content(self) -> dict:
        return {"kind": POOL_KIND, "version": 1, "dataset": self.dataset, "k": self.k, "configs": self.configs,
                "runs": self.runs, "sweep": self.sweep, "scale": self.scale, "model": self.model,
                "recommendation": self.recommendation,
                "dataset_path": self.dataset_path, "values": self.values,
                "questions": [{"id": q, "text": t, **({"source": self.sources[q]} if q in self.sources else {})}
                              for q, t in self.questions.items()],
                "pairs": [vars(p) for p in self.pairs], "ranks": self.ranks.tolist(),
                "model_grades": [None if np.isnan(g) else int(g) for g in self.model_grades],
                "model_scale": self.model_scale,
                "other_models": [{"name": m.name, "scale": m.scale,
                                  "grades": [None if np.isnan(g) else int(g) for g in m.grades]}
                                 for m in self.other_models],
                "plan": self.plan.as_dict()}

    @property
    def fingerprint(self) -> str:
        content = self._content()
        keyed = {k: content[k] for k in ("dataset", "k", "configs", "scale", "ranks", "model_grades", "plan")}
        keyed["pairs"] = [[p.query_id, p.pair_id] for p in self.pairs]
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()

    def write(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".partial-{path.name}")
        tmp.write_text(json.dumps({**self._content(), "fingerprint": self.fingerprint}), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> "LabelPool":
        path = Path(path)
        data = read_json(path, "--pool", missing="give the .pool.json `kbench label` wrote beside its labels file",
                         not_json="not a pool file ({error}); give the .pool.json `kbench label` wrote")
        if not isinstance(data, dict) or data.get("kind") != POOL_KIND:
            raise LabelError(f"--pool {path}: not a kbench label pool (no \"kind\": \"{POOL_KIND}\"); give the "
                             ".pool.json `kbench label` wrote beside its labels file")
        try:
            pool = cls._from_dict(data)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LabelError(f"--pool {path}: not a pool file kbench wrote (a field is missing or of the wrong kind: "
                             f"{type(e).__name__}); build it again from the runs (kbench label RUN... or --sweep)"
                             ) from None
        if data.get("fingerprint") != pool.fingerprint:
            raise LabelError(f"--pool {path}: its content does not match its fingerprint (edited by hand?); build it "
                             "again from the runs (kbench label RUN... or --sweep)")
        return pool

    @classmethod
    def _from_dict(cls, data: dict) -> "LabelPool":
        return cls(data["dataset"], int(data["k"]), list(data["configs"]), dict(data["runs"]),
                   {q["id"]: q["text"] for q in data["questions"]}, [PoolPair(**p) for p in data["pairs"]],
                   np.array(data["ranks"], dtype=int).reshape(len(data["configs"]), len(data["pairs"])),
                   np.array([np.nan if g is None else g for g in data["model_grades"]], dtype=float), data["model"],
                   LabelPlan.from_dict(data["plan"]), data.get("scale", "graded"), list(data.get("recommendation", [])),
                   data.get("sweep"), data.get("model_scale", ""),
                   [ModelGrades(m["name"], np.array([np.nan if g is None else g for g in m["grades"]], dtype=float),
                                m.get("scale", "")) for m in data.get("other_models", [])],
                   str(data.get("dataset_path") or ""), dict(data.get("values") or {}),
                   {q["id"]: q["source"] for q in data["questions"] if isinstance(q.get("source"), str)})


@dataclass
class Contenders:
    labels: list[str]  # the recommended one first
    runs: dict[str, str]  # label -> run id
    lines: list[str]  # the recommendation's, at pool time
    parent: str | None  # the sweep parent's run id
    values: dict[str, dict[str, float]]  # label -> its run's logged run-level numbers (costs, p95s)


def contenders(run_ids: list[str], tracking_uri: str | None, config: RecommendConfig | None = None) -> Contenders:
    """The configs to label for, from the runs' logged per-query scores (see the module's docstring)."""
    try:
        scores, parent, _ = load_runs(run_ids, tracking_uri)
    except (CompareError, RunReadError) as e:
        raise LabelError(str(e)) from None
    if len(scores) < 2:
        raise LabelError(f"kbench label compares configs: {len(scores)} finished run given; give two or more run ids "
                         "or a sweep's parent run id")
    common = sorted(set.intersection(*(set(s.per_query.index) for s in scores)))
    columns = set.intersection(*(set(c for c in s.per_query.columns if s.per_query[c].dtype.kind in "fi")
                                 for s in scores))
    headline = headline_metric(columns)
    if headline is None and not any(c.startswith(("doc_", "chunk_", "span_")) for s in scores
                                    for c in s.per_query.columns):  # a set without labels: nothing scored yet
        if len(scores) > MAX_UNSCORED_CONTENDERS:
            raise LabelError(f"the {len(scores)} runs hold no per-query score (their questions carry no label yet): "
                             f"give at most {MAX_UNSCORED_CONTENDERS} runs to pool whole, or score them first "
                             "(kbench judge RUN... --out Q, then the sweep again with dataset.judged_qrels=Q)")
        labels = [s.label for s in scores]
        return Contenders(labels, {s.label: s.run_id for s in scores}, [
            f"no recommendation yet: the runs hold no per-query score (questions without labels); every one of the "
            f"{len(labels)} configs is a contender"], parent, _values(scores, labels))
    if headline is None or len(common) < 2:
        raise LabelError("the runs share no per-query quality metric (nDCG@10 ...) on two or more questions: are they "
                         "kbench runs of one dataset?")
    records = [ConfigRecord(s.label, {headline: s.per_query.loc[common, headline].to_numpy(dtype=float)},
                            dict(s.summary)) for s in scores]
    found = recommend(records, headline, (config or RecommendConfig()).model_copy(update={"guards": []}))
    if found.config is None:
        raise LabelError("every config is over a budget: nothing to label for")
    others = found.undecided or [c for c in found.order if c != found.config][:1]
    chosen = [found.config, *others]
    return Contenders(chosen, {s.label: s.run_id for s in scores if s.label in chosen}, found.lines(), parent,
                      _values(scores, chosen))


def _values(scores, labels: list[str]) -> dict[str, dict[str, float]]:
    """label -> the finite run-level numbers its run logged (what the recommendation's cost and budgets read)."""
    return {s.label: {k: float(v) for k, v in s.summary.items() if isinstance(v, (int, float)) and math.isfinite(v)}
            for s in scores if s.label in labels}


def judged_grades(path: Path) -> tuple[dict[tuple, int], str]:
    """The chunk-level grades of a ``kbench judge`` output (its ``<out>.json``) by (query, doc, start, end), checked
    by shape (``judging.judge.read_judgements``), and the model's name."""
    grades, provenance = read_judgements(path)
    model = provenance.get("judge_model")
    side = Path(path) if Path(path).suffix == ".json" else Path(path).with_name(Path(path).name + ".json")
    return grades, f"judge {model if isinstance(model, str) else '?'} ({side.name})"


def question_source(query, dataset) -> str:
    """Where a generated question came from, as the set recorded it (its method, the page of its reference, the
    section it was drawn from); "" for a question no generator made."""
    method = query.metadata.get("method")
    if not isinstance(method, str) or not method:
        return ""
    pages = sorted({s.doc_id for s in dataset.spans.get(query.query_id, [])}) or sorted(
        dataset.qrels.get(query.query_id, {}))
    section = query.metadata.get("stratum")
    return ", ".join([f"generated ({method})", *([f"page {', '.join(pages[:3])}"] if pages else []),
                      *([f"section {section}"] if isinstance(section, str) and section else [])])


def set_label(dataset, pair: Pair) -> int | None:
    """The evaluation set's own label as the model's grade: a span set labels every passage (1 overlapping a
    reference, else 0); qrels grade the documents they name (others: None, not graded)."""
    if dataset.spans.get(pair.query_id):
        return dataset_label(dataset, pair) or 0
    return dataset_label(dataset, pair)


def build_pool(run_ids: list[str], *, k: int = 10, judged: Path | None = None, seed: int = 0,
               random_share: float = 0.8, scale: str = "graded", tracking_uri: str | None = None,
               recommend_config: RecommendConfig | None = None, judge_model: str | None = None,
               workspace: str = "experiments") -> LabelPool:
    judged_by = judged_grades(judged) if judged is not None else None  # a bad file: one line before any run is read
    found = contenders(run_ids, tracking_uri, recommend_config)
    chosen, runs = found.labels, found.runs
    client = tracking_client(tracking_uri)
    logged = [load_logged_run(client, runs[label]) for label in chosen]
    dataset = logged[0].dataset
    texts = pool_runs(logged, k)  # Pair -> text; raises on runs of different datasets
    questions = {q.query_id: q.text for q in dataset.queries if any(q.query_id in r.run.hits for r in logged)}
    position = {q: i for i, q in enumerate(questions)}
    keys = sorted((p for p in texts if p.query_id in questions),
                  key=lambda p: (position[p.query_id], p.doc_id, p.start, p.end))
    index = {p: i for i, p in enumerate(keys)}
    ranks = np.zeros((len(chosen), len(keys)), dtype=int)
    for c, r in enumerate(logged):
        for qid, hits in r.run.hits.items():
            for rank, h in enumerate(hits[:k], start=1):
                chunk = r.chunks.get(h.chunk_id)
                if chunk is not None and (pair := Pair(qid, chunk.doc_id, chunk.start, chunk.end)) in index:
                    ranks[c, index[pair]] = ranks[c, index[pair]] or rank
    models = []  # (name, grades, scale, relevant from), the order's model first
    if judged_by is not None:
        by_pair, model = judged_by
        models.append((model, np.array([by_pair.get((p.query_id, p.doc_id, p.start, p.end), np.nan) for p in keys],
                                       float), GRADED, RELEVANT_FROM))
    if judge_model is not None:
        trained = TrainedJudge.load(judge_model, workspace)
        models.append((trained.describe(), np.array(trained.grade(
            [(questions[p.query_id], texts[p]) for p in keys]), float), GRADED, RELEVANT_FROM))
    own = np.array([np.nan if (g := set_label(dataset, p)) is None else g for p in keys], float)
    scored_by_judge = logged[0].judged_qrels is not None  # its labels then include a judge's document grades
    if not models or (not np.isnan(own).all() and not scored_by_judge):  # a set's grades (qrels 1, 2) count from 1
        models.append((f"the dataset's labels ({dataset.name})", own, scale_of(own), 1))
    if scale == "binary":  # the page asks 0/1: every model's grades on it
        models = [(name, np.where(np.isnan(g), np.nan, (g >= relevant).astype(float)), BINARY, 1)
                  for name, g, _, relevant in models]
    model, model_grades, model_scale, _ = models[0]
    documents = {d.doc_id: d for d in dataset.documents}
    sources = {q.query_id: found_at for q in dataset.queries if q.query_id in questions
               and (found_at := question_source(q, dataset))}
    pairs = []
    for p in keys:
        doc = documents.get(p.doc_id)
        text = doc.text if doc is not None else ""
        # a generated set's documents lost the lines its questions were made of (a heading): the title read from
        # what is left can be any line (a console comment), so the page names such a document by its path
        title = "" if sources else getattr(doc, "title", "") or ""
        pairs.append(PoolPair(p.query_id, p.doc_id, p.start, p.end, texts[p], title,
                              text[max(0, p.start - CONTEXT_CHARS):p.start], text[p.end:p.end + CONTEXT_CHARS]))
    if not pairs:
        raise LabelError(f"the contenders ({', '.join(chosen)}) ranked nothing in their top {k}: nothing to label")
    arrays = PoolArrays(np.array([position[p.query_id] for p in pairs]), ranks, model_grades, chosen, k,
                        len(questions))
    plan = label_plan(arrays.question_of, ranks, model_grades, len(questions), k, seed=seed, random_share=random_share)
    return LabelPool(dataset.name, k, chosen, runs, questions, pairs, ranks, model_grades, model, plan, scale,
                     found.lines, found.parent, model_scale,
                     [ModelGrades(name, g, kind) for name, g, kind, _ in models[1:]], logged[0].dataset_path,
                     found.values, sources)


__all__ = ["CONTEXT_CHARS", "Contenders", "LabelError", "LabelPool", "MAX_UNSCORED_CONTENDERS", "PoolPair", "SCALES",
           "build_pool", "contenders", "judged_grades", "question_source"]
