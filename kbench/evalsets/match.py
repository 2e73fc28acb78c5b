"""How far an evaluation set is from the questions users ask: ``kbench datasets match LOG SET [SET ...]``.

    found = match_sets("queries.csv", ["sets/heading", "sets/ict"], workspace)
    print("\\n".join(found.lines()))

The log is a query log (CSV, JSON lines, text: read as ``kbench datasets import-queries`` reads it, duplicates and
near-duplicates out) or a set whose questions are real (a dataset name or folder: SciFact's claims, the demo set's
hand-written questions). For each set:

- **A two-sample classifier test**: a logistic regression (scikit-learn, L2, C=1) tells the log's questions from the
  set's on their sentence embeddings (the catalogue's default model, ``EmbeddingConfig().model``: all-MiniLM-L6-v2,
  through the workspace's vector cache), scored out of fold by stratified ``FOLDS``-fold cross-validation; the AUC of
  the out-of-fold probabilities, with DeLong's interval (``delong_interval``, on the pooled out-of-fold scores).
  0.5: the classifier cannot tell the two apart (the set asks like the users); 1.0: it tells every question apart.
  Each side is a seeded sample of at most ``max_questions``. The log against its own two random halves is the
  reference: the AUC a set as close as another sample of the same users would get (about 0.5).
- **The distributions side by side**: length in words (median, quartiles); question forms (``FORMS``: a question
  (a question word first or a "?"), how-to, keywords only (none of the others, at most ``KEYWORD_WORDS`` words),
  an error message (an exception name, "error:", an HTTP status), code (backticks, a call, snake_case, operators));
  the first word (what, how,
  why, ..., a yes/no question's verb); and the lexical overlap with the gold passage (the share of the question's
  content stems in its reference, ``leakage.word_overlap``) where the set has labels.
- **The closest generator**: the set with the lowest AUC.

Each set's result is written to ``<workspace>/matches/<key>.json`` (``key``: a hash of the set's folder), so a
sweep on that set can say which set its decision rests on and how far it is from the log: ``decision_line``.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from kbench.datasets.config import DatasetConfig
from kbench.datasets.query_log import LOG_KIND, distinct_questions, read_log, read_manifest
from kbench.datasets.reading import DatasetError
from kbench.datasets.registry import DATASETS, load_dataset, resolve_dataset_path
from kbench.datasets.synthetic.leakage import word_overlap
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import CachedEmbedder
from kbench.errors import UserError
from kbench.lazy import lazy_module

stats = lazy_module("scipy.stats")

FOLDS = 5
MAX_QUESTIONS = 1000
MIN_QUESTIONS = 10  # per side: fewer and the cross-validated AUC is noise
MATCHES = "matches"  # <workspace>/matches/<key>.json

QUESTION_WORDS = ("what", "how", "why", "when", "where", "which", "who", "whom", "whose")
YES_NO = ("can", "could", "does", "do", "did", "is", "are", "was", "were", "should", "would", "will", "has", "have")
HOW_TO = re.compile(r"(?i)^\s*how\s+(to|do|does|can|could|should|would)\b|\bhow to\b")
ERROR = re.compile(r"\b\w*(Error|Exception|Warning)\b|Traceback|(?i:\berror\s*:|\berrno\b|\bexit code\b|\bstatus "
                   r"code\b|\bfailed with\b)|\b[45]\d\d\b")
CODE = re.compile(r"`|\w\(|\(\)|\b[a-z]+_[a-z_]+\b|\b\w+\.\w+\(|^\s*(import|from)\s+\w|[{}]|::|->|==|!=|\.py\b")
KEYWORD_WORDS = 6  # a keywords-only query: no question form and at most this many words


def first_word(text: str) -> str:
    words = re.findall(r"[A-Za-z']+", text.lower())
    if not words:
        return "other"
    if words[0] in QUESTION_WORDS:
        return words[0]
    return "yes/no" if words[0] in YES_NO else "other"


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?") or first_word(text) != "other"


def is_error(text: str) -> bool:
    return bool(ERROR.search(text))


def is_code(text: str) -> bool:
    return bool(CODE.search(text))


FORMS = {  # a question may take several forms (an error message asked as a question); shares are each their own
    "question": is_question,
    "how-to": lambda t: bool(HOW_TO.search(t)),
    "keywords only": lambda t: not (is_question(t) or is_error(t) or is_code(t)) and len(t.split()) <= KEYWORD_WORDS,
    "error message": is_error,
    "code": is_code,
}
FIRST_WORDS = ("what", "how", "why", "when", "where", "which", "who", "yes/no", "other")


@dataclass
class QuestionSet:
    name: str
    kind: str  # log | set
    texts: list[str]
    references: list[str] | None = None  # the gold passage's text per question (None: no labels)
    path: str | None = None
    method: str | None = None  # a generated set's method (manifest.json)


@dataclass
class Profile:
    """The distributions of one set of questions."""

    questions: int
    words: tuple[float, float, float]  # median, 25th, 75th percentile
    forms: dict[str, float]  # form -> share
    first_words: dict[str, float]  # first word -> share
    overlap: float | None  # mean word overlap with the gold passage; None without labels

    @classmethod
    def of(cls, questions: QuestionSet) -> "Profile":
        texts = questions.texts
        words = [len(t.split()) for t in texts]
        p25, median, p75 = np.percentile(words, [25, 50, 75])
        counts = Counter(first_word(t) for t in texts)
        overlap = None
        if questions.references is not None:
            pairs = [(t, r) for t, r in zip(texts, questions.references) if r]
            overlap = float(np.mean([word_overlap(t, r) for t, r in pairs])) if pairs else None
        return cls(len(texts), (float(median), float(p25), float(p75)),
                   {name: float(np.mean([test(t) for t in texts])) for name, test in FORMS.items()},
                   {w: counts.get(w, 0) / len(texts) for w in FIRST_WORDS}, overlap)


@dataclass
class Auc:
    auc: float
    low: float
    high: float
    n_log: int
    n_set: int

    def text(self) -> str:
        return f"{self.auc:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass
class SetMatch:
    name: str
    path: str | None
    method: str | None
    auc: Auc
    profile: Profile


@dataclass
class MatchReport:
    log: str
    log_profile: Profile
    halves: Auc | None  # the log against its own halves: the reference
    sets: list[SetMatch] = field(default_factory=list)
    model: str = ""
    written: list[str] = field(default_factory=list)

    @property
    def closest(self) -> SetMatch:
        return min(self.sets, key=lambda s: s.auc.auc)

    def lines(self) -> list[str]:
        names = [f"{self.log} (log)", *[s.name for s in self.sets]]
        profiles = [self.log_profile, *[s.profile for s in self.sets]]
        rows = [["questions", *[str(p.questions) for p in profiles]],
                ["AUC against the log", "-" if self.halves is None else f"halves {self.halves.text()}",
                 *[s.auc.text() for s in self.sets]],
                ["words (median [p25, p75])", *[f"{p.words[0]:.0f} [{p.words[1]:.0f}, {p.words[2]:.0f}]"
                                                for p in profiles]]]
        rows += [[f"form: {form}", *[f"{p.forms[form]:.0%}" for p in profiles]] for form in FORMS]
        rows += [[f"first word: {w}", *[f"{p.first_words[w]:.0%}" for p in profiles]] for w in FIRST_WORDS
                 if any(p.first_words[w] for p in profiles)]
        rows.append(["overlap with the gold passage", *["no labels" if p.overlap is None else f"{p.overlap:.2f}"
                                                        for p in profiles]])
        widths = [max(len(str(r[i])) for r in rows + [["", *names]]) for i in range(len(names) + 1)]
        table = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in [["", *names], *rows]]
        closest = self.closest
        out = [f"two-sample classifier: logistic regression on {self.model} embeddings, {FOLDS}-fold AUC with DeLong's "
               "95% interval (0.5: the set asks like the log; 1.0: every question told apart)", *table,
               f"closest to the log: {closest.name}" + (f" ({closest.method})" if closest.method else "")
               + f", AUC {closest.auc.text()}"]
        if self.halves is not None:
            out.append(f"the log against its own halves: AUC {self.halves.text()} (how close another sample of the "
                       "same users would be)")
        out += [f"written: {path}" for path in self.written]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"log": self.log, "model": self.model, "log_profile": asdict(self.log_profile),
                "halves": None if self.halves is None else asdict(self.halves),
                "sets": [{"name": s.name, "path": s.path, "method": s.method, "auc": asdict(s.auc),
                          "profile": asdict(s.profile)} for s in self.sets],
                "closest": self.closest.name}


class MatchError(UserError, ValueError):
    pass


# --------------------------------------------------------------------------- the statistics
def midranks(x: np.ndarray) -> np.ndarray:
    return stats.rankdata(x, method="average")


def delong_interval(y: np.ndarray, scores: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """(AUC, low, high): the AUC of ``scores`` for the labels ``y`` (1: positive) and DeLong's normal interval
    (DeLong, DeLong and Clarke-Pearson 1988; the midrank form of Sun and Xu 2014), clipped to [0, 1]."""
    y, scores = np.asarray(y, dtype=int), np.asarray(scores, dtype=float)
    pos, neg = scores[y == 1], scores[y == 0]
    m, n = len(pos), len(neg)
    if m < 2 or n < 2:
        raise ValueError(f"an AUC interval needs 2 or more of each class, got {m} and {n}")
    tz = midranks(np.concatenate([pos, neg]))
    auc = (tz[:m].sum() - m * (m + 1) / 2) / (m * n)
    v_pos = (tz[:m] - midranks(pos)) / n  # per positive: the share of negatives it outranks
    v_neg = 1.0 - (tz[m:] - midranks(neg)) / m  # per negative: the share of positives that outrank it
    se = math.sqrt(np.var(v_pos, ddof=1) / m + np.var(v_neg, ddof=1) / n)
    half = float(stats.norm.ppf(1 - alpha / 2)) * se
    return float(auc), max(0.0, float(auc - half)), min(1.0, float(auc + half))


def classifier_auc(a: np.ndarray, b: np.ndarray, seed: int = 0, folds: int = FOLDS) -> Auc:
    """How well a logistic regression tells rows of ``a`` (label 0) from rows of ``b`` (label 1), out of fold."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    x = np.vstack([a, b])
    y = np.r_[np.zeros(len(a), dtype=int), np.ones(len(b), dtype=int)]
    folds = min(folds, len(a), len(b))
    scores = np.zeros(len(y))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        model = LogisticRegression(C=1.0, max_iter=2000).fit(x[train], y[train])
        scores[test] = model.predict_proba(x[test])[:, 1]
    auc, low, high = delong_interval(y, scores)
    return Auc(auc, low, high, len(a), len(b))


