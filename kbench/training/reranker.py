"""Fine-tune a cross-encoder reranker on a dataset's train split, with hard negatives from the first stage.

No PyPI package ships a trained cross-encoder, so kbench trains one from a local base model
(all-MiniLM-L6-v2 by default). Loaded with ``num_labels=1`` the base gets a fresh, random scoring head:
its scores mean nothing until this training has run.

Training pairs, per training query:
- positives: every chunk judged relevant (BEIR: a chunk of a document with qrel grade > 0; span datasets:
  a chunk overlapping one of the query's reference spans), label 1;
- hard negatives: a seeded sample of ``negatives`` chunks from the first stage's top ``mine_depth``
  (MiniLM cosine search) that are not positives, label 0.
The default loss is listwise: a softmax over each positive and its query's hard negatives, i.e. "rank the
positive first", which asks for the ordering a reranker is used for (pointwise binary cross-entropy per
pair is the alternative). AdamW with a linear warmup/decay schedule; the fresh head learns 10x faster than
the encoder. A plain loop, through the CrossEncoder's own ``preprocess`` and forward (``predict``'s path).

The model is saved under ``models_dir()/<name>`` with ``kbench_model.json`` (base, dataset, split, counts,
seed, knobs), so ``rerank.model: <name>`` finds it.
"""
from __future__ import annotations

import json
import math
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kbench.chunking.config import ChunkingConfig
from kbench.datasets.config import DatasetConfig
from kbench.embedding.config import EmbeddingConfig
from kbench.embedding.models import resolve_model_path
from kbench.embedding.stage import CachedEmbedder
from kbench.errors import ConfigError
from kbench.evaluation.config import OverlapRule
from kbench.evaluation.relevance import relevant_chunks
from kbench.paths import models_dir, workspace_dir
from kbench.pipeline import chunk_dataset, read_dataset
from kbench.progress import LINE_EVERY_S, duration, estimate_line
from kbench.records import Chunk, Dataset, chunks_by_doc

MODEL_CARD = "kbench_model.json"
LOSSES = ("listwise", "pointwise")


@dataclass(frozen=True)
class TrainingPair:
    query: str
    text: str
    label: float  # 1.0 relevant, 0.0 hard negative
    query_id: str  # groups a query's pairs: two queries can share a text (SciFact's train split has two)


@dataclass
class RerankerTrainingConfig:
    dataset: str  # a registered dataset name or a dataset folder
    out: str  # the model's name under models_dir()
    split: str = "train"
    base: str = "all-MiniLM-L6-v2"  # the encoder the cross-encoder starts from
    first_stage_model: str = "all-MiniLM-L6-v2"  # embeds chunks and queries to mine hard negatives
    epochs: int = 3
    negatives: int = 4  # hard negatives per query
    mine_depth: int = 20  # negatives are sampled from the first stage's top this-many
    max_queries: int | None = None
    max_length: int = 256  # tokens per (query, passage) pair
    batch_size: int = 16
    loss: str = "listwise"  # listwise (softmax over positive + its negatives) | pointwise (binary cross-entropy)
    learning_rate: float = 1e-4  # the encoder's
    head_learning_rate: float = 1e-3  # the fresh scoring head's
    warmup_fraction: float = 0.1
    seed: int = 0
    chunking: dict[str, Any] | None = None  # default: none for document qrels, fixed for span datasets
    workspace: str = "experiments"  # whose cache/ holds (and receives) the first-stage embeddings
    force: bool = False  # replace an existing model of the same name


@dataclass
class TrainingReport:
    path: Path
    card: dict[str, Any] = field(default_factory=dict)


def _dataset_config(config: RerankerTrainingConfig) -> DatasetConfig:
    as_path = Path(config.dataset).expanduser()
    if as_path.is_dir():
        return DatasetConfig(path=str(as_path), split=config.split, max_queries=config.max_queries, seed=config.seed)
    return DatasetConfig(name=config.dataset, split=config.split, max_queries=config.max_queries, seed=config.seed)


def positive_chunks(dataset: Dataset, chunks: list[Chunk]) -> dict[str, set[int]]:
    """Query id -> indexes of its relevant chunks (span overlap for span datasets, doc qrels otherwise)."""
    by_doc = chunks_by_doc(chunks)
    positives = {}
    for q in dataset.queries:
        if dataset.has_spans and q.query_id in dataset.spans:
            found = relevant_chunks(chunks, dataset.spans[q.query_id], OverlapRule(), by_doc)
        else:
            judged = [d for d, grade in dataset.qrels.get(q.query_id, {}).items() if grade > 0]
            found = {i for d in judged for i in by_doc.get(d, ())}
        positives[q.query_id] = found
    return positives


