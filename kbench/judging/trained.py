"""A trained judge: a cross-encoder fine-tuned on a generated set's pairs (kbench/training/judge.py), used where the
LLM judge would be: grading a pool (``kbench judge --judge-model NAME``), measured against labels (``--calibrate``),
and as a labelling pool's model (``kbench label --judge-model NAME``).

    pairs, counts = training_pairs(runs, dataset, pooled, negatives=3, max_pairs=400, seed=0)
    judge = TrainedJudge.load("docs-judge"); judge.grade([(question, passage), ...])  # 0-3

Training pairs, from the runs of a sweep on a set with labels (a generated set), per question:
- **positives**: the pooled passages the set labels relevant (overlapping a reference span; a document its qrels
  grade above 0); a question none of whose pooled passages is relevant gives its reference text instead (its
  span's text, or the start of its relevant document), so every question teaches what an answer looks like;
- **hard negatives**: a seeded sample of ``negatives`` pooled passages the set labels not relevant (a span set
  labels every passage; for document qrels, the pooled documents they do not grade): passages some config ranked
  in its top k for that question, the mistakes a judge must not make.
Questions are taken in a seeded order until ``max_pairs`` pairs (CPU training stays short).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.errors import UserError
from kbench.judging.judge import JudgeAnswers, Pair, _pooled, calibration_label
from kbench.paths import models_dir
from kbench.records import Dataset
from kbench.training.judge import (JUDGE_KIND, JudgeTrainingConfig, grade_of, judge_embedder, probabilities,
                                   train_judge)
from kbench.training.reranker import MODEL_CARD, TrainingPair, TrainingReport

REFERENCE_CHARS = 2000  # of a relevant document, when its text is the positive


class TrainedJudgeError(UserError, ValueError):
    pass


def reference_text(dataset: Dataset, query_id: str) -> str:
    """The question's reference: its spans' text, else the start of its first relevant document."""
    texts = {d.doc_id: d.text for d in dataset.documents}
    spans = dataset.spans.get(query_id)
    if spans:
        return "\n".join(texts.get(s.doc_id, "")[s.start:s.end] for s in spans)
    relevant = [d for d, g in sorted(dataset.qrels.get(query_id, {}).items()) if g > 0]
    return texts.get(relevant[0], "")[:REFERENCE_CHARS] if relevant else ""


def training_pairs(dataset: Dataset, questions: dict[str, str], pooled: list[tuple[Pair, str]], *,
                   negatives: int = 3, max_pairs: int = 400, seed: int = 0
                   ) -> tuple[list[TrainingPair], dict[str, int]]:
    """(pairs, counts): positives and hard negatives from the pool (see the module's docstring)."""
    by_question: dict[str, tuple[list[str], list[str]]] = {}
    for p, text in pooled:
        gold = calibration_label(dataset, p)
        if gold is not None and p.query_id in questions:
            by_question.setdefault(p.query_id, ([], []))[0 if gold else 1].append(text)
    rng = random.Random(seed)
    order = sorted(set(by_question) | {q for q in questions if reference_text(dataset, q)})
    rng.shuffle(order)
    pairs: list[TrainingPair] = []
    counts = {"questions": 0, "pooled_positives": 0, "reference_positives": 0, "negatives": 0}
    for q in order:
        relevant, not_relevant = by_question.get(q, ([], []))
        chosen = rng.sample(not_relevant, min(negatives, len(not_relevant)))
        positives = relevant or [t for t in [reference_text(dataset, q)] if t.strip()]
        if not positives or not chosen:
            continue  # nothing to tell apart on this question
        if pairs and len(pairs) + len(positives) + len(chosen) > max_pairs:
            break
        counts["questions"] += 1
        counts["pooled_positives" if relevant else "reference_positives"] += len(positives)
        counts["negatives"] += len(chosen)
        pairs += [TrainingPair(questions[q], t, 1.0, q) for t in positives]
        pairs += [TrainingPair(questions[q], t, 0.0, q) for t in chosen]
    return pairs, counts


def train_judge_on_runs(run_ids: list[str], name: str, *, k: int = 10, negatives: int = 3, max_pairs: int = 400,
                        epochs: int = 1, seed: int = 0, tracking_uri: str | None = None, force: bool = False,
                        workspace: str = "experiments", log=None) -> TrainingReport:
    """``kbench judge RUN... --train NAME``: pairs from the runs' pools and their set's labels, then
    ``train_judge``; the runs are a sweep on a set with labels (a generated set)."""
    runs, dataset, questions, pooled = _pooled(run_ids, k, tracking_uri)
    if not dataset.qrels and not dataset.spans:
        raise TrainedJudgeError(f"--train: the runs' set {dataset.name!r} has no labels (a query log's?): a judge is "
                                "trained on a generated set's labels; give the runs of a sweep on a generated set "
                                "(kbench datasets build synthetic) over the same documents")
    pairs, counts = training_pairs(dataset, questions, pooled, negatives=negatives, max_pairs=max_pairs, seed=seed)
    config = JudgeTrainingConfig(name, dataset=dataset.name, runs=tuple(r.run_id for r in runs), epochs=epochs,
                                 seed=seed, force=force, workspace=workspace)
    report = train_judge(pairs, config, log)
    report.card["pairs_from"] = {"k": k, "negatives": negatives, "max_pairs": max_pairs, **counts}
    return report


@dataclass
class TrainedJudge:
    """A judge ``kbench judge --train`` saved under the models folder, grading (question, passage) pairs 0-3."""

    name: str
    path: Path
    card: dict[str, Any] = field(default_factory=dict)
    workspace: str = "experiments"  # whose cache/ holds the embeddings of its second feature
    _model: Any = None

    @classmethod
    def load(cls, name: str, workspace: str = "experiments") -> "TrainedJudge":
        path = models_dir() / name
        try:
            card = json.loads((path / MODEL_CARD).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TrainedJudgeError(f"--judge-model {name}: no trained judge {path}; train one first: kbench judge "
                                    f"RUN... --train {name} (the runs of a sweep on a generated set)") from None
        except ValueError:
            raise TrainedJudgeError(f"--judge-model {name}: {path / MODEL_CARD} is not JSON; train it again "
                                    f"(kbench judge RUN... --train {name} --force)") from None
        if card.get("kind") != JUDGE_KIND:
            raise TrainedJudgeError(f"--judge-model {name}: {path} is a {card.get('kind', 'model')}, not a trained "
                                    f"judge; train one with kbench judge RUN... --train NAME")
        if "combination" not in card:
            raise TrainedJudgeError(f"--judge-model {name}: {path} was trained before judges combined their two "
                                    f"features; train it again (kbench judge RUN... --train {name} --force)")
        return cls(name, path, card, workspace)

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(str(self.path), device="cpu", local_files_only=True,
                                       max_length=int(self.card.get("training", {}).get("max_length", 256)))
        return self._model

    def describe(self) -> str:
        return f"trained judge {self.name} (cross-encoder, trained on {self.card.get('dataset') or 'a generated set'})"

    @property
    def provenance(self) -> dict[str, Any]:
        return {"judge_model": f"trained:{self.name}", "judge_kind": "trained cross-encoder",
                "judge_card": {k: self.card.get(k) for k in ("base", "dataset", "runs", "counts", "grades", "combination",
                                                             "created")}}

    def probabilities(self, pairs: list[tuple[str, str]]):
        embedder = judge_embedder(self.card["combination"]["embedding_model"], self.workspace)
        return probabilities(self.model, embedder, self.card, pairs)

    def grade(self, pairs: list[tuple[str, str]]) -> list[int]:
        """A 0-3 grade per (question, passage): the probability of relevance in quarters."""
        return [grade_of(p) for p in self.probabilities(pairs)]

    def answers(self, questions: dict[str, str], pairs: list[tuple[Pair, str]]) -> JudgeAnswers:
        """The judge interface ``judge_runs`` and ``calibrate`` call (every pair gets a grade)."""
        return JudgeAnswers(self.grade([(questions[p.query_id], text) for p, text in pairs]))


__all__ = ["TrainedJudge", "TrainedJudgeError", "reference_text", "train_judge_on_runs", "training_pairs"]
