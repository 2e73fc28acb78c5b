"""A local OpenAI-compatible embeddings endpoint for tests: ``POST /v1/embeddings`` over the real wire protocol.

Each input gets a deterministic 8-d vector from the SHA-256 of its text (no model runs), answered as floats
or as base64 float32 as the client asks, and every request is recorded.
"""
from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIMENSION = 8


def text_vector(text: str) -> np.ndarray:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.frombuffer(digest, dtype=np.uint8)[:DIMENSION].astype(np.float32) - 127.5


@dataclass
class EmbeddingsServer:
    base_url: str
    requests: list[dict] = field(default_factory=list)  # {"authorization", "model", "input"}
    _server: ThreadingHTTPServer | None = None

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def start_embeddings_server() -> EmbeddingsServer:
    lock = threading.Lock()
    state = EmbeddingsServer(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not self.path.endswith("/embeddings"):
                self.send_error(404)
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with lock:
                state.requests.append({"authorization": self.headers.get("Authorization", ""),
                                       "model": body.get("model"), "input": texts})
            as_base64 = body.get("encoding_format") == "base64"
            data = [{"object": "embedding", "index": i,
                     "embedding": base64.b64encode(text_vector(t).astype("<f4").tobytes()).decode() if as_base64
                     else text_vector(t).tolist()} for i, t in enumerate(texts)]
            payload = json.dumps({"object": "list", "data": data, "model": body.get("model"),
                                  "usage": {"prompt_tokens": 0, "total_tokens": 0}}).encode()
            self.send_response(200)
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
