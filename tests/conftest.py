"""Shared fixtures: real data from ../shared/datasets and the demo set, the real MiniLM model.

Tests keep runs small (a sample of SciFact, the demo set) and share one embedding cache for the whole
test run, so a text is embedded at most once per run.

`make test` runs the suite on pytest-xdist workers (``-n``, ``--dist loadgroup``). Each worker is a pytest session
of its own, so a session fixture runs once per worker; what is costly and the same for all of them (the embedding
cache, a trained model) lives in the run's folder every worker sees (``run_folder``) and is built once, under a file
lock (``built_once``), as the pytest-xdist docs do it. Tests that share a server, a module fixture or a fixed
path run on one worker: they carry an ``xdist_group`` mark (tests/xdist_groups.py adds it for module fixtures).
The workers share the cores: each runs its math libraries on its share of them (``share_the_cores``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
from filelock import FileLock

from kbench.embedding.tuning import tuning_dir
from kbench.paths import REPO_ROOT, shared_datasets_dir
from tests import xdist_groups
from tests.serve.running import start_kbench_serve

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def share_the_cores() -> None:
    """On an xdist worker, give torch, BLAS and FAISS (OpenMP) the worker's share of the cores, unless the caller
    chose: 3 workers on 2 cores each starting 2 threads spend their time waiting on each other (a cross-encoder
    pass took 3x as long on 2 threads as on 1 beside other work). Set here, before any test imports them; the
    subprocesses tests start (the ``kbench`` command, the docs' pages) inherit it; a run's own
    ``embedding.threads`` still wins."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        for name in THREAD_VARIABLES:
            os.environ.setdefault(name, share)


share_the_cores()

SCIFACT = shared_datasets_dir() / "scifact"
CHROMA = shared_datasets_dir() / "chroma_chunking"
DEMO = REPO_ROOT / "datasets" / "demo"


def run_folder(tmp_path_factory) -> Path:
    """A folder of this test run that every xdist worker sees: the parent of the workers' own base folders
    (``.../pytest-N/popen-gw0``), or the base folder itself when the run has no workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """``run_folder/name``, built by ``build(folder)`` by the first worker that asks; the others wait on a file
    lock and reuse it. A build that raised leaves no mark, so the next worker tries again (and fails the same)."""
    root = run_folder(tmp_path_factory)
    folder, done = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session", autouse=True)
def tuning_store(tmp_path_factory) -> Path:
    """The backend tunings of this test run (kbench/embedding/tuning.py: what ``embedding.backend: exact``, the
    default, and ``fast`` run here), in the run's folder every worker and every process a test starts sees
    (``KBENCH_TUNING_DIR``), so a test that points KBENCH_MODELS_DIR elsewhere does not tune again, and no test
    writes a tuning into the checkout. Seeded from the checkout's own store (a machine `make run` tuned); else the
    first test that resolves a model's backend measures it, once per run: the others wait on tune()'s lock."""
    if os.environ.get("KBENCH_TUNING_DIR"):  # the caller's choice
        return Path(os.environ["KBENCH_TUNING_DIR"])

    def seed(folder: Path) -> None:
        for kept in tuning_dir().glob("*.json"):
            shutil.copy2(kept, folder / kept.name)

    store = built_once(tmp_path_factory, "kbench-tuning", seed)
    os.environ["KBENCH_TUNING_DIR"] = str(store)
    return store


@pytest.fixture(scope="session")
def shared_cache_workspace(tmp_path_factory) -> Path:
    """A workspace of this worker (its own mlflow.db, runs/) whose cache/ is the run's one shared cache: every
    worker's tests read and write the same embeddings and chunks (kbench/cache.py writes each shard to a temp
    file and renames it into place, so concurrent writers never leave a half shard)."""
    workspace = tmp_path_factory.mktemp("kbench-workspace")
    cache = run_folder(tmp_path_factory) / "kbench-shared-cache"
    cache.mkdir(exist_ok=True)
    (workspace / "cache").symlink_to(cache, target_is_directory=True)
    return workspace


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


# --------------------------------------------------------------------------- xdist groups
# Session fixtures that hold one server for the tests that use them: those tests run on one worker, so the server
# starts once per run (a fixture built in the run folder instead, like the trained reranker, needs no group).
SHARED_SERVERS = {"kbench_server": "kbench-serve"}
# The group of the tests that use the PostgreSQL in kbench's default data directory (kbench/store/pgserver.py), one
# server for every process of the machine: they run one at a time, so no test stops it under another.
PGSERVER_DEFAULT = "pgserver-default"
# The group of the tests that write into the checkout's models folder (experiments/models: an ONNX export made with
# no workspace, the reranker notebook 04 trains when the folder has none) and of the test that watches the
# checkout for writes (tests/test_paths.py): run side by side, its check would see the others' files.
CHECKOUT_MODELS = "checkout-models"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """One xdist group per set of tests that share something, the slow tests first (tests/xdist_groups.py)."""
    xdist_groups.group_and_order(config, items, SHARED_SERVERS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return xdist_groups.make_scheduler(config, log)
