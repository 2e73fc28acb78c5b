"""A local OpenAI-compatible chat endpoint for tests (no chat model runs offline fast enough for a test).

It speaks the real wire protocol (``POST /v1/chat/completions``, bearer auth) to the real ``openai`` client,
records every request, and answers deterministically from the prompt itself:
- an enrichment prompt gets "This chunk is from the document '<its first heading or line>'.";
- a rerank prompt gets a JSON array of the candidates ordered by words shared with the query;
- a code-example summary prompt gets "A <language> example: <the code's first non-empty line>".
So tests check kbench's side for real: prompts sent, caching, the key reaching only the endpoint, parsing.
A test that needs a weak model's answers (no index list, an empty rewrite) sets ``server.reply``; one that needs
an endpoint's refusals sets ``server.status`` (a prompt -> an HTTP error status, OpenAI's error body with it);
one that needs a refused key sets ``server.key`` (any other bearer key gets HTTP 401, ``GET /v1/models`` too).
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORD = re.compile(r"[a-z0-9]{4,}")


def situate(prompt: str) -> str:
    document = prompt.split("<document>\n", 1)[1].split("\n</document>", 1)[0]
    first = next((ln.lstrip("# ").strip() for ln in document.splitlines() if ln.strip()), "untitled")
    return f"This chunk is from the document '{first}'."


def rank_by_overlap(prompt: str) -> str:
    query = prompt.split("Query: ", 1)[1].split("\n", 1)[0]
    wanted = set(WORD.findall(query.lower()))
    listing = prompt.split("relevant):\n", 1)[1].rsplit("\n\nReturn:", 1)[0]
    parts = re.split(r"(?m)^\[(\d+)\] ", listing)[1:]  # [index, text, index, text, ...]
    candidates = list(zip(parts[0::2], parts[1::2]))
    order = sorted(candidates, key=lambda c: (-len(wanted & set(WORD.findall(c[1].lower()))), int(c[0])))
    return "```json\n" + json.dumps([int(i) for i, _ in order]) + "\n```"


def summarize_code(prompt: str) -> str:
    language, code = re.search(r"```(\w*)\n(.*?)\n```", prompt, re.DOTALL).groups()
    first = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return f"A {language} example: {first}"


def answer(prompt: str) -> str:
    if prompt.startswith("<document>"):
        return situate(prompt)
    if prompt.startswith("Summarize this code example"):
        return summarize_code(prompt)
    if prompt.startswith("Query: "):
        return rank_by_overlap(prompt)
    return "I do not understand the request."


@dataclass
class ChatServer:
    base_url: str
    requests: list[dict] = field(default_factory=list)  # {"authorization", "model", "prompt", "max_tokens"}
    reply: Callable[[str], str] | None = None  # prompt -> answer, instead of the deterministic ones above
    status: Callable[[str], int | None] | None = None  # prompt -> an error status (400, 402 ...), None: answer
    key: str | None = None  # the only bearer key accepted (None: any)
    model_lists: int = 0  # GET /v1/models answered (kbench checks an endpoint before any work)
    _server: ThreadingHTTPServer | None = None

    def prompts(self) -> list[str]:
        return [r["prompt"] for r in self.requests]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def start_chat_server() -> ChatServer:
    lock = threading.Lock()
    state = ChatServer(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def refused_key(self) -> bool:
            if state.key is None or self.headers.get("Authorization", "") == f"Bearer {state.key}":
                return False
            self.send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
            return True

        def do_GET(self):  # noqa: N802
            if not self.path.endswith("/models"):
                self.send_error(404)
                return
            with lock:
                state.model_lists += 1
            if not self.refused_key():
                self.send_json(200, {"object": "list", "data": [{"id": "test-chat", "object": "model"}]})

        def do_POST(self):  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            if self.refused_key():
                return
            prompt = body["messages"][-1]["content"]
            with lock:
                state.requests.append({"authorization": self.headers.get("Authorization", ""),
                                       "model": body.get("model"), "prompt": prompt,
                                       "max_tokens": body.get("max_tokens")})
            refused = state.status(prompt) if state.status else None
            if refused is not None:
                self.send_json(refused, {"error": {"message": f"the test server refuses with HTTP {refused}",
                                                   "type": "invalid_request_error", "code": None}})
                return
            self.send_json(200, {
                "id": f"chatcmpl-{len(state.requests)}", "object": "chat.completion", "created": 0,
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant",
                                         "content": (state.reply or answer)(prompt)}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            })

        def send_json(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):  # keep test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    state._server = server
    return state