# --------------------------------------------------------------------------- reading questions
def sample(texts: list[str], references: list[str] | None, limit: int, seed: int):
    if len(texts) <= limit:
        return texts, references
    chosen = sorted(random.Random(seed).sample(range(len(texts)), limit))
    return [texts[i] for i in chosen], None if references is None else [references[i] for i in chosen]


def is_dataset(source: str) -> bool:
    path = Path(source).expanduser()
    return path.is_dir() or (source in DATASETS and not path.exists())


def dataset_config(source: str, split: str = "test") -> DatasetConfig:
    path = Path(source).expanduser()
    return DatasetConfig(path=str(path), split=split) if path.is_dir() else DatasetConfig(name=source, split=split)


def question_set(dataset, kind: str, path: str | None = None, method: str | None = None) -> QuestionSet:
    """A loaded dataset's questions and, where it has labels, each question's gold passage (its spans' text, or its
    relevant documents' text)."""
    texts = {d.doc_id: d.text for d in dataset.documents}
    references: list[str] = []
    for q in dataset.queries:
        spans = dataset.spans.get(q.query_id)
        if spans:
            references.append("\n".join(texts.get(s.doc_id, "")[s.start:s.end] for s in spans))
        else:
            relevant = [d for d, g in dataset.qrels.get(q.query_id, {}).items() if g > 0]
            references.append("\n".join(texts.get(d, "") for d in relevant))
    return QuestionSet(dataset.name, kind, [q.text for q in dataset.queries], references if any(references) else None,
                       path, method)


