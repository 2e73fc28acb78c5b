"""Shared fixtures: real data from ../shared/datasets and the demo set, the real MiniLM model.

Tests keep runs small (a sample of SciFact, the demo set) and share one embedding cache for the whole
session, so a text is embedded at most once per test run.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kbench.paths import REPO_ROOT, shared_datasets_dir
from tests.serve.running import start_kbench_serve

SCIFACT = shared_datasets_dir() / "scifact"
CHROMA = shared_datasets_dir() / "chroma_chunking"
DEMO = REPO_ROOT / "datasets" / "demo"


@pytest.fixture(scope="session")
def shared_cache_workspace(tmp_path_factory) -> Path:
    """A workspace whose cache/ all tests share (embeddings computed once per session)."""
    return tmp_path_factory.mktemp("kbench-workspace")


def link_shared_cache(ws: Path, shared_cache_workspace: Path) -> Path:
    """Make ``ws/cache`` the session's shared cache, so texts embedded by any test are reused."""
    cache = shared_cache_workspace / "cache"
    cache.mkdir(exist_ok=True)
    (ws / "cache").symlink_to(cache, target_is_directory=True)
    return ws


@pytest.fixture
def workspace(tmp_path, shared_cache_workspace) -> Path:
    """A fresh workspace per test (own mlflow.db, runs/) that links the session's shared cache."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return link_shared_cache(ws, shared_cache_workspace)


def make_config(workspace: Path, **sections) -> dict:
    """A config dict for tests: small demo run, logging into ``workspace``."""
    config = {
        "name": "test",
        "workspace": str(workspace),
        "dataset": {"name": "demo"},
        "chunking": {"strategy": "fixed", "chunk_size": 600, "chunk_overlap": 100},
        "retrieval": {"legs": ["vector"], "top_k": 20},
        "evaluation": {"k": [1, 5, 10]},
        "tracking": {"experiment": "tests"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


@pytest.fixture
def config_for(workspace):
    return lambda **sections: make_config(workspace, **sections)


@pytest.fixture(scope="session")
def kbench_server():
    """One real ``kbench serve`` (catalogue embeddings, SmolLM2 chat) for the whole session: the chat model
    loads once, in the background from start. Tests keep generations short (small max_tokens)."""
    server = start_kbench_serve()
    yield server
    server.stop()
