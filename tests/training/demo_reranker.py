"""A small cross-encoder trained once per test run on the demo set (shared by training and rerank tests, on every
xdist worker: the first to ask trains it into the run folder, the others wait and load it).

Small on purpose: 16 questions, 2 hard negatives each, 128 tokens, 3 epochs at a high learning rate, so
that a few dozen steps visibly move the random head. The chunking matches tests/conftest.py's, so the
first-stage vectors come from the session's shared embedding cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from kbench.training import RerankerTrainingConfig, train_reranker
from tests.conftest import built_once

NAME = "demo-ce-test"
CHUNKING = {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100}


@dataclass
class TrainedReranker:
    name: str
    models_dir: Path
    config: RerankerTrainingConfig

    @property
    def path(self) -> Path:
        return self.models_dir / self.name


def train_demo_reranker(tmp_path_factory, shared_cache_workspace: Path) -> TrainedReranker:
    config = RerankerTrainingConfig(
        dataset="demo", out=NAME, max_queries=16, negatives=2, mine_depth=10, max_length=128, epochs=3,
        batch_size=8, learning_rate=1e-4, chunking=CHUNKING, workspace=str(shared_cache_workspace), seed=0,
    )

    def train(models: Path) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KBENCH_MODELS_DIR", str(models))
            train_reranker(config, log=lambda msg: None)

    return TrainedReranker(NAME, built_once(tmp_path_factory, "kbench-models", train), config)
