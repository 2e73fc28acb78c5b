"""kbench serve's console: one line when the chat model answers (issue 42 item 13: 80 s of silence before)."""
from __future__ import annotations

import threading
import time

from kbench.cli.serve_cmd import say_when_chat_is_ready
from kbench.serve.server import ServeState


def test_a_line_when_the_chat_model_is_ready_or_failed(capsys):
    state = ServeState()  # the server's own state; its background load sets chat_ready when it ends
    watcher = threading.Thread(target=say_when_chat_is_ready, args=(state, time.monotonic() - 80))
    watcher.start()
    time.sleep(0.2)
    assert capsys.readouterr().out == ""  # nothing while it loads
    state.chat_ready.set()
    watcher.join(timeout=5)
    assert capsys.readouterr().out == "kbench serve: chat model ready after 80 s; chat requests answer now\n"

    broken = ServeState()
    broken.chat_error = "ChatModelMissing: SmolLM2 is not installed"
    broken.chat_ready.set()
    say_when_chat_is_ready(broken, time.monotonic())
    line = capsys.readouterr().out
    assert line.startswith("kbench serve: chat model failed to load after 0 s: ChatModelMissing") and \
        "embeddings still answer" in line
