import pytest

from tests.training.demo_reranker import train_demo_reranker


@pytest.fixture(scope="session")
def demo_reranker(tmp_path_factory, shared_cache_workspace):
    return train_demo_reranker(tmp_path_factory, shared_cache_workspace)
