import pytest

from tests.enrichment.chat_server import start_chat_server


@pytest.fixture
def chat_server():
    server = start_chat_server()
    yield server
    server.close()
