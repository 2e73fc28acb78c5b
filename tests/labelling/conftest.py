"""Two real runs on the demo set (BM25 over fixed chunks of 400 and of 900 characters), logged once for the module,
and the pool `kbench label` builds from them."""
from __future__ import annotations

import pytest

from kbench.config import load_experiment
from kbench.labelling.pool import build_pool
from kbench.runner import run_experiment
from tests.conftest import link_shared_cache, make_config


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory, shared_cache_workspace):
    """(workspace, tracking uri, [run ids]): two BM25 runs of 24 demo questions, traces in MLflow."""
    root = tmp_path_factory.mktemp("label")
    ws = root / "ws"
    ws.mkdir()
    link_shared_cache(ws, shared_cache_workspace)
    ids = []
    for size in (400, 900):
        config = load_experiment(make_config(ws, name=f"fixed-{size}",
                                             dataset={"name": "demo", "max_queries": 24, "seed": 1},
                                             chunking={"strategy": "fixed", "chunk_size": size, "chunk_overlap": 0},
                                             retrieval={"legs": ["bm25"], "top_k": 10}, evaluation={"k": [5, 10]}))
        ids.append(run_experiment(config, progress=False, log=True).run_id)
    return ws, f"sqlite:///{ws / 'mlflow.db'}", ids


@pytest.fixture(scope="module")
def demo_pool(demo_runs):
    _, uri, ids = demo_runs
    return build_pool(ids, k=5, tracking_uri=uri, seed=3)