def read_set(source: str, kind: str, split: str = "test") -> QuestionSet:
    """A dataset's questions (by name or folder), with its gold passages and a generated set's method."""
    config = dataset_config(source, split)
    path, name = resolve_dataset_path(config)
    manifest = read_manifest(path)
    method = manifest.get("method") or ("query log" if manifest.get("kind") == LOG_KIND else None)
    found = question_set(load_dataset(config), kind, str(path), method)
    found.name = name
    return found


def read_questions(source: str, kind: str, seed: int, split: str = "test") -> QuestionSet:
    """A query log file's distinct questions, or a dataset's questions."""
    if is_dataset(source):
        return read_set(source, kind, split)
    path = Path(source).expanduser()
    if not path.is_file():
        raise MatchError(f"{source}: neither a query log file nor a dataset (a registered name or a folder)")
    records, _ = read_log(str(path))
    questions = distinct_questions(records, Counter(), seed)
    if not questions:
        raise MatchError(f"{path}: no question left after cleaning (empty, binary or secret-looking lines only?)")
    return QuestionSet(path.name, kind, [q.text for q in sorted(questions, key=lambda q: q.first)], None, str(path))


# --------------------------------------------------------------------------- the match
def set_key(path: str | Path) -> str:
    return hashlib.sha256(str(Path(path).expanduser().resolve()).encode()).hexdigest()[:16]