def mine_pairs(dataset: Dataset, chunks: list[Chunk], chunk_vectors: np.ndarray, query_vectors: np.ndarray,
               negatives: int, mine_depth: int, seed: int) -> tuple[list[TrainingPair], dict[str, int]]:
    """Positives plus hard negatives sampled from the first stage's top ``mine_depth`` (cosine)."""
    rng = random.Random(seed)
    positives = positive_chunks(dataset, chunks)
    scores = query_vectors @ chunk_vectors.T
    depth = min(mine_depth, len(chunks))
    pairs: list[TrainingPair] = []
    stats = {"queries": 0, "queries_without_positives": 0, "positives": 0, "negatives": 0,
             "positives_in_first_stage": 0}
    for qi, q in enumerate(dataset.queries):
        pos = positives[q.query_id]
        if not pos:
            stats["queries_without_positives"] += 1
            continue
        top = np.argpartition(-scores[qi], depth - 1)[:depth]
        top = top[np.argsort(-scores[qi][top], kind="stable")]
        stats["positives_in_first_stage"] += len(pos.intersection(top.tolist()))
        pool = [int(i) for i in top if int(i) not in pos]
        chosen = rng.sample(pool, min(negatives, len(pool)))
        stats["queries"] += 1
        stats["positives"] += len(pos)
        stats["negatives"] += len(chosen)
        pairs += [TrainingPair(q.text, chunks[i].text, 1.0, q.query_id) for i in sorted(pos)]
        pairs += [TrainingPair(q.text, chunks[i].text, 0.0, q.query_id) for i in chosen]
    return pairs, stats


def load_base_cross_encoder(base: str, max_length: int, seed: int):
    """The base encoder with a fresh single-logit head (random until trained; seeded for repeatability)."""
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(seed)
    return CrossEncoder(str(resolve_model_path(base)), num_labels=1, max_length=max_length, device="cpu",
                        local_files_only=True)


def listwise_groups(pairs: list[TrainingPair]) -> list[list[TrainingPair]]:
    """Each positive with its query's hard negatives, positive first (one softmax group each)."""
    by_query: dict[str, tuple[list[TrainingPair], list[TrainingPair]]] = {}
    for p in pairs:
        by_query.setdefault(p.query_id, ([], []))[0 if p.label == 1.0 else 1].append(p)
    return [[pos] + negatives for positives, negatives in by_query.values() for pos in positives if negatives]


