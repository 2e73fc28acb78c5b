import pytest

from tests.enrichment.chat_server import start_chat_server
from tests.training.demo_reranker import train_demo_reranker


@pytest.fixture(scope="session")
def demo_reranker(tmp_path_factory, shared_cache_workspace):
    return train_demo_reranker(tmp_path_factory, shared_cache_workspace)


@pytest.fixture
def chat_server():
    server = start_chat_server()
    yield server
    server.close()