def match_file(workspace: Path, path: str | Path) -> Path:
    return Path(workspace) / MATCHES / f"{set_key(path)}.json"


def match_questions(log: QuestionSet, sets: list[QuestionSet], workspace: Path, *, seed: int = 0,
                    max_questions: int = MAX_QUESTIONS) -> MatchReport:
    """The classifier test and the profiles of ``sets`` against ``log`` (nothing written)."""
    for q in [log, *sets]:
        if len(q.texts) < MIN_QUESTIONS:
            raise MatchError(f"{q.name}: {len(q.texts)} questions; a two-sample test needs {MIN_QUESTIONS} or more "
                             "a side")
    embedding = EmbeddingConfig()
    embedder = CachedEmbedder(embedding, Path(workspace) / "cache")
    log_texts, _ = sample(log.texts, None, max_questions, seed)
    log_vectors = embedder.embed_queries(log_texts)
    halves = None
    if len(log_texts) >= 2 * MIN_QUESTIONS:
        order = np.random.default_rng(seed).permutation(len(log_texts))
        half = len(order) // 2
        halves = classifier_auc(log_vectors[order[:half]], log_vectors[order[half:2 * half]], seed)
    report = MatchReport(log.name, Profile.of(log), halves, model=embedding.model)
    for other in sets:
        texts, references = sample(other.texts, other.references, max_questions, seed)
        shown = QuestionSet(other.name, other.kind, texts, references, other.path, other.method)
        auc = classifier_auc(log_vectors, embedder.embed_queries(texts), seed)
        report.sets.append(SetMatch(other.name, other.path, other.method, auc, Profile.of(shown)))
    return report


def match_sets(log: str, sets: list[str], workspace: Path, *, seed: int = 0, max_questions: int = MAX_QUESTIONS,
               split: str = "test", write: bool = True) -> MatchReport:
    """``kbench datasets match``: read the log and the sets, match them, and write each set's result."""
    report = match_questions(read_questions(log, "log", seed, split),
                             [read_questions(s, "set", seed, split) for s in sets], workspace, seed=seed,
                             max_questions=max_questions)
    if write:
        for s in report.sets:
            target = match_file(workspace, s.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            record = {"set": s.name, "path": s.path, "method": s.method, "log": report.log, "auc": asdict(s.auc),
                      "closest": report.closest.name, "closest_auc": report.closest.auc.auc,
                      "halves": None if report.halves is None else asdict(report.halves), "model": report.model,
                      "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            tmp = target.with_name(f".partial-{target.name}")
            tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
            tmp.replace(target)
            report.written.append(str(target))
    return report


def decision_line(dataset: DatasetConfig, workspace: Path) -> str | None:
    """What a sweep on ``dataset`` says about the set its decision rests on: real questions from a query log, or a
    generated set and its distance from the log (``kbench datasets match`` wrote it); None when neither is known."""
    try:
        path, name = resolve_dataset_path(dataset)
    except DatasetError:
        return None
    manifest = read_manifest(path)
    if manifest.get("kind") == LOG_KIND:
        kept = (manifest.get("report") or {}).get("kept")
        return (f"the decision rests on {name}: real questions from a query log"
                + (f" ({kept} questions)" if kept else "") + ", labelled by kbench judge or kbench label")
    try:
        found = json.loads(match_file(workspace, path).read_text(encoding="utf-8"))
        auc = found["auc"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    what = f"{name} ({found['method']} questions)" if found.get("method") else name
    closest = "" if found.get("closest") == found.get("set") else \
        f"; the closest set measured is {found['closest']}, AUC {found['closest_auc']:.3f}"
    return (f"the decision rests on {what}, AUC {auc['auc']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}] against the "
            f"log {found['log']} (0.5: asks like the users, 1.0: told apart every time; kbench datasets match){closest}")


__all__ = ["Auc", "FORMS", "MatchError", "MatchReport", "Profile", "QuestionSet", "SetMatch", "classifier_auc",
           "decision_line", "delong_interval", "match_file", "match_questions", "match_sets", "question_set",
           "read_questions"]