def fit_cross_encoder(model, pairs: list[TrainingPair], *, loss: str, epochs: int, batch_size: int,
                      learning_rate: float, head_learning_rate: float, warmup_fraction: float, seed: int,
                      log: Callable[[str], None]) -> list[float]:
    """Train in place; returns the mean loss of each logging window.

    ``listwise``: softmax cross-entropy over (positive, its query's negatives), i.e. "rank the positive
    first"; ``pointwise``: binary cross-entropy per pair. The fresh head gets its own, larger learning rate.
    """
    import torch

    rng = random.Random(seed)
    if loss == "listwise":
        units = listwise_groups(pairs)
        per_step = max(1, round(batch_size * len(units) / sum(len(u) for u in units)))  # ~batch_size pairs
    else:
        units, per_step = [[p] for p in pairs], batch_size
    steps_per_epoch = math.ceil(len(units) / per_step)
    total = max(1, steps_per_epoch * epochs)
    warmup = max(1, int(total * warmup_fraction))
    head = [p for n, p in model.named_parameters() if "classifier" in n]
    body = [p for n, p in model.named_parameters() if "classifier" not in n]
    optimizer = torch.optim.AdamW([{"params": body, "lr": learning_rate}, {"params": head, "lr": head_learning_rate}],
                                  weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    model.train()
    log(f"train: {epochs} epoch{'s' if epochs != 1 else ''} of {steps_per_epoch:,} steps ({len(units):,} "
        f"{'groups' if loss == 'listwise' else 'pairs'}, about {batch_size} pairs a step): {total:,} steps; the first "
        "step is timed for an estimate")
    losses, window, step, started = [], [], 0, time.perf_counter()
    lined = started
    for _ in range(epochs):
        order = list(range(len(units)))
        rng.shuffle(order)
        for start in range(0, len(order), per_step):
            batch = [units[i] for i in order[start : start + per_step]]
            flat = [p for unit in batch for p in unit]
            logits = model(model.preprocess([[p.query, p.text] for p in flat]))["scores"].view(-1)
            if loss == "listwise":
                sizes = [len(unit) for unit in batch]
                value = torch.stack([-torch.log_softmax(group, dim=0)[0] for group in logits.split(sizes)]).mean()
            else:
                labels = torch.tensor([p.label for p in flat], dtype=logits.dtype)
                value = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            window.append(value.item())
            now = time.perf_counter()
            if step == 1 and total > 1:  # the estimate (kbench/progress.py), before the run is long
                log(estimate_line("train", total, "steps", now - started, 1))
            if step % 20 == 0 or step == total or now - lined >= LINE_EVERY_S:  # a line a minute at least
                losses.append(float(np.mean(window)))
                window, lined = [], now
                left = (now - started) * (total - step) / step
                log(f"step {step}/{total}  {loss} loss {losses[-1]:.4f}  {now - started:.0f}s"
                    + (f", {duration(left)} left" if step < total else ""))
    model.eval()
    return losses


def train_reranker(config: RerankerTrainingConfig, log: Callable[[str], None] | None = None) -> TrainingReport:
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if config.loss not in LOSSES:
        raise ConfigError(f"--loss: {config.loss!r} is not one of {', '.join(LOSSES)}")
    target = models_dir() / config.out
    if target.exists() and not config.force:
        raise ConfigError(f"--out: {target} already exists; choose another --out name or pass --force to replace it")
    started = time.perf_counter()
    dataset = read_dataset(_dataset_config(config))
    chunking = config.chunking or ({"strategy": "fixed"} if dataset.has_spans else {"strategy": "none"})
    chunks = chunk_dataset(dataset, ChunkingConfig(**chunking))
    log(f"{dataset.name} split {config.split!r}: {len(dataset.queries)} queries, {len(chunks)} chunks")

    embedder = CachedEmbedder(EmbeddingConfig(model=config.first_stage_model),
                              workspace_dir(config.workspace) / "cache")
    embedded = embedder.embed([c.text for c in chunks], progress=False)
    log(f"first stage: {embedded.cache_hits} chunk vectors cached, {embedded.cache_misses} computed")
    query_vectors = embedder.embed_queries([q.text for q in dataset.queries])
    pairs, stats = mine_pairs(dataset, chunks, embedded.vectors, query_vectors, config.negatives,
                              config.mine_depth, config.seed)
    del embedder, embedded, query_vectors  # the first stage is done: free its model and vectors before training
    if not pairs:
        raise ConfigError(f"no training pairs: none of the {len(dataset.queries)} queries of {dataset.name!r} "
                         f"split {config.split!r} has a relevant chunk")
    log(f"pairs: {stats['positives']} positive, {stats['negatives']} hard negatives over {stats['queries']} queries")

    model = load_base_cross_encoder(config.base, config.max_length, config.seed)
    losses = fit_cross_encoder(model, pairs, loss=config.loss, epochs=config.epochs, batch_size=config.batch_size,
                               learning_rate=config.learning_rate, head_learning_rate=config.head_learning_rate,
                               warmup_fraction=config.warmup_fraction,
                               seed=config.seed, log=log)

    card = {
        "kind": "cross_encoder",
        "base": config.base,
        "dataset": dataset.name,
        "split": config.split,
        "split_applies": not dataset.has_spans,  # span datasets have no splits: every question is used
        "chunking": chunking,
        "first_stage": f"{config.first_stage_model} cosine top-{config.mine_depth}",
        "counts": {**stats, "pairs": len(pairs), "chunks": len(chunks)},
        "training": {k: v for k, v in asdict(config).items()
                     if k in ("epochs", "negatives", "mine_depth", "max_queries", "max_length", "batch_size",
                              "loss", "learning_rate", "head_learning_rate", "warmup_fraction", "seed")},
        "loss_first_window": losses[0] if losses else None,
        "loss_last_window": losses[-1] if losses else None,
        "train_seconds": round(time.perf_counter() - started, 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    save_model(model, target, card)
    log(f"saved {target}")
    return TrainingReport(target, card)


def save_model(model, target: Path, card: dict[str, Any]) -> None:
    """The model and its card (``kbench_model.json``) under ``target``: saved beside it and renamed, so a crash
    never leaves a half-written model under the name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        model.save(str(tmp))
        (tmp / MODEL_CARD).write_text(json.dumps(card, indent=2), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
